"""ShareGPT JSON → the canonical Workload.

The file is one JSON array: `[{"id": ..., "conversations": [{"from": "human"|"gpt", "value": text}, ...]}]`.
Every human turn answered by the next turn becomes a request of the conversation's session: its prompt is
the chat messages so far (kept as JSON in `prompt`), its output the answer's length. Token counts come
from a TokenCounter (a local tokenizer.json, or the documented approximation; recorded in
`Workload.token_counter`), and the prompts' chained block hashes make the turns' prefix sharing visible.

ShareGPT has no timing: every arrival_s is 0 and time_unit is "none" (workload.UNTIMED). Replay it
through `synthetic_arrivals.with_synthetic_arrivals`. Unanswered human turns, empty answers and
conversations without a human turn are left out and counted; a malformed record (a key written twice
in one object included) or a turn needing more than MAX_REQUEST_TOKENS fails the read with file, the
line where the record starts, and the reason. A ShareGPT file is one JSON document, small by nature
(hundreds of MB at most): it is read whole, and `scan_sharegpt` hands its rows over as batches.
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson

from workloads.prompts.block_hasher import DEFAULT_BLOCK_TOKENS, PromptBlockIds
from workloads.prompts.chat_text import render_prompt
from workloads.prompts.token_counter import ApproxTokenCounter, TokenCounter
from workloads.readers.json_strict import duplicate_key_reason, first_ambiguous_element
from workloads.readers.trace_source import json_document
from workloads.trace_scan import BATCH_ROWS, TraceScan, collect
from workloads.workload import UNTIMED, TraceFormat, TraceFormatError, Workload
from workloads.workload_builder import MAX_REQUEST_TOKENS, ExclusionTally, RequestColumns

# ShareGPT dumps name the speakers in several ways; each maps to an OpenAI chat role.
ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "chatgpt": "assistant",
    "bing": "assistant",
    "bard": "assistant",
    "assistant": "assistant",
    "system": "system",
}


def _record_line(text: str, index: int) -> int | None:
    """The line where array element `index` starts; only called on the error path, so it may be slow."""
    decoder = json.JSONDecoder()
    position = text.index("[") + 1
    for current in range(index + 1):
        while text[position] in " \t\r\n,":
            position += 1
        if current == index:
            return text.count("\n", 0, position) + 1
        _, position = decoder.raw_decode(text, position)
    return None


def _check_no_duplicate_keys(path: Path, text: str) -> None:
    """TraceFormatError at the record holding a key written twice in one object (orjson keeps the last)."""
    if duplicate_key_reason(text) is None:
        return
    found = first_ambiguous_element(text)
    if found is None:  # the duplicate is outside every record: name the document
        raise TraceFormatError(str(path), 1, str(duplicate_key_reason(text)))
    index, position, reason = found
    raise TraceFormatError(str(path), text.count("\n", 0, position) + 1, f"conversation {index}: {reason}")


def _messages(record: object) -> list[dict[str, str]]:
    """The record's turns as chat messages; ValueError with the reason when it is malformed."""
    if not isinstance(record, dict):
        raise ValueError(f"expected a conversation object, got {type(record).__name__}")
    turns = record.get("conversations")
    if not isinstance(turns, list):
        raise ValueError("missing or non-list field conversations")
    messages = []
    for position, turn in enumerate(turns):
        if not isinstance(turn, dict) or not isinstance(turn.get("value"), str) or "from" not in turn:
            raise ValueError(f"conversations[{position}] must be an object with string fields from and value")
        role = ROLES.get(str(turn["from"]).lower())
        if role is None:
            raise ValueError(f"conversations[{position}].from is {turn['from']!r}: expected one of {', '.join(ROLES)}")
        messages.append({"role": role, "content": turn["value"]})
    return messages


def _session_key(record: dict, index: int) -> str:
    raw_id = record.get("id")
    if raw_id is None:
        return str(index)
    if type(raw_id) not in (str, int):  # a bool, number or object as an id is a misread record
        raise ValueError(f"id must be a string or an integer, got {raw_id!r}")
    return str(raw_id)


def _rows(path: Path, counter: TokenCounter, block_size: int) -> tuple[RequestColumns, ExclusionTally]:
    """Every answered human turn of the file; TraceFormatError(path, line, reason) on the first bad record."""
    text, records = json_document(path)
    if not isinstance(records, list):
        raise TraceFormatError(str(path), 1, f"expected a JSON array of conversations, got {type(records).__name__}")
    _check_no_duplicate_keys(path, text)
    prompts = PromptBlockIds(counter, block_size)
    rows = RequestColumns()
    excluded = ExclusionTally()
    seen_sessions: dict[str, int] = {}
    for index, record in enumerate(records):
        try:
            messages = _messages(record)
            raw_id = _session_key(record, index)
        except ValueError as exc:
            raise TraceFormatError(str(path), _record_line(text, index), f"conversation {index}: {exc}") from None
        # Some dumps repeat an id for the parts of one long conversation: keep the sessions apart.
        seen_sessions[raw_id] = seen_sessions.get(raw_id, 0) + 1
        session = raw_id if seen_sessions[raw_id] == 1 else f"{raw_id}#{seen_sessions[raw_id]}"
        turn = 0
        for position, message in enumerate(messages):
            if message["role"] != "user":
                continue
            answer = messages[position + 1] if position + 1 < len(messages) else None
            if answer is None or answer["role"] != "assistant":
                excluded.add("unanswered human turn")
                continue
            output_tokens = counter.count(answer["content"])
            if output_tokens == 0:
                excluded.add("empty answer")
                continue
            context = messages[: position + 1]
            input_tokens, blocks = prompts.blocks(render_prompt(context))
            if input_tokens + output_tokens > MAX_REQUEST_TOKENS:
                reason = (
                    f"conversation {index}: turn {turn} needs {input_tokens} + {output_tokens} tokens, "
                    f"more than {MAX_REQUEST_TOKENS}"
                )
                raise TraceFormatError(str(path), _record_line(text, index), reason)
            rows.append(
                f"{session}/{turn}",
                0.0,
                input_tokens,
                output_tokens,
                session_id=session,
                turn=turn,
                prefix_blocks=blocks,
                prompt=orjson.dumps(context).decode(),
            )
            turn += 1
        if not any(message["role"] == "user" for message in messages):
            excluded.add("conversation without a human turn")
    return rows, excluded


def scan_sharegpt(
    path: str | Path, counter: TokenCounter | None = None, block_size: int = DEFAULT_BLOCK_TOKENS
) -> TraceScan:
    """Read a ShareGPT JSON file now (it is one document) and hand its rows over as batches;
    raises TraceFormatError(path, line, reason) on the first bad record."""
    path = Path(path)
    counter = counter if counter is not None else ApproxTokenCounter()
    rows, excluded = _rows(path, counter, block_size)
    return TraceScan(
        name=path.stem,
        source_path=str(path),
        trace_format=TraceFormat.SHAREGPT,
        time_unit=UNTIMED,
        block_size=block_size,
        batches=iter(rows.table().to_batches(max_chunksize=BATCH_ROWS)),
        excluded=excluded,
        token_counter=counter.name,
        arrival_process="none",
        empty_reason="no requests: no answered human turn in the file",
    )


def read_sharegpt(
    path: str | Path, counter: TokenCounter | None = None, block_size: int = DEFAULT_BLOCK_TOKENS
) -> Workload:
    """Read a ShareGPT JSON file; raises TraceFormatError(path, line, reason) on the first bad record."""
    return collect(scan_sharegpt(path, counter, block_size))
