"""Summary figures of a Workload: size, span, token means and how much input an ideal prefix cache could reuse."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow.compute as pc

from workloads.workload import Workload


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


def prefix_reuse_share(workload: Workload) -> float:
    """Σ reusable input tokens / Σ input tokens, with an infinite prefix cache and requests in table order.

    A request's reusable tokens are its longest leading run of blocks that equals the leading blocks of
    some earlier request (a block only counts when its whole chained prefix was seen), times the block
    size, capped at its input length. Blocks are kept in a trie: node id of (parent node, hash).
    """
    block_size = workload.block_size
    total_input = pc.sum(workload.table.column("input_tokens")).as_py() or 0
    if block_size <= 0 or total_input == 0:
        return 0.0
    trie: dict[tuple[int, int], int] = {}
    reused_tokens = 0
    blocks_column = workload.table.column("prefix_blocks").to_pylist()
    inputs_column = workload.table.column("input_tokens").to_pylist()
    for blocks, input_tokens in zip(blocks_column, inputs_column):
        if not blocks:
            continue
        node = 0  # the root
        matched = 0
        for block in blocks:
            child = trie.get((node, block))
            if child is None:
                break
            node = child
            matched += 1
        reused_tokens += min(matched * block_size, input_tokens)
        for block in blocks[matched:]:
            child = len(trie) + 1  # ids 1.. ; 0 is the root
            trie[(node, block)] = child
            node = child
    return reused_tokens / total_input


def trace_stats(workload: Workload) -> TraceStats:
    table = workload.table
    requests = table.num_rows
    duration_s = mean_input = mean_output = 0.0
    if requests:
        arrival = pc.min_max(table.column("arrival_s")).as_py()
        duration_s = float(arrival["max"] - arrival["min"])
        mean_input = float(pc.mean(table.column("input_tokens")).as_py())
        mean_output = float(pc.mean(table.column("output_tokens")).as_py())
    return TraceStats(
        requests=requests,
        duration_s=duration_s,
        mean_input_tokens=mean_input,
        mean_output_tokens=mean_output,
        prefix_reuse_share=prefix_reuse_share(workload),
        block_size=workload.block_size,
        time_unit=workload.time_unit,
        excluded_rows=workload.excluded_rows,
        excluded_reason=workload.excluded_reason,
        token_counter=workload.token_counter,
        arrival_process=workload.arrival_process,
    )
