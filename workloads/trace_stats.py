"""Summary figures of a Workload, in memory or spooled to a file: size, span, token means and how much input
an ideal prefix cache could reuse. One pass over the batches, so a trace of any length fits in bounded memory."""

from __future__ import annotations

import math
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from workloads.prompts.prompt_materializer import mix64
from workloads.trace_scan import BATCH_ROWS
from workloads.workload import Workload
from workloads.workload_file import WorkloadFile

# Pairs of (chained hash of a leading run of blocks, request row), written to disk while counting reuse.
_PAIR = np.dtype([("hash", "<i8"), ("row", "<i8")])
_PARTITION_BITS = 6
_HASH_PARTITIONS = 1 << _PARTITION_BITS
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
    earlier request, times the block size, capped at its input length.

    A request's run of k blocks was seen before it exactly when an earlier request has the same chained
    hash, and if run k was seen so was every shorter one; so it reuses all of its runs but those it is
    the first to have. The (hash, row) pairs go to _HASH_PARTITIONS files by the hash's top bits as the
    batches pass; each file is then sorted alone to find every hash's first row. Memory: one batch, one
    partition (1/64 of the pairs) and two int32 counts per request, whatever the trace's length.
    """
    blocks_per_row: list[np.ndarray] = []
    inputs_per_row: list[np.ndarray] = []
    with tempfile.TemporaryDirectory(prefix="costbench-prefixes-") as folder:
        paths = [Path(folder) / f"part-{p}.bin" for p in range(_HASH_PARTITIONS)]
        handles = [open(path, "wb") for path in paths]  # closed together in the finally below
        try:
            first_row = 0
            for batch in batches:
                rows, hashes = _prefix_hashes(batch.column("prefix_blocks"))
                lengths = pc.fill_null(pc.list_value_length(batch.column("prefix_blocks")), 0)
                blocks_per_row.append(lengths.to_numpy(zero_copy_only=False).astype(np.int32))
                inputs_per_row.append(batch.column("input_tokens").to_numpy(zero_copy_only=False).astype(np.int32))
                pairs = np.empty(len(hashes), dtype=_PAIR)
                pairs["hash"], pairs["row"] = hashes, rows + first_row
                partition = (hashes.view(np.uint64) >> np.uint64(64 - _PARTITION_BITS)).astype(np.int64)
                order = np.argsort(partition, kind="stable")  # keeps rows ascending within a partition
                bounds = np.searchsorted(partition[order], np.arange(_HASH_PARTITIONS + 1))
                for p, handle in enumerate(handles):
                    pairs[order[bounds[p] : bounds[p + 1]]].tofile(handle)
                first_row += batch.num_rows
        finally:
            for handle in handles:
                handle.close()
        requests = first_row
        new_runs = np.zeros(requests, dtype=np.int32)
        for path in paths:
            pairs = np.fromfile(path, dtype=_PAIR)
            if not len(pairs):
                continue
            order = np.argsort(pairs["hash"], kind="stable")  # equal hashes stay in row order
            hashes = pairs["hash"][order]
            first = np.concatenate([[True], hashes[1:] != hashes[:-1]])
            new_runs += np.bincount(pairs["row"][order][first], minlength=requests).astype(np.int32)
            path.unlink()
    if not requests:
        return 0
    seen_runs = np.concatenate(blocks_per_row).astype(np.int64) - new_runs
    return int(np.minimum(seen_runs * block_size, np.concatenate(inputs_per_row)).sum())


def _batches(source: Workload | WorkloadFile, columns: list[str]) -> Iterator[pa.RecordBatch]:
    if isinstance(source, WorkloadFile):
        yield from source.batches(columns=columns)
    else:
        yield from source.table.select(columns).to_batches(max_chunksize=BATCH_ROWS)


class _Totals:
    """Counts, token sums and arrival span, taken from batches as they pass."""

    def __init__(self) -> None:
        self.requests = self.input_tokens = self.output_tokens = 0
        self.earliest_s, self.latest_s = math.inf, -math.inf

    def counted(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            if batch.num_rows:
                self.requests += batch.num_rows
                self.input_tokens += int(pc.sum(batch.column("input_tokens")).as_py())
                self.output_tokens += int(pc.sum(batch.column("output_tokens")).as_py())
                span = pc.min_max(batch.column("arrival_s")).as_py()
                self.earliest_s = min(self.earliest_s, span["min"])
                self.latest_s = max(self.latest_s, span["max"])
            yield batch


def prefix_reuse_share(source: Workload | WorkloadFile) -> float:
    """Σ reusable input tokens / Σ input tokens (see _reused_tokens); 0.0 without prefix information."""
    return trace_stats(source).prefix_reuse_share


def trace_stats(source: Workload | WorkloadFile) -> TraceStats:
    """The figures of a workload in memory or of a spooled file, one pass over its batches."""
    header = source.header if isinstance(source, WorkloadFile) else source
    totals = _Totals()
    columns = ["arrival_s", "input_tokens", "output_tokens"]
    if header.block_size > 0:
        # The prefix count consumes the batches and the totals are taken as they go by: one read.
        reused = _reused_tokens(totals.counted(_batches(source, [*columns, "prefix_blocks"])), header.block_size)
    else:
        reused = 0
        for _ in totals.counted(_batches(source, columns)):
            pass
    requests, total_input = totals.requests, totals.input_tokens
    return TraceStats(
        requests=requests,
        duration_s=float(totals.latest_s - totals.earliest_s) if requests else 0.0,
        mean_input_tokens=total_input / requests if requests else 0.0,
        mean_output_tokens=totals.output_tokens / requests if requests else 0.0,
        prefix_reuse_share=reused / total_input if total_input else 0.0,
        block_size=header.block_size,
        time_unit=header.time_unit,
        excluded_rows=header.excluded_rows,
        excluded_reason=header.excluded_reason,
        token_counter=header.token_counter,
        arrival_process=header.arrival_process,
    )
