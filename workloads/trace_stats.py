"""Summary figures of a Workload, in memory or spooled to a file: size, span, token means and how much input
an ideal prefix cache could reuse. One pass over the batches, so a trace of any length fits in bounded memory."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from importlib import resources

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from workloads.out_of_core import out_of_core
from workloads.prompt_materializer import mix64
from workloads.trace_scan import BATCH_ROWS
from workloads.workload import Workload
from workloads.workload_file import WorkloadFile

_PREFIX_REUSE_SQL = resources.files("workloads").joinpath("sql/prefix_reuse.sql").read_text()
# Chain constants for hashing a leading run of blocks: any odd multiplier and fixed seed will do.
_CHAIN_SEED = np.uint64(0x243F6A8885A308D3)
_CHAIN_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)


@dataclass(frozen=True, slots=True)
class TraceStats:
    requests: int
    duration_s: float  # last arrival minus first arrival
    mean_input_tokens: float
    mean_output_tokens: float
    prefix_reuse_share: float  # share of input tokens an infinite prefix cache would hit; 0.0 without blocks
    block_size: int  # tokens per prefix block; 0 when the trace has no prefix information
    time_unit: str  # unit of the source timestamps
    excluded_rows: int = 0  # source rows left out on purpose (Workload.excluded_rows)
    excluded_reason: str = ""
    token_counter: str = "trace"  # what produced the token counts
    arrival_process: str = "trace"  # "trace", "none" (untimed: needs synthetic arrivals) or the synthetic process


def _prefix_hashes(blocks: pa.ListArray) -> tuple[np.ndarray, np.ndarray]:
    """(row of each element, hash of the leading run ending at it): each run hashed with its whole chain."""
    blocks = blocks.cast(pa.list_(pa.int64()))
    lengths = pc.fill_null(pc.list_value_length(blocks), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    values = pc.list_flatten(blocks).to_numpy(zero_copy_only=False).view(np.uint64)
    rows = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    position = np.arange(len(values), dtype=np.int64) - starts
    hashes = np.empty(len(values), dtype=np.uint64)
    # Position by position, every row at once: element j chains onto element j - 1 of the same row.
    order = np.argsort(position, kind="stable")
    bounds = np.searchsorted(position[order], np.arange(int(position.max(initial=-1)) + 2))
    for k in range(len(bounds) - 1):
        at = order[bounds[k] : bounds[k + 1]]
        previous = _CHAIN_SEED if k == 0 else hashes[at - 1]
        with np.errstate(over="ignore"):
            hashes[at] = mix64(previous * _CHAIN_MULTIPLIER + values[at])
    return rows, hashes.view(np.int64)


def _reused_tokens(batches: Iterable[pa.RecordBatch], block_size: int) -> int:
    """Σ over requests (in table order) of the input an infinite prefix cache holding every earlier
    request's blocks would reuse: its longest leading run of blocks equal to the leading blocks of some
    earlier request, times the block size, capped at its input length. Computed out of core in DuckDB
    (workloads/sql/prefix_reuse.sql), so a trace of any length fits in bounded memory."""
    with out_of_core() as con:
        con.execute("CREATE TABLE prefixes (row_index BIGINT, prefix_hash BIGINT)")
        con.execute("CREATE TABLE rows_with_blocks (row_index BIGINT, blocks BIGINT, input_tokens BIGINT)")
        first_row = 0
        for batch in batches:
            rows, hashes = _prefix_hashes(batch.column("prefix_blocks"))
            lengths = pc.fill_null(pc.list_value_length(batch.column("prefix_blocks")), 0)
            has_blocks = pc.greater(lengths, 0)
            if len(hashes):
                chunk = pa.table({"row_index": rows + first_row, "prefix_hash": hashes})
                con.register("chunk", chunk)
                con.execute("INSERT INTO prefixes SELECT * FROM chunk")
                per_row = pa.table(
                    {
                        "row_index": pa.array(np.arange(batch.num_rows, dtype=np.int64) + first_row),
                        "blocks": lengths.cast(pa.int64()),
                        "input_tokens": batch.column("input_tokens").cast(pa.int64()),
                    }
                ).filter(has_blocks)
                con.register("per_row", per_row)
                con.execute("INSERT INTO rows_with_blocks SELECT * FROM per_row")
                con.unregister("chunk")
                con.unregister("per_row")
            first_row += batch.num_rows
        row = con.execute(_PREFIX_REUSE_SQL, [block_size]).fetchone()
    return int(row[0]) if row else 0


def _batches(source: Workload | WorkloadFile, columns: list[str]) -> Iterator[pa.RecordBatch]:
    if isinstance(source, WorkloadFile):
        yield from source.batches(columns=columns)
    else:
        yield from source.table.select(columns).to_batches(max_chunksize=BATCH_ROWS)


def prefix_reuse_share(source: Workload | WorkloadFile) -> float:
    """Σ reusable input tokens / Σ input tokens (see _reused_tokens); 0.0 without prefix information."""
    return trace_stats(source).prefix_reuse_share


def trace_stats(source: Workload | WorkloadFile) -> TraceStats:
    """The figures of a workload in memory or of a spooled file, one pass over its batches."""
    header = source.header if isinstance(source, WorkloadFile) else source
    requests, total_input, total_output = 0, 0, 0
    earliest, latest = math.inf, -math.inf
    for batch in _batches(source, ["arrival_s", "input_tokens", "output_tokens"]):
        if not batch.num_rows:
            continue
        requests += batch.num_rows
        total_input += int(pc.sum(batch.column("input_tokens")).as_py())
        total_output += int(pc.sum(batch.column("output_tokens")).as_py())
        span = pc.min_max(batch.column("arrival_s")).as_py()
        earliest, latest = min(earliest, span["min"]), max(latest, span["max"])
    share = 0.0
    if header.block_size > 0 and total_input > 0:
        reused = _reused_tokens(_batches(source, ["prefix_blocks", "input_tokens"]), header.block_size)
        share = reused / total_input
    return TraceStats(
        requests=requests,
        duration_s=float(latest - earliest) if requests else 0.0,
        mean_input_tokens=total_input / requests if requests else 0.0,
        mean_output_tokens=total_output / requests if requests else 0.0,
        prefix_reuse_share=share,
        block_size=header.block_size,
        time_unit=header.time_unit,
        excluded_rows=header.excluded_rows,
        excluded_reason=header.excluded_reason,
        token_counter=header.token_counter,
        arrival_process=header.arrival_process,
    )
