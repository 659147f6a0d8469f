"""The OpenAI-style request log a gateway captures (JSON Lines) → the canonical Workload.

One request per line, fields by name:
  {"timestamp": ISO-8601 text or epoch seconds,
   "session_id" | "conversation_id": optional (also read from request.metadata),
   "request":  {"model", "messages": [...] | "prompt": "...", "max_tokens" | "max_completion_tokens",
                "response_format"?: {"type": "json_schema" | "json_object" | "text", ...}, "regex"?, ...},
   "response": {"usage": {"prompt_tokens", "completion_tokens",
                          "prompt_tokens_details": {"cached_tokens"}?,
                          "reasoning_tokens"? | "completion_tokens_details": {"reasoning_tokens"}?}, ...}}
Token counts are the server's usage (prompt_tokens falls back to the TokenCounter when absent); block
hashes come from the prompt's text through the same counter (block boundaries are in its tokens).
Arrivals are offsets from the earliest timestamp; turns are numbered by timestamp within a session.
A response without usage (an error, a dropped stream) is a failed request: left out and counted.
A request's response_format (or SGLang's extra `regex`) is kept, checked (a schema must be valid JSON
Schema, a regex must compile) and marked constrained: the application sent it to the server; "text" is
free-form. The text stays in `prompt`; `gateway_capture` strips it. A malformed line fails the read with file,
line and reason: a key written twice in one object, a timestamp outside 1970..2100 (epoch seconds) or
one stretching the log past MAX_TRACE_SPAN_S, a count that is not an integer (true is not 1),
reasoning tokens beyond the completion tokens they are part of, a request past MAX_REQUEST_TOKENS.
A gateway log is small by nature (one capture window): it is read whole, and `scan_gateway` hands its
rows over as batches.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import orjson

from workloads.prompts.block_hasher import DEFAULT_BLOCK_TOKENS, PromptBlockIds
from workloads.prompts.chat_text import render_prompt
from workloads.prompts.response_format import parse_response_format
from workloads.prompts.token_counter import ApproxTokenCounter, TokenCounter
from workloads.readers.trace_source import jsonl_records
from workloads.trace_scan import BATCH_ROWS, TraceScan, collect
from workloads.workload import TraceFormat, TraceFormatError, Workload
from workloads.workload_builder import (
    INT32_MAX,
    MAX_REQUEST_TOKENS,
    MAX_TRACE_SPAN_S,
    ExclusionTally,
    RequestColumns,
)

FAILED_REASON = "failed (response without usage)"
# Timestamps are read as epoch seconds (or ISO-8601 text) between 1970-01-01 and 2100-01-01 UTC: a number
# past the end is most likely milliseconds or nanoseconds, and is refused rather than misread.
MAX_EPOCH_S = 4_102_444_800


@dataclass(frozen=True, slots=True)
class _Parsed:
    line: int
    epoch_s: float
    input_tokens: int
    output_tokens: int
    prefix_blocks: list[int]
    session_id: str | None
    reasoning_tokens: int | None
    prompt: str
    response_format: str | None


_SESSION_KEYS = ("session_id", "conversation_id")


def _epoch_s(value: object) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not 0 <= value < MAX_EPOCH_S:
            raise ValueError(
                f"timestamp {value!r} is not epoch seconds between 1970 and 2100 (0 to {MAX_EPOCH_S}): "
                "non-negative epoch seconds expected, not milliseconds"
            )
        return float(value)
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(f"timestamp {value!r} is neither ISO-8601 nor epoch seconds") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        epoch_s = moment.timestamp()
        if not 0 <= epoch_s < MAX_EPOCH_S:
            raise ValueError(f"timestamp {value!r} is outside 1970-01-01 to 2100-01-01")
        return epoch_s
    raise ValueError(f"timestamp must be ISO-8601 text or non-negative epoch seconds, got {value!r}")


def _count(holder: dict, key: str, minimum: int) -> int | None:
    value = holder.get(key)
    if value is None:
        return None
    if type(value) is not int or not minimum <= value <= INT32_MAX:
        raise ValueError(f"usage.{key} must be an integer >= {minimum}, got {value!r}")
    return value


def _prompt(request: dict) -> str | list[dict]:
    if "messages" in request:
        messages = request["messages"]
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise ValueError("request.messages must be a non-empty list of message objects")
        return messages
    prompt = request.get("prompt")
    if not isinstance(prompt, str) or not prompt:
        raise ValueError("request needs messages (chat) or a non-empty string prompt (completions)")
    return prompt


def _response_format(request: dict) -> str | None:
    """The request's format as canonical JSON (workloads/prompts/response_format.py), None when free-form."""
    value, regex = request.get("response_format"), request.get("regex")
    for unsupported in ("ebnf", "structural_tag"):
        if request.get(unsupported) is not None:
            raise ValueError(f"request.{unsupported}: only json_schema, json_object and regex formats are replayed")
    if isinstance(value, dict) and value.get("type") == "text":
        value = None
    if value is not None and regex is not None:
        raise ValueError("request has both response_format and regex: only one constraint can be set")
    try:
        if regex is not None:
            return parse_response_format({"type": "regex", "regex": regex}).text
        return parse_response_format(value).text if value is not None else None
    except ValueError as exc:
        raise ValueError(f"request.{'regex' if regex is not None else 'response_format'}: {exc}") from None


def _session(line: dict, request: dict) -> str | None:
    metadata = request.get("metadata")
    if not isinstance(metadata, dict):
        metadata = {}
    for holder in (line, metadata):
        for key in _SESSION_KEYS:
            value = holder.get(key)
            if value in (None, ""):
                continue
            if type(value) not in (str, int):  # true, 1.5 or an object as a session id is a misread line
                raise ValueError(f"{key} must be a string or an integer, got {value!r}")
            return str(value)
    return None


def _reasoning_tokens(usage: dict) -> int | None:
    details = usage.get("completion_tokens_details")
    if details is not None and not isinstance(details, dict):
        raise ValueError(f"usage.completion_tokens_details must be an object, got {type(details).__name__}")
    if details is not None and details.get("reasoning_tokens") is not None:
        return _count(details, "reasoning_tokens", 0)
    return _count(usage, "reasoning_tokens", 0)


class _Span:
    """The earliest and latest timestamp so far, to refuse the line that stretches the log past the bound."""

    def __init__(self) -> None:
        self.first_s: float | None = None
        self.last_s: float | None = None

    def add(self, epoch_s: float) -> None:
        first_s = epoch_s if self.first_s is None else min(self.first_s, epoch_s)
        last_s = epoch_s if self.last_s is None else max(self.last_s, epoch_s)
        if last_s - first_s > MAX_TRACE_SPAN_S:
            raise ValueError(
                f"timestamp {epoch_s:.0f} stretches the log to {last_s - first_s:.0f} s, "
                f"more than {MAX_TRACE_SPAN_S} s (400 days)"
            )
        self.first_s, self.last_s = first_s, last_s


def _rows(
    path: Path, counter: TokenCounter, block_size: int, model: str | None
) -> tuple[RequestColumns, ExclusionTally, int]:
    """(the completed requests, what was left out, how many prompts the counter counted)."""
    prompts = PromptBlockIds(counter, block_size)
    excluded = ExclusionTally()
    parsed: list[_Parsed] = []  # arrivals are rebased once the earliest timestamp is known
    span = _Span()
    counted_prompts = 0
    for line, raw in jsonl_records(path):
        try:
            if not isinstance(raw, dict):
                raise ValueError(f"expected a JSON object, got {type(raw).__name__}")
            missing = [key for key in ("timestamp", "request", "response") if key not in raw]
            if missing:
                raise ValueError(f"missing field(s) {', '.join(missing)}")
            request, response = raw["request"], raw["response"]
            if not isinstance(request, dict) or not isinstance(response, dict | None):
                raise ValueError("request must be an object and response an object or null")
            epoch_s = _epoch_s(raw["timestamp"])
            span.add(epoch_s)
            prompt = _prompt(request)
            response_format = _response_format(request)
            session = _session(raw, request)
            if model is not None and request.get("model") != model:
                excluded.add(f"other model than {model}")
                continue
            usage = (response or {}).get("usage")
            if usage is not None and not isinstance(usage, dict):
                raise ValueError(f"response.usage must be an object, got {type(usage).__name__}")
            if usage is None or usage.get("completion_tokens") is None:
                excluded.add(FAILED_REASON)
                continue
            output_tokens = _count(usage, "completion_tokens", 0)
            assert output_tokens is not None  # completion_tokens present: checked above
            logged_input = _count(usage, "prompt_tokens", 1)
            reasoning = _reasoning_tokens(usage)
            if reasoning is not None and reasoning > output_tokens:
                raise ValueError(
                    f"usage reasoning_tokens {reasoning} exceeds completion_tokens {output_tokens} (it is part of them)"
                )
            if logged_input is not None:
                _check_size(logged_input, output_tokens)
            input_tokens, blocks = prompts.blocks(render_prompt(prompt), logged_input)
            _check_size(input_tokens, output_tokens)
        except ValueError as exc:
            raise TraceFormatError(str(path), line, str(exc)) from None
        counted_prompts += logged_input is None
        text = prompt if isinstance(prompt, str) else orjson.dumps(prompt).decode()
        parsed.append(
            _Parsed(line, epoch_s, input_tokens, output_tokens, blocks, session, reasoning, text, response_format)
        )
    start_s = min((row.epoch_s for row in parsed), default=0.0)
    rows = RequestColumns()
    for row in parsed:
        rows.append(
            str(row.line - 1),
            row.epoch_s - start_s,
            row.input_tokens,
            row.output_tokens,
            session_id=row.session_id,
            prefix_blocks=row.prefix_blocks,
            prompt=row.prompt,
            reasoning_tokens=row.reasoning_tokens,
            response_format=row.response_format,
            constrained=True if row.response_format is not None else None,
        )
    return rows, excluded, counted_prompts


def _check_size(input_tokens: int, output_tokens: int) -> None:
    if input_tokens + output_tokens > MAX_REQUEST_TOKENS:
        raise ValueError(f"the request needs {input_tokens} + {output_tokens} tokens, more than {MAX_REQUEST_TOKENS}")


def scan_gateway(
    path: str | Path,
    counter: TokenCounter | None = None,
    block_size: int = DEFAULT_BLOCK_TOKENS,
    model: str | None = None,
) -> TraceScan:
    """Read a gateway request log now and hand its rows over as batches; `model` keeps only requests
    for that model. Raises TraceFormatError(path, line, reason) on the first malformed line."""
    path = Path(path)
    counter = counter if counter is not None else ApproxTokenCounter()
    rows, excluded, counted_prompts = _rows(path, counter, block_size, model)
    counts = "usage" if counted_prompts == 0 else f"usage, {counted_prompts} prompt counts by {counter.name}"
    return TraceScan(
        name=path.stem,
        source_path=str(path),
        trace_format=TraceFormat.GATEWAY,
        time_unit="s",
        block_size=block_size,
        # Rebased, sorted and turns numbered already: the whole log is in memory.
        batches=iter(rows.table(number_turns=True).to_batches(max_chunksize=BATCH_ROWS)),
        excluded=excluded,
        # Block boundaries are in the counter's tokens, whatever counted the prompts.
        token_counter=f"{counts}; blocks by {counter.name}",
        empty_reason="no requests to replay: the log holds no completed request",
    )


def read_gateway(
    path: str | Path,
    counter: TokenCounter | None = None,
    block_size: int = DEFAULT_BLOCK_TOKENS,
    model: str | None = None,
) -> Workload:
    """Read a gateway request log into memory; `model` keeps only requests for that model.

    Raises TraceFormatError(path, line, reason) on the first malformed line.
    """
    return collect(scan_gateway(path, counter, block_size, model))
