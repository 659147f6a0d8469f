"""Mooncake JSONL traces → the canonical Workload.

One request per line, fields read by name:
`{"timestamp": <ms>, "input_length": <tokens>, "output_length": <tokens>, "hash_ids": [<block hash>, ...]}`.
`hash_ids` are prefix-block hashes of 512 tokens each (the last block may be partial), so a line must
carry exactly ceil(input_length / 512) of them. The whole file is validated before a table is built:
a bad line fails the read with file, line and reason, and nothing is half-imported.
"""

from __future__ import annotations

import math
from pathlib import Path

from workloads.trace_scan import TraceScan, scan_of_workload
from workloads.trace_source import jsonl_records
from workloads.workload import TraceFormat, TraceFormatError, Workload
from workloads.workload_builder import INT32_MAX, INT64_MAX, INT64_MIN, RequestColumns

MOONCAKE_BLOCK_TOKENS = 512
_FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")


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
    if not _is_int(timestamp) or timestamp < 0:
        return f"timestamp must be a non-negative integer (ms), got {timestamp!r}"
    input_length = raw["input_length"]
    if not _is_int(input_length) or not 1 <= input_length <= INT32_MAX:
        return f"input_length must be a positive integer, got {input_length!r}"
    output_length = raw["output_length"]
    if not _is_int(output_length) or not 0 <= output_length <= INT32_MAX:
        return f"output_length must be a non-negative integer, got {output_length!r}"
    hash_ids = raw["hash_ids"]
    if not isinstance(hash_ids, list):
        return f"hash_ids must be a list of integers, got {type(hash_ids).__name__}"
    if not all(type(h) is int and INT64_MIN <= h <= INT64_MAX for h in hash_ids):
        return "hash_ids must hold only 64-bit integers"
    expected_blocks = math.ceil(input_length / MOONCAKE_BLOCK_TOKENS)
    if len(hash_ids) != expected_blocks:
        return (
            f"{len(hash_ids)} hash_ids for input_length {input_length}: expected "
            f"ceil({input_length}/{MOONCAKE_BLOCK_TOKENS}) = {expected_blocks}"
        )
    return None


def read_mooncake(path: str | Path) -> Workload:
    """Read a Mooncake JSONL trace; raises TraceFormatError(path, line, reason) on the first bad line."""
    path = Path(path)
    rows = RequestColumns()
    for line, raw in jsonl_records(path):
        reason = _check_line(raw)
        if reason is not None:
            raise TraceFormatError(str(path), line, reason)
        assert isinstance(raw, dict)  # _check_line returns a reason for anything else
        # request_id = 0-based physical line, stable however the file is windowed or sorted.
        rows.append(
            str(line - 1),
            raw["timestamp"] / 1000.0,
            raw["input_length"],
            raw["output_length"],
            prefix_blocks=raw["hash_ids"],
        )
    if not len(rows):
        raise TraceFormatError(str(path), None, "no requests: the file is empty or holds only blank lines")
    return Workload(
        name=path.stem,
        source_path=str(path),
        trace_format=TraceFormat.MOONCAKE,
        time_unit="ms",
        block_size=MOONCAKE_BLOCK_TOKENS,
        table=rows.table(),
    )


# Transitional: reads the whole file, then streams it. Replaced by a streaming scan.
def scan_mooncake(path: str | Path) -> TraceScan:
    return scan_of_workload(read_mooncake(path))
