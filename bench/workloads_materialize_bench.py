"""Prompt materialization speed on the bundled Mooncake trace: vectorized ids vs a per-block generator.

Prints tokens materialized per second for `workloads.prompts.prompt_materializer.materialize_input_ids` and, as
the reference, the previous approach (one numpy Generator per distinct block, Python lists out), and
their ratio. `--quick` uses a 60-second window.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from workloads.prompts.prompt_materializer import materialize_input_ids
from workloads.readers.mooncake_reader import read_mooncake
from workloads.workload import Workload

TRACE = Path(__file__).resolve().parent.parent / "workloads" / "traces" / "mooncake_conversation.jsonl"


def per_block_generator_reference(workload: Workload, seed: int = 0) -> list[list[int]]:
    """The earlier design, for comparison: a seeded Generator per distinct block, concatenated, as lists."""
    cache: dict[int, np.ndarray] = {}
    out = []
    block_size = workload.block_size
    for n, blocks in zip(workload.table["input_tokens"].to_pylist(), workload.table["prefix_blocks"].to_pylist()):
        parts = []
        for h in blocks[: -(-n // block_size)]:
            if h not in cache:
                cache[h] = np.random.default_rng([seed, 0, h & (2**64 - 1)]).integers(16, 129280, block_size)
            parts.append(cache[h])
        out.append(np.concatenate(parts)[:n].tolist())
    return out


def timed(function, workload: Workload) -> float:
    started = time.perf_counter()
    function(workload)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a 60 s window instead of 600 s")
    args = parser.parse_args()
    window_s = 60 if args.quick else 600
    workload = read_mooncake(TRACE).window(0, window_s)
    tokens = int(np.sum(workload.table["input_tokens"].to_numpy()))
    new_s = min(timed(materialize_input_ids, workload) for _ in range(3))
    old_s = timed(per_block_generator_reference, workload)
    print(f"mooncake window {window_s} s: {workload.num_requests} requests, {tokens:,} input tokens")
    print(f"vectorized (int32 arrays):      {new_s:7.3f} s  {tokens / new_s / 1e6:7.1f} M tokens/s")
    print(f"per-block generator (lists):    {old_s:7.3f} s  {tokens / old_s / 1e6:7.1f} M tokens/s")
    print(f"speed-up: {old_s / new_s:.1f}x")


if __name__ == "__main__":
    main()
