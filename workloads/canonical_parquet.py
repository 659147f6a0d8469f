"""The canonical Workload as a Parquet file: WORKLOAD_SCHEMA columns, the workload's facts as key-value metadata.

Metadata keys (all text): costbench.name, costbench.source_format (the format it was made from),
costbench.time_unit, costbench.block_size, costbench.excluded_rows, costbench.excluded_reason,
costbench.token_counter, costbench.arrival_process, costbench.schema_version.
A Parquet file written by another tool reads too, if it has the columns (by name, any order, castable
types); without metadata its time unit is "s" and, when it carries prefix_blocks, it must say its
block size. A bad file fails with the file, the row (1-based) where there is one, and the reason.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from workloads.trace_scan import TraceScan, scan_of_workload
from workloads.workload import WORKLOAD_SCHEMA, TraceFormat, TraceFormatError, Workload

SCHEMA_VERSION = "1"
_PREFIX = "costbench."
# Workload fields stored as metadata, with the parser that reads each back.
_FACTS = {
    "time_unit": str,
    "block_size": int,
    "excluded_rows": int,
    "excluded_reason": str,
    "token_counter": str,
    "arrival_process": str,
}


def canonical_metadata(workload: Workload) -> dict[str, str]:
    """The Parquet key-value metadata that carries `workload`'s facts (its table is not looked at)."""
    return {
        f"{_PREFIX}name": workload.name,
        f"{_PREFIX}source_format": workload.trace_format.value,
        f"{_PREFIX}schema_version": SCHEMA_VERSION,
        **{f"{_PREFIX}{key}": str(getattr(workload, key)) for key in _FACTS},
    }


def write_canonical(workload: Workload, path: str | Path) -> Path:
    """Write `workload` to `path` atomically (a temporary file renamed into place); returns the path."""
    path = Path(path)
    table = workload.table.replace_schema_metadata(canonical_metadata(workload))
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    pq.write_table(table, partial)
    os.replace(partial, path)
    return path


def _first_bad_row(mask: pa.ChunkedArray) -> int | None:
    """1-based row number of the first true in `mask` (nulls count as bad), or None."""
    bad = pc.fill_null(mask, True)
    if not pc.any(bad).as_py():
        return None
    return int(pc.index(bad, True).as_py()) + 1


def _check_values(path: Path, table: pa.Table) -> None:
    checks = [
        (
            pc.invert(pc.and_(pc.is_finite(table["arrival_s"]), pc.greater_equal(table["arrival_s"], 0))),
            "arrival_s must be finite and >= 0",
        ),
        (pc.less(table["input_tokens"], 1), "input_tokens must be >= 1"),
        (pc.less(table["output_tokens"], 0), "output_tokens must be >= 0"),
    ]
    for mask, reason in checks:
        row = _first_bad_row(mask)
        if row is not None:
            raise TraceFormatError(str(path), None, f"row {row}: {reason}")
    if pc.count_distinct(table["request_id"]).as_py() != table.num_rows:
        raise TraceFormatError(str(path), None, "request_id values are not unique")


def read_canonical(path: str | Path) -> Workload:
    """Read a canonical Parquet workload; TraceFormatError naming the file (and row) when it is not one."""
    path = Path(path)
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as exc:
        raise TraceFormatError(str(path), None, f"not a readable Parquet file: {exc}") from None
    missing = [name for name in WORKLOAD_SCHEMA.names if name not in table.column_names]
    if missing:
        raise TraceFormatError(str(path), None, f"missing column(s) {', '.join(missing)}")
    metadata = {key.decode(): value.decode() for key, value in (table.schema.metadata or {}).items()}
    for field in WORKLOAD_SCHEMA:
        row = None if field.nullable else _first_bad_row(pc.is_null(table[field.name]))
        if row is not None:
            raise TraceFormatError(str(path), None, f"row {row}: {field.name} is null")
    try:
        table = table.select(WORKLOAD_SCHEMA.names).cast(WORKLOAD_SCHEMA)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as exc:
        raise TraceFormatError(str(path), None, f"columns do not cast to the canonical schema: {exc}") from None
    if table.num_rows == 0:
        raise TraceFormatError(str(path), None, "no requests: the file has no rows")
    _check_values(path, table)

    facts: dict[str, Any] = {}  # each value as its _FACTS parser made it: int or str
    for key, parse in _FACTS.items():
        text = metadata.get(f"{_PREFIX}{key}")
        if text is None:
            continue
        try:
            facts[key] = parse(text)
        except ValueError:
            reason = f"metadata {_PREFIX}{key} is not a valid {parse.__name__}: {text!r}"
            raise TraceFormatError(str(path), None, reason) from None
    has_blocks = table["prefix_blocks"].null_count < table.num_rows
    if has_blocks and facts.get("block_size", 0) <= 0:
        reason = f"prefix_blocks present but metadata {_PREFIX}block_size is missing or not > 0"
        raise TraceFormatError(str(path), None, reason)
    return Workload(
        name=metadata.get(f"{_PREFIX}name", path.stem),
        source_path=str(path),
        trace_format=TraceFormat.CANONICAL,
        time_unit=facts.get("time_unit", "s"),
        block_size=facts.get("block_size", 0),
        table=table.sort_by("arrival_s"),
        excluded_rows=facts.get("excluded_rows", 0),
        excluded_reason=facts.get("excluded_reason", ""),
        token_counter=facts.get("token_counter", "trace"),
        arrival_process=facts.get("arrival_process", "trace"),
    )


# Transitional: reads the whole file, then streams it. Replaced by a streaming scan.
def scan_canonical(path: str | Path) -> TraceScan:
    return scan_of_workload(read_canonical(path))
