"""The KV pool: a fixed number of token slots, sized like SGLang sizes it.

SGLang's ModelRunner.profile_max_num_token: `rest = available − total × (1 − mem_fraction_static)`, where
`total` is the GPU memory free once the CUDA context and the communicators exist (before the weights)
and `available` what is free after loading them. So per GPU the pool gets `mem_fraction_static` of
(HBM − RUNTIME_RESERVE_BYTES), less that GPU's share of the weights as SGLang lays them out
(ModelProfile.weight_bytes_per_gpu). MLA's latent KV is not sharded by TP: under TP every GPU holds the
KV of every request, so the pool holds (free bytes on one GPU) / (KV bytes per token) tokens. Under DP
attention each rank has a pool of that size for its own requests; kv_capacity_tokens gives the ranks' pools
together (the engine builder gives each rank its share).

Under MTP (EAGLE with the model's NextN layer) the draft is paid for out of the same budget, twice over
(SGLang 0.5.19 and 0.5.23): the scheduler builds both workers, so both load their weights, before
init_memory_pools sizes the target's pool (managers/scheduler.py `init_target_memory_pool`), and the
pool's cell size counts the draft's KV layers beside the target's, since the two share one set of slot
indices (model_executor/pool_configurator.py, DefaultPoolConfigurator: `draft_kv_size` added to
`_cell_size`). The draft's embedding and output head are the target's (EAGLE worker `init_lm_head`), so
only its own layer's weights count.

Slots are either owned by the radix tree (cached, evictable when unlocked) or reserved by running
requests for tokens not in the tree yet; the pool counts the reservations and asks the tree for
the rest.
"""

from __future__ import annotations

from endpoints.sim.cost.cost_model import ParallelConfig
from endpoints.sim.cost.profiles import HardwareProfile, ModelProfile

# ASSUMPTION, not measured here: what a TP rank has in use before SGLang profiles, besides the weights
# (CUDA context, PyTorch, NCCL communicators, the custom all-reduce's buffers). Where a pool is tight this
# decides whether a benchmark queues for KV (docs/twin.md, "The KV cliff").
RUNTIME_RESERVE_BYTES = 1.5 * 2**30


class KvSizingError(ValueError):
    pass


def kv_capacity_tokens(
    model: ModelProfile,
    hardware: HardwareProfile,
    parallel: ParallelConfig,
    mem_fraction_static: float,
    kv_dtype_bytes: int,
    draft: ModelProfile | None = None,
) -> int:
    """`draft`: the MTP layer as a model (speculative.mtp_draft_profile) when the server drafts with it."""
    weight_bytes_per_gpu = _weight_bytes_per_gpu(model, parallel)
    kv_bytes_per_token = model.kv_bytes_per_token(kv_dtype_bytes)
    if draft is not None:
        weight_bytes_per_gpu += _weight_bytes_per_gpu(draft, parallel) - draft.embedding_and_head_bytes_per_gpu(
            parallel.tp_size
        )
        kv_bytes_per_token += draft.kv_bytes_per_token(kv_dtype_bytes)
    free_bytes = (hardware.hbm_bytes - RUNTIME_RESERVE_BYTES) * mem_fraction_static - weight_bytes_per_gpu
    if free_bytes <= 0:
        ep = parallel.ep
        raise KvSizingError(
            f"{model.name} weights{'' if draft is None else ' and its MTP layer'} need "
            f"{weight_bytes_per_gpu / 1e9:.0f} GB per GPU at --tp-size {parallel.tp_size}"
            f"{'' if ep is None else f' (--ep-size {ep.ep_size})'}, "
            f"more than --mem-fraction-static {mem_fraction_static} × {hardware.hbm_bytes / 1e9:.0f} GB "
            f"on {hardware.name}: raise --tp-size or pick bigger GPUs"
        )
    per_rank = int(free_bytes // kv_bytes_per_token)
    return per_rank * parallel.attention_ranks


def _weight_bytes_per_gpu(model: ModelProfile, parallel: ParallelConfig) -> float:
    ep = parallel.ep
    if ep is None:
        return model.weight_bytes_per_gpu(parallel.tp_size)
    return model.expert_parallel_weight_bytes_per_gpu(
        parallel.tp_size, parallel.attention_tp_size, ep.ep_size, ep.redundant_experts
    )


def static_bytes_per_gpu(hardware: HardwareProfile, mem_fraction_static: float) -> float:
    """Device memory one GPU holds from start to end: the runtime's share and mem_fraction_static of the rest
    (the weights and the KV pool, allocated once); activations and CUDA graphs in the headroom are not modelled."""
    return RUNTIME_RESERVE_BYTES + (hardware.hbm_bytes - RUNTIME_RESERVE_BYTES) * mem_fraction_static


class KvPool:
    def __init__(self, capacity_tokens: int) -> None:
        if capacity_tokens <= 0:
            raise KvSizingError(f"KV pool capacity must be positive, got {capacity_tokens}")
        self.capacity_tokens = capacity_tokens
        self.reserved_tokens = 0

    def available_tokens(self, cached_tokens: int) -> int:
        return self.capacity_tokens - cached_tokens - self.reserved_tokens

    def reserve(self, tokens: int) -> None:
        self.reserved_tokens += tokens

    def release(self, tokens: int) -> None:
        if tokens > self.reserved_tokens:
            raise RuntimeError(f"KV pool: releasing {tokens} tokens but only {self.reserved_tokens} are reserved")
        self.reserved_tokens -= tokens
