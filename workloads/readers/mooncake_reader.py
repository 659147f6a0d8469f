"""Mooncake JSONL traces → the canonical Workload, streamed in bounded memory.

One request per line, fields read by name:
`{"timestamp": <ms>, "input_length": <tokens>, "output_length": <tokens>, "hash_ids": [<block hash>, ...]}`.
`hash_ids` are prefix-block hashes of 512 tokens each (the last block may be partial), so a line must
carry exactly ceil(input_length / 512) of them. request_id is the 0-based physical line (blank lines
count). A bad line fails the read with file, line and reason (docs/workloads.md, "Trace formats").

How: the file is read in chunks of whole lines (workloads/readers/jsonl_batches.py). A line that is surely a
plain four-field object (it starts with `{`, ends with `}`, holds exactly the 8 quotes of four keys and
only bytes such a line can hold) goes to Arrow's JSON parser with the chunk's other such lines, and the
chunk's rules are checked on whole columns. Any other line (extra fields, odd spacing, anything the
fast path cannot prove) is decoded on its own by orjson, checked for duplicate keys and by `_check_line`.
When Arrow's parser or a column check finds a bad row, the chunk's lines go through that slow path in
order, which names the first bad line and its precise reason: only the error path is slow.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from workloads.readers.json_strict import duplicate_key_reason, surely_unique_keys
from workloads.readers.jsonl_batches import LineChunk, line_chunks
from workloads.trace_scan import BATCH_ROWS, TraceScan, batch_of, collect
from workloads.workload import TraceFormat, TraceFormatError, Workload
from workloads.workload_builder import INT32_MAX, INT64_MAX, INT64_MIN, MAX_REQUEST_TOKENS, MAX_TRACE_SPAN_S

MOONCAKE_BLOCK_TOKENS = 512
# Timestamps are ms from the trace's start, so a trace spans at most this (an epoch time is refused).
MAX_TIMESTAMP_MS = MAX_TRACE_SPAN_S * 1000
_FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")
_ARROW_SCHEMA = pa.schema(
    [
        ("timestamp", pa.int64()),
        ("input_length", pa.int64()),
        ("output_length", pa.int64()),
        ("hash_ids", pa.list_(pa.int64())),
    ]
)
# Bytes a plain four-field line can hold: JSON punctuation, digits, minus, space, tab and the keys' letters
# (true/false/null are letters too, and fail Arrow's int64 columns). Anything else takes the slow path.
_FAST_BYTES = b'{}[]:,"-0123456789 \t\nabcdefghijklmnopqrstuvwxyz_'
_FAST_BYTE = np.zeros(256, dtype=bool)
_FAST_BYTE[np.frombuffer(_FAST_BYTES, dtype=np.uint8)] = True
_FAST_QUOTES = 2 * len(_FIELDS)


def _is_int(value: object) -> bool:
    # JSON true/false load as bool, which Python counts as int: a length of `true` is a bad line.
    return type(value) is int


def _check_line(raw: object) -> str | None:
    """The reason a decoded line is not a valid Mooncake request, or None when it is."""
    if not isinstance(raw, dict):
        return f"expected a JSON object, got {type(raw).__name__}"
    missing = [name for name in _FIELDS if name not in raw]
    if missing:
        return f"missing field(s) {', '.join(missing)}"
    timestamp = raw["timestamp"]
    if not _is_int(timestamp) or not 0 <= timestamp <= MAX_TIMESTAMP_MS:
        return (
            f"timestamp must be a non-negative integer (ms from the trace start) of at most {MAX_TIMESTAMP_MS} "
            f"(400 days), got {timestamp!r}"
        )
    input_length = raw["input_length"]
    if not _is_int(input_length) or not 1 <= input_length <= INT32_MAX:
        return f"input_length must be a positive integer, got {input_length!r}"
    output_length = raw["output_length"]
    if not _is_int(output_length) or not 0 <= output_length <= INT32_MAX:
        return f"output_length must be a non-negative integer, got {output_length!r}"
    if input_length + output_length > MAX_REQUEST_TOKENS:
        return (
            f"input_length + output_length must be at most {MAX_REQUEST_TOKENS} tokens, "
            f"got {input_length + output_length}"
        )
    hash_ids = raw["hash_ids"]
    if not isinstance(hash_ids, list):
        return f"hash_ids must be a list of integers, got {type(hash_ids).__name__}"
    # Types first (a set of types is built in C), then the range: bool is not int here.
    if hash_ids and (set(map(type, hash_ids)) != {int} or min(hash_ids) < INT64_MIN or max(hash_ids) > INT64_MAX):
        return "hash_ids must hold only 64-bit integers"
    expected_blocks = math.ceil(input_length / MOONCAKE_BLOCK_TOKENS)
    if len(hash_ids) != expected_blocks:
        return (
            f"{len(hash_ids)} hash_ids for input_length {input_length}: expected "
            f"ceil({input_length}/{MOONCAKE_BLOCK_TOKENS}) = {expected_blocks}"
        )
    return None


def _decoded_line(line: bytes) -> tuple[dict, None] | tuple[None, str]:
    """(the line's fields, None) for a valid request line, else (None, the reason)."""
    try:
        raw = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        return None, f"invalid JSON at column {exc.colno}: {exc.msg}"
    reason = (None if surely_unique_keys(line, raw) else duplicate_key_reason(line)) or _check_line(raw)
    return (raw, None) if reason is None else (None, reason)


@dataclass(frozen=True, slots=True)
class _Columns:
    """The chunk's requests as the four source columns plus each one's 0-based physical line."""

    lines: np.ndarray  # int64, 0-based physical line = request_id
    timestamp: np.ndarray  # int64 ms
    inputs: np.ndarray  # int64
    outputs: np.ndarray  # int64
    hashes: pa.ListArray  # list<int64>

    def batch(self) -> pa.RecordBatch:
        return batch_of(
            {
                "request_id": pc.cast(pa.array(self.lines, pa.int64()), pa.string()),
                # ms / 1000.0 in float64, as Python's int / float does it (exact for any allowed timestamp).
                "arrival_s": pa.array(self.timestamp.astype(np.float64) / 1000.0, pa.float64()),
                "input_tokens": pa.array(self.inputs, pa.int64()),
                "output_tokens": pa.array(self.outputs, pa.int64()),
                "prefix_blocks": self.hashes,
            }
        )


def _slow_columns(path: Path, chunk: LineChunk, indices: np.ndarray) -> _Columns:
    """The chunk's lines `indices` decoded one by one; TraceFormatError at the first bad one."""
    lines, timestamps, inputs, outputs, hashes = [], [], [], [], []
    for index in indices.tolist():
        line = chunk.line(index)
        if not line.strip():
            continue
        raw, reason = _decoded_line(line)
        if raw is None:
            raise TraceFormatError(str(path), chunk.first_line + index + 1, str(reason))
        lines.append(chunk.first_line + index)
        timestamps.append(raw["timestamp"])
        inputs.append(raw["input_length"])
        outputs.append(raw["output_length"])
        hashes.append(raw["hash_ids"])
    return _Columns(
        np.array(lines, np.int64),
        np.array(timestamps, np.int64),
        np.array(inputs, np.int64),
        np.array(outputs, np.int64),
        pa.array(hashes, pa.list_(pa.int64())),
    )


def _fast_lines(chunk: LineChunk) -> np.ndarray:
    """Which lines are surely plain four-field objects Arrow may parse (bool per line)."""
    data = chunk.bytes_view()
    lengths = chunk.ends - chunk.starts
    if not len(data):
        return np.zeros(chunk.count, dtype=bool)
    first = data[np.minimum(chunk.starts, len(data) - 1)]
    last = data[np.maximum(chunk.ends - 1, 0)]
    quotes = chunk.count_per_line(np.flatnonzero(data == ord('"')))
    fast = (lengths >= 2) & (first == ord("{")) & (last == ord("}")) & (quotes == _FAST_QUOTES)
    if chunk.data.translate(None, _FAST_BYTES):  # some byte a plain line cannot hold: find its lines
        fast &= chunk.count_per_line(np.flatnonzero(~_FAST_BYTE[data])) == 0
    return fast


def _arrow_columns(chunk: LineChunk, fast: np.ndarray) -> _Columns | None:
    """The fast lines parsed by Arrow and checked on whole columns; None when any check fails (the
    caller then takes the slow path, which finds the bad line and says why)."""
    indices = np.flatnonzero(fast)
    if len(indices) == chunk.count:
        buffer = chunk.data
    else:
        buffer = b"\n".join(chunk.line(i) for i in indices.tolist())
    longest = int((chunk.ends - chunk.starts)[indices].max())
    try:
        table = pj.read_json(
            pa.BufferReader(buffer),
            read_options=pj.ReadOptions(use_threads=True, block_size=max(2**20, 2 * longest + 2)),
            parse_options=pj.ParseOptions(explicit_schema=_ARROW_SCHEMA, unexpected_field_behavior="ignore"),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if table.num_rows != len(indices):  # e.g. one line was two objects: not the lines we classified
        return None
    table = table.combine_chunks()
    hashes = table.column("hash_ids").chunk(0) if table.num_rows else pa.array([], pa.list_(pa.int64()))
    if any(table.column(name).null_count for name in _FIELDS) or pc.list_flatten(hashes).null_count:
        return None
    timestamp, inputs, outputs = (table.column(name).to_numpy() for name in _FIELDS[:3])
    blocks = pc.list_value_length(hashes).to_numpy()
    valid = (
        (timestamp >= 0)
        & (timestamp <= MAX_TIMESTAMP_MS)
        & (inputs >= 1)
        & (inputs <= INT32_MAX)
        & (outputs >= 0)
        & (outputs <= INT32_MAX)
        & (inputs + outputs <= MAX_REQUEST_TOKENS)
        & (blocks == (inputs + MOONCAKE_BLOCK_TOKENS - 1) // MOONCAKE_BLOCK_TOKENS)
    )
    if not valid.all():
        return None
    return _Columns(indices.astype(np.int64) + chunk.first_line, timestamp, inputs, outputs, hashes)


def _merged(first: _Columns, second: _Columns) -> _Columns:
    """Both sets of rows in physical line order."""
    order = np.argsort(np.concatenate([first.lines, second.lines]), kind="stable")

    def both(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.concatenate([a, b])[order]

    return _Columns(
        lines=both(first.lines, second.lines),
        timestamp=both(first.timestamp, second.timestamp),
        inputs=both(first.inputs, second.inputs),
        outputs=both(first.outputs, second.outputs),
        hashes=pa.concat_arrays([first.hashes, second.hashes]).take(pa.array(order)),
    )


def _chunk_columns(path: Path, chunk: LineChunk) -> _Columns:
    fast = _fast_lines(chunk)
    others = np.flatnonzero(~fast & (chunk.ends > chunk.starts))
    fast_columns = _arrow_columns(chunk, fast) if fast.any() else None
    if fast_columns is None:
        return _slow_columns(path, chunk, np.flatnonzero(chunk.ends > chunk.starts))
    if not len(others):
        return fast_columns
    # The fast lines are all valid, so the first bad line of the chunk, if any, is among the others.
    return _merged(fast_columns, _slow_columns(path, chunk, others))


def _batches(path: Path) -> Iterator[pa.RecordBatch]:
    for chunk in line_chunks(path, BATCH_ROWS):
        columns = _chunk_columns(path, chunk)
        if len(columns.lines):
            yield columns.batch()


def scan_mooncake(path: str | Path) -> TraceScan:
    """Start reading a Mooncake JSONL trace: batches of about BATCH_ROWS rows in file order, each line
    validated as its batch is built (TraceFormatError(path, line, reason) on the first bad one)."""
    path = Path(path)
    return TraceScan(
        name=path.stem,
        source_path=str(path),
        trace_format=TraceFormat.MOONCAKE,
        time_unit="ms",
        block_size=MOONCAKE_BLOCK_TOKENS,
        batches=_batches(path),
        empty_reason="no requests: the file is empty or holds only blank lines",
    )


def read_mooncake(path: str | Path) -> Workload:
    """Read a Mooncake JSONL trace into memory; raises TraceFormatError(path, line, reason) on the first bad line."""
    return collect(scan_mooncake(path))
