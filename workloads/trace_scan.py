"""A trace being read: the workload's facts plus its validated rows as a stream of Arrow batches.

Every reader yields a TraceScan, so a trace of any size is read in bounded memory: `collect` builds the
in-memory Workload of a small trace, and workloads/workload_file.py spools a big one to a sorted
canonical Parquet file and reads windows of it. A reader validates each row as its batch is built and
raises TraceFormatError(path, line, reason) on the first bad one, so the consumer never holds a
half-checked row; what it left out on purpose is counted in `excluded`, complete once the batches are
exhausted.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from workloads.workload import WORKLOAD_SCHEMA, TraceFormat, TraceFormatError, Workload
from workloads.workload_builder import ExclusionTally, numbered_turns

# Rows per batch a reader aims at: large enough for Arrow's kernels, small enough that a handful of
# batches in flight stay far below the memory bound of docs/workloads.md.
BATCH_ROWS = 65_536


@dataclass(slots=True)
class TraceScan:
    """One pass over a trace. Not frozen: `excluded` fills while `batches` is consumed."""

    name: str
    source_path: str
    trace_format: TraceFormat
    time_unit: str
    block_size: int
    batches: Iterator[pa.RecordBatch]  # WORKLOAD_SCHEMA, in source order, every row already validated
    excluded: ExclusionTally = field(default_factory=ExclusionTally)
    token_counter: str = "trace"
    arrival_process: str = "trace"
    # arrival_s is an offset from some row (e.g. the first): shift so the earliest request arrives at 0.
    rebase_arrivals: bool = False
    # `turn` is null in the batches: number 0, 1, ... per session in arrival order once all rows are in.
    number_turns: bool = False
    # Why there is nothing to replay when every row was left out or the file held none.
    empty_reason: str = "no requests: the file holds no rows"

    def workload(self, table: pa.Table) -> Workload:
        """The Workload of these facts over `table` (WORKLOAD_SCHEMA, sorted, rebased, turns numbered)."""
        return Workload(
            name=self.name,
            source_path=self.source_path,
            trace_format=self.trace_format,
            time_unit=self.time_unit,
            block_size=self.block_size,
            table=table,
            excluded_rows=self.excluded.count,
            excluded_reason=self.excluded.summary,
            token_counter=self.token_counter,
            arrival_process=self.arrival_process,
        )

    def empty_error(self) -> TraceFormatError:
        detail = f" ({self.excluded.summary})" if self.excluded.count else ""
        return TraceFormatError(self.source_path, None, f"{self.empty_reason}{detail}")


def batch_of(columns: dict[str, pa.Array | list]) -> pa.RecordBatch:
    """A WORKLOAD_SCHEMA batch from columns by name; a column not given is all null."""
    length = len(next(iter(columns.values())))
    arrays = []
    for column in WORKLOAD_SCHEMA:
        values = columns.get(column.name)
        if values is None:
            arrays.append(pa.nulls(length, column.type))
        elif isinstance(values, pa.Array | pa.ChunkedArray):
            arrays.append(values.cast(column.type))
        else:
            arrays.append(pa.array(values, column.type))
    return pa.RecordBatch.from_arrays(arrays, schema=WORKLOAD_SCHEMA)


def collect(scan: TraceScan) -> Workload:
    """The whole trace in memory: for traces that fit (tests, captures, the bundled traces)."""
    table = pa.Table.from_batches(list(scan.batches), schema=WORKLOAD_SCHEMA)
    if table.num_rows == 0:
        raise scan.empty_error()
    return scan.workload(finish_table(table, scan))


def finish_table(table: pa.Table, scan: TraceScan) -> pa.Table:
    """Rebase, sort by arrival (stable: equal arrivals keep source order) and number turns, as `scan` asks."""
    if scan.rebase_arrivals:
        earliest = pc.min(table.column("arrival_s")).as_py()
        at = table.schema.get_field_index("arrival_s")
        rebased = pc.subtract(table.column("arrival_s"), earliest)
        table = table.set_column(at, WORKLOAD_SCHEMA.field("arrival_s"), rebased)
    table = table.sort_by("arrival_s")
    if scan.number_turns:
        table = numbered_turns(table)
    return table.combine_chunks()
