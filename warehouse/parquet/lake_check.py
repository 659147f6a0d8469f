"""Is one lake file fit to be read by the warehouse's views? Checked at every refresh (warehouse/parquet/lake_audit.py).

Three depths, cheapest first: the footer (a truncated or foreign file has none), the schema (every
column the lake knows must have the lake's type: DuckDB's union_by_name would otherwise widen the
view's column, e.g. an int column to VARCHAR, for every week, without a word), and, when `decode` is
set, every page of every row group decoded with its checksum verified (a flipped bit inside a page is
read by DuckDB as a wrong number, silently). Columns a file lacks are not an error: files written
before a column existed read it as null. A file stamped with a schema version newer than this code is
not judged at all: it is reported as such, so the caller refuses to touch the lake.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from warehouse.parquet.lake import file_schema_version, same_type
from warehouse.schema_migrations import SCHEMA_VERSION


@dataclass(frozen=True, slots=True)
class FileCheck:
    problem: str | None  # why the file cannot be read as the lake's (None: fit)
    schema_version: int | None  # stamped in the file; None for files written before stamping
    rows: int | None
    decoded: bool  # every page was decoded and its checksum verified

    @property
    def newer(self) -> bool:
        return self.schema_version is not None and self.schema_version > SCHEMA_VERSION


def check_file(path: Path, expected: pa.Schema, decode: bool) -> FileCheck:
    try:
        parquet = pq.ParquetFile(path, page_checksum_verification=True)
    except (OSError, pa.ArrowException) as exc:
        return FileCheck(f"unreadable footer: {exc}", None, None, False)
    with parquet:  # closes the file: a refresh opens every file of the lake
        return _check_open(parquet, expected, decode)


def _check_open(parquet: pq.ParquetFile, expected: pa.Schema, decode: bool) -> FileCheck:
    try:
        schema = parquet.schema_arrow
    except (OSError, pa.ArrowException) as exc:
        return FileCheck(f"unreadable schema: {exc}", None, None, False)
    version = file_schema_version(schema)
    rows = parquet.metadata.num_rows
    if version is not None and version > SCHEMA_VERSION:
        return FileCheck(None, version, rows, False)
    problem = _type_problem(schema, expected)
    if problem is not None or not decode:
        return FileCheck(problem, version, rows, False)
    for index in range(parquet.num_row_groups):
        try:
            for _batch in parquet.iter_batches(row_groups=[index]):
                pass  # decoded and checksummed, then dropped: memory stays at one batch
        except (OSError, pa.ArrowException) as exc:
            problem = f"row group {index} of {parquet.num_row_groups} does not decode: {exc}"
            return FileCheck(problem, version, rows, False)
    return FileCheck(None, version, rows, True)


def _type_problem(schema: pa.Schema, expected: pa.Schema) -> str | None:
    changed = [
        f"column {field.name} is {field.type} in this file, {expected.field(field.name).type} in the lake schema"
        for field in schema
        if field.name in expected.names
        and not same_type(field.type, expected.field(field.name).type)
        and not pa.types.is_null(field.type)  # a column of only nulls fits any type
    ]
    return "; ".join(changed) or None
