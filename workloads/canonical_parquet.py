"""The canonical Workload as a Parquet file: WORKLOAD_SCHEMA columns, the workload's facts as key-value metadata.

Metadata keys (all text): costbench.name, costbench.source_format (the format it was made from),
costbench.time_unit, costbench.block_size, costbench.excluded_rows, costbench.excluded_reason,
costbench.token_counter, costbench.arrival_process, costbench.schema_version.
A Parquet file written by another tool reads too, if it has the columns (by name, any order, castable
types); without metadata its time unit is "s" and, when it carries prefix_blocks, it must say its
block size. The LATER_COLUMNS (response_format, constrained) may be missing: a file written before
them reads with them null. Every stored response_format is checked as a format (a valid JSON Schema, a
regex that compiles) before a row is yielded.

`scan_canonical` streams the file one row group at a time and decodes every column of every row it
yields (page checksums verified where the writer stored them, as write_canonical does), so a corrupt
page or a truncated file fails while reading, not later in a replay. Each batch's values are checked
before it is yielded (docs/workloads.md, "Trace formats"), and request_id uniqueness is checked first,
out of core by DuckDB. A bad file fails with the file, the row (1-based) where there is one, and the
reason.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from workloads.out_of_core import out_of_core, sql_text
from workloads.prompts.response_format import load_response_format
from workloads.trace_scan import BATCH_ROWS, TraceScan, collect
from workloads.workload import LATER_COLUMNS, WORKLOAD_SCHEMA, TraceFormat, TraceFormatError, Workload
from workloads.workload_builder import MAX_REQUEST_TOKENS, MAX_TRACE_SPAN_S, ExclusionTally

SCHEMA_VERSION = "1"
METADATA_PREFIX = "costbench."
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
        f"{METADATA_PREFIX}name": workload.name,
        f"{METADATA_PREFIX}source_format": workload.trace_format.value,
        f"{METADATA_PREFIX}schema_version": SCHEMA_VERSION,
        **{f"{METADATA_PREFIX}{key}": str(getattr(workload, key)) for key in _FACTS},
    }


def write_canonical(workload: Workload, path: str | Path) -> Path:
    """Write `workload` to `path` atomically (a temporary file renamed into place); returns the path."""
    path = Path(path)
    table = workload.table.replace_schema_metadata(canonical_metadata(workload))
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        pq.write_table(table, partial, write_page_checksum=True)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)  # a failed or interrupted write leaves nothing beside `path`
    return path


def parse_facts(path: Path, metadata: dict[str, str]) -> dict[str, Any]:
    facts: dict[str, Any] = {}  # each value as its _FACTS parser made it: int or str
    for key, parse in _FACTS.items():
        text = metadata.get(f"{METADATA_PREFIX}{key}")
        if text is None:
            continue
        try:
            facts[key] = parse(text)
            if parse is int and facts[key] < 0:
                raise ValueError(text)
        except ValueError:
            kind = "count" if parse is int else parse.__name__
            reason = f"metadata {METADATA_PREFIX}{key} is not a valid {kind}: {text!r}"
            raise TraceFormatError(str(path), None, reason) from None
    return facts


def costbench_metadata(path: Path, *sources: dict[bytes, bytes] | None) -> dict[str, str]:
    """The costbench.* keys of the schema's and the file's key-value metadata (the file's win)."""
    metadata = {}
    for source in sources:
        for key, value in (source or {}).items():
            if not key.startswith(METADATA_PREFIX.encode()):
                continue
            try:
                metadata[key.decode()] = value.decode()
            except UnicodeDecodeError:
                raise TraceFormatError(str(path), None, f"metadata {key!r} is not UTF-8 text") from None
    return metadata


def _check_columns(path: Path, schema: pa.Schema) -> None:
    """Every canonical column once (LATER_COLUMNS may be absent: an older file), of a type that casts to the
    canonical one; no true/false as a number."""
    missing = [name for name in WORKLOAD_SCHEMA.names if name not in schema.names and name not in LATER_COLUMNS]
    if missing:
        raise TraceFormatError(str(path), None, f"missing column(s) {', '.join(missing)}")
    repeated = [name for name in WORKLOAD_SCHEMA.names if schema.names.count(name) > 1]
    if repeated:
        raise TraceFormatError(str(path), None, f"column(s) {', '.join(repeated)} appear more than once")
    present = [name for name in WORKLOAD_SCHEMA.names if name in schema.names]
    fields = [schema.field(name) for name in present]
    for field in fields:
        if WORKLOAD_SCHEMA.field(field.name).type == pa.bool_():
            continue  # a flag column: booleans are its values
        value_type = (
            field.type.value_type if pa.types.is_list(field.type) or pa.types.is_large_list(field.type) else field.type
        )
        if pa.types.is_boolean(value_type):
            raise TraceFormatError(
                str(path), None, f"column {field.name} holds booleans ({field.type}), not its values"
            )
    try:
        target = pa.schema([WORKLOAD_SCHEMA.field(name) for name in present])
        pa.schema(fields).empty_table().cast(target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as exc:
        raise TraceFormatError(str(path), None, f"columns do not cast to the canonical schema: {exc}") from None


def _open(path: Path) -> pq.ParquetFile:
    try:
        # pre_buffer off: a buffered stream keeps RSS flat over a file of any size (workloads/workload_file.py).
        return pq.ParquetFile(path, page_checksum_verification=True, pre_buffer=False, buffer_size=1 << 20)
    except (OSError, pa.ArrowException) as exc:
        raise TraceFormatError(str(path), None, f"not a readable Parquet file: {exc}") from None


def scan_canonical(path: str | Path) -> TraceScan:
    """Start reading a canonical Parquet workload: its facts now (TraceFormatError for a file that is not
    one), its rows checked batch by batch as they are consumed, in file order."""
    path = Path(path)
    parquet = _open(path)
    try:
        schema = parquet.schema_arrow
        # Facts at file level (a spooled file adds them at close) over those of the Arrow schema.
        metadata = costbench_metadata(path, schema.metadata, parquet.metadata.metadata)
    finally:
        parquet.close()
    _check_columns(path, schema)
    facts = parse_facts(path, metadata)
    return TraceScan(
        name=metadata.get(f"{METADATA_PREFIX}name", path.stem),
        source_path=str(path),
        trace_format=TraceFormat.CANONICAL,
        time_unit=facts.get("time_unit", "s"),
        block_size=facts.get("block_size", 0),
        batches=_batches(path, facts.get("block_size", 0)),
        token_counter=facts.get("token_counter", "trace"),
        arrival_process=facts.get("arrival_process", "trace"),
        excluded=_StoredExclusions(facts.get("excluded_rows", 0), facts.get("excluded_reason", "")),
        empty_reason="no requests: the file has no rows",
    )


def read_canonical(path: str | Path) -> Workload:
    """Read a canonical Parquet workload into memory; TraceFormatError naming the file (and row) when it is not one."""
    return collect(scan_canonical(path))


def _batches(path: Path, block_size: int) -> Iterator[pa.RecordBatch]:
    _check_unique_ids(path)
    parquet = _open(path)
    columns = [name for name in WORKLOAD_SCHEMA.names if name in parquet.schema_arrow.names]
    try:
        first_row = 0  # rows before this row group
        for group in range(parquet.metadata.num_row_groups):
            group_rows = parquet.metadata.row_group(group).num_rows
            batches = parquet.iter_batches(batch_size=BATCH_ROWS, row_groups=[group], columns=columns)
            row = first_row
            while True:
                try:
                    batch = next(batches, None)
                except (OSError, pa.ArrowException) as exc:
                    where = f"rows {first_row + 1}-{first_row + group_rows} (row group {group})"
                    raise TraceFormatError(str(path), None, f"{where}: unreadable Parquet data: {exc}") from None
                if batch is None:
                    break
                yield _checked(path, batch, row, block_size)
                row += batch.num_rows
            first_row += group_rows
    finally:
        parquet.close()


class _StoredExclusions(ExclusionTally):
    """The exclusions a file's metadata records, carried through exactly as written (nothing is excluded
    while reading a canonical file, and a stored reason is not parsed back into counts)."""

    def __init__(self, count: int, summary: str) -> None:
        super().__init__()
        self._stored = (count, summary)

    @property
    def count(self) -> int:
        return self._stored[0]

    @property
    def summary(self) -> str:
        return self._stored[1]


def _check_unique_ids(path: Path) -> None:
    """TraceFormatError naming the first row whose request_id an earlier row already has. Grouped out of
    core by DuckDB over the one column, so no id is held as a Python string."""
    source = f"read_parquet({sql_text(path)}, file_row_number = true)"
    with out_of_core() as con:
        try:
            repeated = con.execute(
                f"SELECT count(*) FROM (SELECT 1 FROM {source} WHERE request_id IS NOT NULL "
                "GROUP BY request_id HAVING count(*) > 1)"
            ).fetchone()
            if not repeated or not repeated[0]:
                return
            # Only on the error path: the earliest row that repeats an id, and where that id came first.
            found = con.execute(
                f"WITH ids AS (SELECT request_id, file_row_number AS r FROM {source} WHERE request_id IS NOT NULL), "
                "firsts AS (SELECT request_id, min(r) AS first_r FROM ids GROUP BY request_id HAVING count(*) > 1) "
                "SELECT ids.r, ids.request_id, firsts.first_r FROM ids JOIN firsts USING (request_id) "
                "WHERE ids.r > firsts.first_r ORDER BY ids.r LIMIT 1"
            ).fetchone()
        except duckdb.Error as exc:
            raise TraceFormatError(str(path), None, f"unreadable Parquet data in request_id: {exc}") from None
    assert found is not None  # a repeated id has a second row
    row, request_id, first = found
    reason = f"row {row + 1}: request_id values are not unique: {str(request_id)!r} is also row {first + 1}"
    raise TraceFormatError(str(path), None, reason)


def _first_true(mask: pa.Array) -> int | None:
    """0-based index of the first true in `mask` (nulls count as false), or None."""
    values = pc.fill_null(mask, False)
    return int(pc.index(values, True).as_py()) if pc.any(values).as_py() else None


def _first_uncastable(column: pa.Array, target: pa.DataType) -> int:
    """Index of the first value of `column` that does not cast to `target` (error path: value by value)."""
    for index in range(len(column)):
        try:
            column.slice(index, 1).cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return index
    return 0


def _checked(path: Path, batch: pa.RecordBatch, first_row: int, block_size: int) -> pa.RecordBatch:
    """`batch` (rows first_row + 1, ... of the file) in WORKLOAD_SCHEMA, or TraceFormatError at its first bad row."""

    def fail(index: int, reason: str) -> TraceFormatError:
        return TraceFormatError(str(path), None, f"row {first_row + index + 1}: {reason}")

    columns = []
    for field in WORKLOAD_SCHEMA:
        if field.name not in batch.schema.names:  # a LATER_COLUMNS column an older file does not have
            columns.append(pa.nulls(batch.num_rows, field.type))
            continue
        column = batch.column(field.name)
        if not field.nullable and column.null_count:
            raise fail(_first_true(pc.is_null(column)) or 0, f"{field.name} is null")
        try:
            columns.append(column.cast(field.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            index = _first_uncastable(column, field.type)
            raise fail(index, f"{field.name} {column[index].as_py()!r} does not fit {field.type}") from None
    table = pa.RecordBatch.from_arrays(columns, schema=WORKLOAD_SCHEMA)
    arrival, inputs, outputs = (table.column(name) for name in ("arrival_s", "input_tokens", "output_tokens"))
    blocks = table.column("prefix_blocks")
    block_counts = pc.list_value_length(blocks)
    null_block_rows = pc.list_parent_indices(blocks).filter(pc.is_null(pc.list_flatten(blocks)))
    total = pc.add(inputs.cast(pa.int64()), outputs.cast(pa.int64()))
    checks = [
        (
            pc.invert(
                pc.and_(
                    pc.is_finite(arrival),
                    pc.and_(pc.greater_equal(arrival, 0), pc.less_equal(arrival, MAX_TRACE_SPAN_S)),
                )
            ),
            f"arrival_s must be finite, >= 0 and at most {MAX_TRACE_SPAN_S} s (400 days)",
        ),
        (pc.less(inputs, 1), "input_tokens must be >= 1"),
        (pc.less(outputs, 0), "output_tokens must be >= 0"),
        (pc.greater(total, MAX_REQUEST_TOKENS), f"input_tokens + output_tokens must be at most {MAX_REQUEST_TOKENS}"),
        (pc.less(table.column("turn"), 0), "turn must be >= 0"),
        (
            pc.or_(pc.less(table.column("reasoning_tokens"), 0), pc.greater(table.column("reasoning_tokens"), outputs)),
            "reasoning_tokens must be between 0 and output_tokens (reasoning is part of the output)",
        ),
    ]
    if block_size > 0:
        most = pc.divide(pc.add(inputs.cast(pa.int64()), block_size - 1), block_size)
        checks.append(
            (pc.greater(block_counts, most), f"prefix_blocks holds more than ceil(input_tokens / {block_size}) blocks")
        )
    else:
        checks.append(
            (
                pc.is_valid(blocks),
                f"prefix_blocks present but metadata {METADATA_PREFIX}block_size is missing or not > 0",
            )
        )
    found = [(at, reason) for mask, reason in checks if (at := _first_true(mask)) is not None]
    if len(null_block_rows):
        found.append((int(null_block_rows[0].as_py()), "prefix_blocks holds a null block hash"))
    if (bad := _first_bad_format(table.column("response_format"))) is not None:
        found.append(bad)
    if found:
        raise fail(*min(found, key=lambda item: item[0]))
    return table


def _first_bad_format(formats: pa.Array) -> tuple[int, str] | None:
    """(index, reason) of the first response_format that is not a valid format; each distinct text is
    checked once (a workload repeats a scenario's one format on many rows)."""
    if formats.null_count == len(formats):
        return None
    checked: set[str] = set()
    for index, text in enumerate(formats.to_pylist()):
        if text is None or text in checked:
            continue
        try:
            load_response_format(text)
        except ValueError as exc:
            return index, str(exc)
        checked.add(text)
    return None
