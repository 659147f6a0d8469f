"""A trace spooled once to a sorted canonical Parquet file, so a trace of any size is inspected and windowed
in bounded memory (docs/workloads.md, "Big traces").

`spool(scan, dest)` writes the reader's batches as they come (one row group each); a trace that arrives in
order (the usual case) is then already the canonical file. One that does not, or whose turns must be
numbered across the whole file, is sorted out of core by DuckDB under a memory limit. `WorkloadFile.rows`
reads back only the row groups a window touches, so a replay holds its window and not the week.
`open_workload` keeps spooled files in a cache folder keyed by the source file's identity, so every
week of a scenario reads the trace once.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from workloads.canonical_parquet import METADATA_PREFIX, canonical_metadata, costbench_metadata, parse_facts
from workloads.out_of_core import out_of_core, sql_text
from workloads.readers.reader_registry import ReadOptions, checked_reader, scan_trace
from workloads.trace_scan import BATCH_ROWS, TraceScan
from workloads.workload import WORKLOAD_SCHEMA, TraceFormat, TraceFormatError, Workload

# Bump when a reader changes what it makes of the same file: cached spools of older code are not reused.
SPOOL_VERSION = "2"  # 2: response_format and constrained columns (issue 15)
# Row groups are read through a buffered stream: with pyarrow's pre-buffering the RSS of reading the
# prefix_blocks of a spooled 2M-row Mooncake trace grew to 353 MB, without it it stays at 187 MB.
STREAM_BUFFER_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class WorkloadFile:
    """A canonical workload on disk, sorted by arrival_s; `header` holds its facts over zero rows."""

    path: Path
    header: Workload
    num_requests: int

    def rows(self, start_s: float | None = None, end_s: float | None = None) -> Workload:
        """The requests arriving in [start_s, end_s) as an in-memory Workload, arrival_s as in the file."""
        filters = []
        if start_s is not None:
            filters.append(("arrival_s", ">=", float(start_s)))
        if end_s is not None:
            filters.append(("arrival_s", "<", float(end_s)))
        table = pq.read_table(self.path, filters=filters or None, schema=_FILE_SCHEMA)
        return dataclasses.replace(self.header, table=_canonical(table))

    def window_rows(self, start_s: float, duration_s: float | None) -> Workload:
        """The rows a replay of the window [start_s, start_s + duration_s) sends (arrivals not rebased: the
        replay's own window does that, and names the trace seconds it replayed)."""
        return self.rows(start_s, None if duration_s is None else start_s + duration_s)

    def batches(self, columns: list[str] | None = None) -> Iterator[pa.RecordBatch]:
        """Every row, in arrival order, one row group at a time."""
        parquet = pq.ParquetFile(self.path, pre_buffer=False, buffer_size=STREAM_BUFFER_BYTES)
        try:
            yield from parquet.iter_batches(batch_size=BATCH_ROWS, columns=columns)
        finally:
            parquet.close()


# DuckDB names a list's element "element", Arrow "item": read both as the canonical schema.
_FILE_SCHEMA = pa.schema([field.with_nullable(True) for field in WORKLOAD_SCHEMA])


def _canonical(table: pa.Table) -> pa.Table:
    return table.select(WORKLOAD_SCHEMA.names).cast(WORKLOAD_SCHEMA).combine_chunks()


def spool(scan: TraceScan, dest: Path) -> WorkloadFile:
    """Consume `scan` into the sorted canonical Parquet file `dest` (written atomically); TraceFormatError as
    the reader raises it, with nothing left at `dest`."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(f".{dest.name}.{os.getpid()}.partial")
    try:
        count, in_order = _write_batches(scan, partial)
        if count == 0:
            raise scan.empty_error()
        if in_order and not scan.number_turns:
            os.replace(partial, dest)
        else:
            _sort_out_of_core(partial, dest, scan)
    finally:
        partial.unlink(missing_ok=True)
    return WorkloadFile(dest, scan.workload(WORKLOAD_SCHEMA.empty_table()), count)


def _write_batches(scan: TraceScan, path: Path) -> tuple[int, bool]:
    """(rows written, whether arrivals never went back). Arrivals rebased on the first row if asked:
    in an ordered trace that is the earliest; otherwise the sort rebases again."""
    count, in_order, last_s = 0, True, -np.inf
    first_s: float | None = None
    at = WORKLOAD_SCHEMA.get_field_index("arrival_s")
    # Page checksums: a bit flipped on disk later is an error at read time, not a changed request.
    with pq.ParquetWriter(path, WORKLOAD_SCHEMA, write_page_checksum=True) as writer:
        for batch in scan.batches:
            if batch.num_rows == 0:
                continue
            arrivals = batch.column("arrival_s").to_numpy()
            if scan.rebase_arrivals:
                first_s = float(arrivals[0]) if first_s is None else first_s
                arrivals = arrivals - first_s
                batch = batch.set_column(at, WORKLOAD_SCHEMA.field("arrival_s"), pa.array(arrivals, pa.float64()))
            if arrivals[0] < last_s or bool(np.any(np.diff(arrivals) < 0)):
                in_order = False
            last_s = float(arrivals[-1])
            writer.write_batch(batch, row_group_size=BATCH_ROWS)
            count += batch.num_rows
        # The facts (the exclusions above all) are complete only now; Parquet keeps them in the footer.
        writer.add_key_value_metadata(canonical_metadata(scan.workload(WORKLOAD_SCHEMA.empty_table())))
    return count, in_order


def _sort_out_of_core(partial: Path, dest: Path, scan: TraceScan) -> None:
    """Sort by (arrival_s, source order), rebase and number turns with DuckDB, spilling past the limit."""
    arrival = "arrival_s - min(arrival_s) OVER ()" if scan.rebase_arrivals else "arrival_s"
    turn = (
        "CASE WHEN session_id IS NULL THEN NULL ELSE (row_number() OVER "
        "(PARTITION BY session_id ORDER BY arrival_s, file_row_number) - 1)::INTEGER END"
        if scan.number_turns
        else "turn"
    )
    columns = ", ".join(
        {"arrival_s": f"{arrival} AS arrival_s", "turn": f"{turn} AS turn"}.get(name, name)
        for name in WORKLOAD_SCHEMA.names
    )
    metadata = canonical_metadata(scan.workload(WORKLOAD_SCHEMA.empty_table()))
    kv = ", ".join(f"{sql_text(key)}: {sql_text(value)}" for key, value in metadata.items())
    sorted_partial = partial.with_name(partial.name + ".sorted")
    try:
        with out_of_core(dest.parent) as con:
            con.execute(
                f"COPY (SELECT {columns} FROM read_parquet({sql_text(partial)}, file_row_number = true) "
                f"ORDER BY arrival_s, file_row_number) TO {sql_text(sorted_partial)} "
                f"(FORMAT parquet, ROW_GROUP_SIZE {BATCH_ROWS}, KV_METADATA {{{kv}}})"
            )
        os.replace(sorted_partial, dest)
    finally:
        sorted_partial.unlink(missing_ok=True)


def read_workload_file(path: Path) -> WorkloadFile:
    """A spooled file back as a WorkloadFile (facts from its metadata, read as the canonical reader reads them)."""
    parquet = pq.ParquetFile(path)
    try:
        # File-level key-value metadata: the spool adds the facts at close, after the schema was written.
        metadata = costbench_metadata(path, parquet.metadata.metadata)
        count = parquet.metadata.num_rows
    finally:
        parquet.close()
    header = Workload(
        name=metadata[f"{METADATA_PREFIX}name"],
        source_path=str(path),
        trace_format=TraceFormat(metadata[f"{METADATA_PREFIX}source_format"]),
        table=WORKLOAD_SCHEMA.empty_table(),
        **parse_facts(path, metadata),
    )
    return WorkloadFile(Path(path), header, count)


def spool_key(path: Path, trace_format: TraceFormat | str, options: ReadOptions) -> str:
    """What makes a spooled copy reusable: the source file's identity, the format, the options, this code."""
    stat = path.stat()
    tokenizer = options.tokenizer_path
    tokenizer_id = ""
    if tokenizer is not None and Path(tokenizer).is_file():
        tokenizer_stat = Path(tokenizer).stat()
        tokenizer_id = f"{Path(tokenizer).resolve()}:{tokenizer_stat.st_size}:{tokenizer_stat.st_mtime_ns}"
    elif tokenizer is not None:
        # The reader says what is wrong with it (or ignores it: a format that takes no tokenizer).
        tokenizer_id = f"missing:{tokenizer}"
    identity = "|".join(
        (
            SPOOL_VERSION,
            str(path.resolve()),
            str(stat.st_size),
            str(stat.st_mtime_ns),
            str(getattr(trace_format, "value", trace_format)),
            str(options.block_size),
            str(options.model),
            tokenizer_id,
        )
    )
    return hashlib.sha256(identity.encode()).hexdigest()[:20]


def open_workload(
    path: str | Path, trace_format: TraceFormat | str, cache_dir: Path, options: ReadOptions | None = None
) -> WorkloadFile:
    """The trace at `path` as a spooled WorkloadFile in `cache_dir`, read now unless an up-to-date copy is there.

    Raises TraceFormatError naming the trace (file, line, reason) when it cannot be read.
    """
    path = Path(path)
    options = options if options is not None else ReadOptions()
    checked_reader(path, trace_format, options)  # a missing file or bad option fails before any cache look-up
    try:
        dest = Path(cache_dir) / f"{path.stem}-{spool_key(path, trace_format, options)}.parquet"
    except OSError as exc:
        raise TraceFormatError(str(path), None, f"cannot read file: {exc.strerror or exc}") from None
    _remove_dead_partials(Path(cache_dir))
    if dest.is_file():
        try:
            cached = read_workload_file(dest)
        except (OSError, KeyError, ValueError, pa.ArrowInvalid):
            dest.unlink(missing_ok=True)  # a damaged cache entry: read the trace again
        else:
            return dataclasses.replace(cached, header=dataclasses.replace(cached.header, source_path=str(path)))
    # Only now is the trace read: some readers (ShareGPT, gateway) parse the whole file when the scan starts.
    scan = scan_trace(path, trace_format, options)
    try:
        return spool(scan, dest)
    except TraceFormatError:
        raise
    except ValueError as exc:
        raise TraceFormatError(str(path), None, str(exc)) from None


def _remove_dead_partials(cache_dir: Path) -> None:
    """Partial files of spools whose process was killed (`.<name>.<pid>.partial*`): a live one is kept."""
    if not cache_dir.is_dir():
        return
    for partial in cache_dir.glob(".*.partial*"):
        pid_text = partial.name.split(".partial")[0].rsplit(".", 1)[-1]
        if pid_text.isdigit() and not _pid_alive(int(pid_text)):
            partial.unlink(missing_ok=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
