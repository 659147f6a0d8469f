"""Azure LLM inference CSV traces (2023 and 2024) → the canonical Workload.

Columns by header name: TIMESTAMP (wall-clock datetime with 7 fractional digits, e.g.
`2023-11-16 18:15:46.6805900`), ContextTokens, GeneratedTokens. The trace carries no prompt and no
prefix information, so `prefix_blocks` is null and `block_size` 0. The whole file is validated before a
table is built; a bad row fails the read with file, physical line and reason.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

from workloads.trace_scan import TraceScan, scan_of_workload
from workloads.trace_source import csv_rows, parse_count_cell
from workloads.workload import TraceFormat, TraceFormatError, Workload
from workloads.workload_builder import RequestColumns

AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
_NS_PER_S = 1_000_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

# datetime.fromisoformat takes at most 6 fractional digits, Azure writes 7: split the fraction off and
# keep it as integer nanoseconds so no digit is lost.
_TIMESTAMP = re.compile(
    r"^(?P<whole>\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})(?:\.(?P<frac>\d{1,9}))?(?P<tz>Z|[+-]\d{2}:?\d{2})?$"
)


def parse_timestamp_ns(text: str) -> int:
    """Nanoseconds since the Unix epoch; a timestamp without a zone is read as UTC. ValueError if malformed."""
    match = _TIMESTAMP.match(text.strip())
    if match is None:
        raise ValueError(f"TIMESTAMP {text!r} is not a datetime like 2023-11-16 18:15:46.6805900")
    try:
        whole = datetime.fromisoformat(match["whole"] + (match["tz"] or ""))
    except ValueError as exc:
        raise ValueError(f"TIMESTAMP {text!r} is not a valid datetime: {exc}") from None
    if whole.tzinfo is None:
        whole = whole.replace(tzinfo=timezone.utc)
    # Integer arithmetic on whole seconds: a float here would round the 7th digit away.
    seconds = (whole - _EPOCH).days * 86_400 + (whole - _EPOCH).seconds
    fraction = match["frac"] or ""
    return seconds * _NS_PER_S + int(fraction.ljust(9, "0") or "0")


def read_azure(path: str | Path) -> Workload:
    """Read an Azure LLM inference CSV; raises TraceFormatError(path, line, reason) on the first bad row."""
    path = Path(path)
    arrival_ns: list[int] = []
    counts: list[tuple[int, int]] = []
    for line, row in csv_rows(path, AZURE_COLUMNS):
        try:
            arrival_ns.append(parse_timestamp_ns(row["TIMESTAMP"]))
            input_tokens = parse_count_cell(row["ContextTokens"], "ContextTokens", 1)
            counts.append((input_tokens, parse_count_cell(row["GeneratedTokens"], "GeneratedTokens", 0)))
        except ValueError as exc:
            raise TraceFormatError(str(path), line, str(exc)) from None
    if not arrival_ns:
        raise TraceFormatError(str(path), None, "no requests: the file has a header but no rows")
    # Offsets from the earliest request (the first row in a sorted trace), computed in integer ns.
    start_ns = min(arrival_ns)
    rows = RequestColumns()
    for index, (ns, (input_tokens, output_tokens)) in enumerate(zip(arrival_ns, counts)):
        rows.append(str(index), (ns - start_ns) / _NS_PER_S, input_tokens, output_tokens)
    return Workload(
        name=path.stem,
        source_path=str(path),
        trace_format=TraceFormat.AZURE,
        time_unit="datetime",
        block_size=0,
        table=rows.table(),
    )


# Transitional: reads the whole file, then streams it. Replaced by a streaming scan.
def scan_azure(path: str | Path) -> TraceScan:
    return scan_of_workload(read_azure(path))
