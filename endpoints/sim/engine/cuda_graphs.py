"""Which decode steps SGLang runs as a captured CUDA graph and which eagerly, counted as its scheduler counts them.

SGLang 0.5.23 captures decode graphs for batches up to `--cuda-graph-max-bs` (`--cuda-graph-max-bs-decode`); unset,
`arg_groups/memory_hook.py` (`handle_gpu_memory_settings`) picks it from the GPU's memory and the TP size, and caps
that default at `--max-running-requests` where the flag is given. A decode (or speculative verify) step replays a
graph when its batch fits (`model_executor/runner/decode_cuda_graph_runner.py`, `can_run_graph`); under DP
attention the batch compared is the largest rank's, since every rank joins each step. A step past it runs
eagerly, and `sglang:cuda_graph_passes_total{mode="decode_none"}` counts it beside `mode="decode_cuda_graph"`
(`observability/metrics_collector.py`, `increment_decode_cuda_graph_pass`).

The twin counts both. It prices an eager step as a graph replay: the fitted decode costs are graph replays (every
published run sets the cap at or above the batches it runs), and no figure here measures an eager DeepSeek step
(docs/twin.md, "CUDA graphs").
"""

from __future__ import annotations

from dataclasses import dataclass

_MIB = 2**20
# SGLang's defaults by the GPU's memory in MiB (below the bound): (cap at --tp-size < 4, cap at 4 or more).
_DEFAULT_MAX_BS_BY_MEMORY_MIB = (
    (20 * 1024, (8, 8)),  # T4, 4080
    (35 * 1024, (48, 160)),  # A10, 4090, 5090
    (60 * 1024, (32, 160)),  # A100 40 GB, L40
    (90 * 1024, (256, 512)),  # H100, A100 80 GB
    (160 * 1024, (256, 512)),  # H200, H20
)
_LARGE_GPU_MAX_BS = 512  # B200, MI300 and larger, at any TP size
SMALL_TP = 4


def default_decode_graph_max_bs(hbm_bytes: float, tp_size: int, max_running_requests: int | None) -> int:
    """The decode graphs' largest batch SGLang captures when `--cuda-graph-max-bs` is unset, on a GPU of
    `hbm_bytes`; `max_running_requests`: the flag as given (None: unset)."""
    memory_mib = hbm_bytes / _MIB
    max_bs = _LARGE_GPU_MAX_BS
    for bound_mib, (small, large) in _DEFAULT_MAX_BS_BY_MEMORY_MIB:
        if memory_mib < bound_mib:
            max_bs = small if tp_size < SMALL_TP else large
            break
    return max_bs if max_running_requests is None else min(max_bs, max_running_requests)


@dataclass(slots=True)
class DecodeGraphPasses:
    """Decode steps that replayed a graph and steps that ran eagerly, up to `max_bs` requests on a rank."""

    max_bs: int
    graph: int = 0
    eager: int = 0

    def count(self, largest_rank_batch: int, steps: int = 1) -> None:
        if largest_rank_batch <= self.max_bs:
            self.graph += steps
        else:
            self.eager += steps
