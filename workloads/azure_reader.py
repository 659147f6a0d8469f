"""Azure LLM inference CSV traces (2023 and 2024) → the canonical Workload.

Columns by header name: TIMESTAMP (wall-clock datetime with 7 fractional digits, e.g.
`2023-11-16 18:15:46.6805900`), ContextTokens, GeneratedTokens. The trace carries no prompt and no
prefix information, so `prefix_blocks` is null and `block_size` 0. The whole file is validated before a
table is built; a bad row fails the read with file, physical line and reason.
"""

from __future__ import annotations

import csv
import re
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa

from workloads.workload import WORKLOAD_SCHEMA, TraceFormat, TraceFormatError, Workload

AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
_INT32_MAX = 2**31 - 1  # token counts are int32 in the canonical schema
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


def _parse_count(text: str, column: str, minimum: int) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError(f"{column} must be an integer, got {text!r}") from None
    if not minimum <= value <= _INT32_MAX:
        raise ValueError(f"{column} must be between {minimum} and {_INT32_MAX}, got {value}")
    return value


def read_azure(path: str | Path) -> Workload:
    """Read an Azure LLM inference CSV; raises TraceFormatError(path, line, reason) on the first bad row."""
    path = Path(path)
    try:
        # utf-8-sig: a spreadsheet-saved copy starts with a BOM that would glue onto "TIMESTAMP".
        handle = path.open(newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise TraceFormatError(str(path), None, f"cannot read file: {exc.strerror or exc}") from None

    arrival_ns: list[int] = []
    input_tokens: list[int] = []
    output_tokens: list[int] = []
    with handle:
        rows = csv.reader(handle)
        try:
            header = next(rows, None)
            if header is None:
                raise TraceFormatError(str(path), None, "empty file: expected a header " + ",".join(AZURE_COLUMNS))
            names = [name.strip() for name in header]
            missing = [column for column in AZURE_COLUMNS if column not in names]
            if missing:
                raise TraceFormatError(
                    str(path), rows.line_num, f"missing column(s) {', '.join(missing)} (header has: {', '.join(names)})"
                )
            at = {column: names.index(column) for column in AZURE_COLUMNS}
            width = max(at.values()) + 1
            for row in rows:
                if not row or not any(cell.strip() for cell in row):
                    continue
                # line_num counts physical lines read so far, so it names the row's last line.
                line = rows.line_num
                if len(row) < width:
                    raise TraceFormatError(str(path), line, f"expected at least {width} fields, got {len(row)}")
                try:
                    arrival_ns.append(parse_timestamp_ns(row[at["TIMESTAMP"]]))
                    input_tokens.append(_parse_count(row[at["ContextTokens"]], "ContextTokens", 1))
                    output_tokens.append(_parse_count(row[at["GeneratedTokens"]], "GeneratedTokens", 0))
                except ValueError as exc:
                    raise TraceFormatError(str(path), line, str(exc)) from None
        except (csv.Error, UnicodeDecodeError) as exc:
            raise TraceFormatError(str(path), rows.line_num or None, f"unreadable CSV: {exc}") from None

    if not arrival_ns:
        raise TraceFormatError(str(path), None, "no requests: the file has a header but no rows")
    # Offsets from the earliest request (the first row in a sorted trace), computed in integer ns.
    start_ns = min(arrival_ns)
    count = len(arrival_ns)
    table = pa.table(
        {
            "request_id": pa.array([str(i) for i in range(count)], pa.string()),
            "session_id": pa.nulls(count, pa.string()),
            "turn": pa.nulls(count, pa.int32()),
            "arrival_s": pa.array([(ns - start_ns) / _NS_PER_S for ns in arrival_ns], pa.float64()),
            "input_tokens": pa.array(input_tokens, pa.int32()),
            "output_tokens": pa.array(output_tokens, pa.int32()),
            "prefix_blocks": pa.nulls(count, pa.list_(pa.int64())),
            "prompt": pa.nulls(count, pa.string()),
            "reasoning_tokens": pa.nulls(count, pa.int32()),
        },
        schema=WORKLOAD_SCHEMA,
    )
    return Workload(
        name=path.stem,
        source_path=str(path),
        trace_format=TraceFormat.AZURE,
        time_unit="datetime",
        block_size=0,
        table=table.sort_by("arrival_s"),  # Arrow's sort is stable: equal arrivals keep file order
    )
