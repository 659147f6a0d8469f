"""A scenario-defined shared system prompt: the same leading blocks in front of every request.

Chat products send a long system prompt with every request; traces without prefix information (Azure,
BurstGPT) lose that, so a scenario can put it back. The prompt is `prefix_tokens` tokens in whole blocks
with their own hash ids; each request's own tokens get block ids unique to that request, so only the
system prompt is shared. Input token counts grow by `prefix_tokens`.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pyarrow as pa

from workloads.workload import WORKLOAD_SCHEMA, Workload

DEFAULT_BLOCK_TOKENS = 512
# Hash ids of the shared prompt are negative (traces and capture use ids >= 0); a request's own
# blocks, when the trace has none, live above 2**48 so they never meet trace ids either.
_OWN_BLOCKS_BASE = 1 << 48
_OWN_BLOCKS_PER_ROW = 1 << 16


class SharedPrefixError(ValueError):
    pass


def with_shared_prefix(workload: Workload, prefix_tokens: int) -> Workload:
    if prefix_tokens == 0:
        return workload
    block_size = workload.block_size or DEFAULT_BLOCK_TOKENS
    if prefix_tokens < 0 or prefix_tokens % block_size:
        raise SharedPrefixError(
            f"{workload.source_path}: shared_prefix_tokens {prefix_tokens} must be a positive multiple of the "
            f"workload's block size ({block_size} tokens)"
        )
    shared = [-(i + 1) for i in range(prefix_tokens // block_size)]
    inputs = workload.table.column("input_tokens").to_pylist()
    blocks = workload.table.column("prefix_blocks").to_pylist()
    new_blocks = []
    for row, (tokens, own) in enumerate(zip(inputs, blocks)):
        if own is None:
            count = math.ceil(tokens / block_size)
            if count >= _OWN_BLOCKS_PER_ROW:
                raise SharedPrefixError(f"{workload.source_path}: request {row} has too many tokens ({tokens})")
            base = _OWN_BLOCKS_BASE + row * _OWN_BLOCKS_PER_ROW
            own = list(range(base, base + count))
        new_blocks.append(shared + own)
    table = workload.table
    table = table.set_column(
        table.schema.get_field_index("input_tokens"),
        WORKLOAD_SCHEMA.field("input_tokens"),
        pa.array([t + prefix_tokens for t in inputs], pa.int32()),
    )
    table = table.set_column(
        table.schema.get_field_index("prefix_blocks"),
        WORKLOAD_SCHEMA.field("prefix_blocks"),
        pa.array(new_blocks, pa.list_(pa.int64())),
    )
    return replace(workload, name=f"{workload.name}+system{prefix_tokens}", block_size=block_size, table=table)
