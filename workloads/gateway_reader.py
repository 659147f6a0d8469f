"""The OpenAI-style request log a gateway captures (JSON Lines) → the canonical Workload.

One request per line, fields by name:
  {"timestamp": ISO-8601 text or epoch seconds,
   "session_id" | "conversation_id": optional (also read from request.metadata),
   "request":  {"model", "messages": [...] | "prompt": "...", "max_tokens" | "max_completion_tokens", ...},
   "response": {"usage": {"prompt_tokens", "completion_tokens",
                          "prompt_tokens_details": {"cached_tokens"}?,
                          "reasoning_tokens"? | "completion_tokens_details": {"reasoning_tokens"}?}, ...}}
Token counts are the server's usage (prompt_tokens falls back to the TokenCounter when absent); block
hashes come from the prompt's text through the same counter (block boundaries are in its tokens).
Arrivals are offsets from the earliest timestamp; turns are numbered by timestamp within a session.
A response without usage (an error, a dropped stream) is a failed request: left out and counted.
The text stays in `prompt`; `gateway_capture` strips it. A malformed line fails the read with file,
line and reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import orjson

from workloads.block_hasher import DEFAULT_BLOCK_TOKENS, PromptBlockIds
from workloads.chat_text import render_prompt
from workloads.token_counter import ApproxTokenCounter, TokenCounter
from workloads.trace_scan import TraceScan, scan_of_workload
from workloads.trace_source import jsonl_records
from workloads.workload import TraceFormat, TraceFormatError, Workload
from workloads.workload_builder import INT32_MAX, ExclusionTally, RequestColumns

FAILED_REASON = "failed (response without usage)"


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


_SESSION_KEYS = ("session_id", "conversation_id")


def _epoch_s(value: object) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(f"timestamp {value!r} is neither ISO-8601 nor epoch seconds") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        return moment.timestamp()
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


def _session(line: dict, request: dict) -> str | None:
    metadata = request.get("metadata")
    if not isinstance(metadata, dict):
        metadata = {}
    for holder in (line, metadata):
        for key in _SESSION_KEYS:
            if holder.get(key) not in (None, ""):
                return str(holder[key])
    return None


def _reasoning_tokens(usage: dict) -> int | None:
    details = usage.get("completion_tokens_details")
    if isinstance(details, dict) and details.get("reasoning_tokens") is not None:
        return _count(details, "reasoning_tokens", 0)
    return _count(usage, "reasoning_tokens", 0)


def read_gateway(
    path: str | Path,
    counter: TokenCounter | None = None,
    block_size: int = DEFAULT_BLOCK_TOKENS,
    model: str | None = None,
) -> Workload:
    """Read a gateway request log; `model` keeps only requests for that model.

    Raises TraceFormatError(path, line, reason) on the first malformed line.
    """
    path = Path(path)
    counter = counter if counter is not None else ApproxTokenCounter()
    prompts = PromptBlockIds(counter, block_size)
    excluded = ExclusionTally()
    parsed: list[_Parsed] = []  # arrivals are rebased once the earliest timestamp is known
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
            prompt = _prompt(request)
            if model is not None and request.get("model") != model:
                excluded.add(f"other model than {model}")
                continue
            usage = (response or {}).get("usage")
            if not isinstance(usage, dict) or usage.get("completion_tokens") is None:
                excluded.add(FAILED_REASON)
                continue
            output_tokens = _count(usage, "completion_tokens", 0)
            assert output_tokens is not None  # completion_tokens present: checked above
            logged_input = _count(usage, "prompt_tokens", 1)
            reasoning = _reasoning_tokens(usage)
        except ValueError as exc:
            raise TraceFormatError(str(path), line, str(exc)) from None
        input_tokens, blocks = prompts.blocks(render_prompt(prompt), logged_input)
        counted_prompts += logged_input is None
        text = prompt if isinstance(prompt, str) else orjson.dumps(prompt).decode()
        parsed.append(
            _Parsed(line, epoch_s, input_tokens, output_tokens, blocks, _session(raw, request), reasoning, text)
        )
    if not parsed:
        detail = f" ({excluded.summary})" if excluded.count else ""
        raise TraceFormatError(str(path), None, f"no requests to replay: the log holds no completed request{detail}")
    start_s = min(row.epoch_s for row in parsed)
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
        )
    counts = "usage" if counted_prompts == 0 else f"usage, {counted_prompts} prompt counts by {counter.name}"
    return Workload(
        name=path.stem,
        source_path=str(path),
        trace_format=TraceFormat.GATEWAY,
        time_unit="s",
        block_size=block_size,
        table=rows.table(number_turns=True),
        excluded_rows=excluded.count,
        excluded_reason=excluded.summary,
        # Block boundaries are in the counter's tokens, whatever counted the prompts.
        token_counter=f"{counts}; blocks by {counter.name}",
    )


# Transitional: reads the whole file, then streams it. Replaced by a streaming scan.
def scan_gateway(
    path: str | Path,
    counter: TokenCounter | None = None,
    block_size: int = DEFAULT_BLOCK_TOKENS,
    model: str | None = None,
) -> TraceScan:
    return scan_of_workload(read_gateway(path, counter, block_size, model))
