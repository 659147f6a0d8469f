"""Step-time model: how long one forward step of a batch takes, from a roofline.

time = max(compute time, memory time) + a fixed per-step overhead.

- Memory: the weights the step reads (every non-expert weight, plus the distinct routed experts the
  batch's tokens touch, E·(1−(1−k/E)^B) per MoE layer) sharded over the TP GPUs, plus the MLA latent
  KV of every request in the batch. MLA's KV is not sharded by TP, so each GPU reads all of it; DP
  attention splits the requests (and their KV) over the DP ranks instead.
- Compute: 2·active params FLOPs per new token (FP8 GEMMs) plus attention over the context (BF16).
  Cached prefix tokens cost nothing here: they only appear as context.
- Expert parallelism (--ep-size, DeepEP): the busiest GPU's whole experts and token-slots, the attention
  weights of its DP rank, and the token exchange over NVLink and RDMA, hidden in part by two-batch overlap
  (expert_parallel.py).
- Overhead: kernel launches and the two TP all-reduces per layer. Decode replays CUDA graphs, so it
  is small; prefill (extend) runs eagerly, so each layer costs far more launch and Python time.

Beside its time, a step's work (`step_work`: its compute-bound seconds and the bytes it moves over HBM) feeds
the twin's GPU counters (endpoints/sim/engine/gpu_counters.py); both come from the one roofline.

The efficiency constants (shares of peak, per-layer overheads) are per vendor, plain data in
profiles.CostConstants, fitted by bench/twin_fit.py on a declared fit set of published figures
(endpoints/sim/cost/fitted_constants.py); bench/twin_calibration.py prints the fit set and the validation
set apart.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter
from typing import Protocol

from endpoints.sim.cost.expert_parallel import ExpertLoad, ExpertParallel, busiest_gpu_load, exchange
from endpoints.sim.cost.profiles import CostConstants, HardwareProfile, ModelProfile, cost_constants_for
from endpoints.sim.cost.step_batch import ForwardMode, RankLoad, StepBatch

# Past one node (TP over more than 8 GPUs) without --ep-size, every MoE layer exchanges tokens over InfiniBand:
# DeepEP's published low-latency kernels at EP16 take ~118 µs to dispatch and ~195 µs to combine. Within a
# node, NVLink all-reduces are part of the per-layer overheads (CostConstants). A published figure, not fitted.
# With --ep-size the exchange is modelled from its bytes and links instead (expert_parallel.py).
GPUS_PER_NODE = 8
INTER_NODE_MOE_EXCHANGE_S = 313e-6
BF16_BYTES = 2
DP_GATHER_ALL_REDUCES = 2  # a layer's gather before the MLP and the all-reduce of its TP output (dp_gather_s)


_kv_tokens: Callable[[RankLoad], int] = attrgetter("kv_tokens")
_attended_tokens: Callable[[RankLoad], int] = attrgetter("attended_tokens")
_causal_pairs_x2: Callable[[RankLoad], int] = attrgetter("causal_pairs_x2")


@dataclass(frozen=True, slots=True)
class StepWork:
    """What a step asks of each GPU of the server (the busiest one under expert parallelism, as its time is)."""

    compute_s: float  # the step's math at the fitted shares of peak: the roofline's compute-bound time
    hbm_bytes: float  # weights and KV read from device memory

    def __add__(self, other: StepWork) -> StepWork:
        return StepWork(self.compute_s + other.compute_s, self.hbm_bytes + other.hbm_bytes)


# A plain decode step on one attention rank, from (requests, their context tokens in all) to (step s, compute-bound s,
# HBM bytes): the same floats step_time_s and step_work give for that batch, without building it. A cost model
# that has one offers it as `uniform_decode()` (the engine's runs of quiet decode steps use it); wrappers that
# change a decode step's time or draw per step (run jitter, speculative decoding) offer none.
UniformDecodeCost = Callable[[int, int], tuple[float, float, float]]


def uniform_decode_of(model: object) -> UniformDecodeCost | None:
    """`model`'s closed form of a plain decode step, or None where it has none."""
    offer: Callable[[], UniformDecodeCost | None] | None = getattr(model, "uniform_decode", None)
    return None if offer is None else offer()


class CostModel(Protocol):
    def step_time_s(self, batch: StepBatch) -> float: ...

    def step_work(self, batch: StepBatch) -> StepWork:
        """The GPU's work in the step; reads no random draw and changes no state (step_time_s may do both)."""
        ...


# Constrained decoding (grammar_backend.py). ASSUMPTIONS from published figures, not fitted to DeepSeek on
# H200: the medians of MaskBench (guidance-ai/jsonschemabench, maskbench/README.md, ~10k real JSON Schemas,
# Llama-3 tokenizer of 128k tokens (DeepSeek's has 129k), one CPU thread of an AMD EPYC 7V13; xgrammar 0.1.10,
# llguidance 0.6.7, outlines 0.1.13): time between masks (TBM) p50 and time to first mask (TTFM, the
# compile) p50. Their means are far higher (xgrammar: TBM 292 µs, TTFM 4.1 s) because of a slow tail.
@dataclass(frozen=True, slots=True)
class GrammarCosts:
    mask_s_per_token: float  # CPU time to fill one token's vocabulary mask; SGLang fills them one by one per step
    compile_s: float  # one-off compile of a new constraint, before the request's first token


GRAMMAR_COSTS: dict[str, GrammarCosts] = {
    "xgrammar": GrammarCosts(mask_s_per_token=8e-6, compile_s=0.535),
    "llguidance": GrammarCosts(mask_s_per_token=36e-6, compile_s=0.001),
    "outlines": GrammarCosts(mask_s_per_token=118e-6, compile_s=6.99),
}


class GrammarCostModel:
    """Wraps a cost model: a decode step pays each grammar-masked token's mask time on top (SGLang fills the
    masks on the CPU before sampling, one request after another, so they add to the step)."""

    def __init__(self, inner: CostModel, costs: GrammarCosts) -> None:
        self._inner = inner
        self._mask_s = costs.mask_s_per_token

    def step_time_s(self, batch: StepBatch) -> float:
        return self._inner.step_time_s(batch) + self._mask_s * batch.masked_tokens

    def step_work(self, batch: StepBatch) -> StepWork:
        return self._inner.step_work(batch)  # the masks are CPU work

    def uniform_decode(self) -> UniformDecodeCost | None:
        return uniform_decode_of(self._inner)  # no request masked: step_time_s adds 0.0


@dataclass(frozen=True, slots=True)
class ParallelConfig:
    tp_size: int = 1
    dp_size: int = 1
    enable_dp_attention: bool = False
    ep: ExpertParallel | None = None  # --ep-size above 1; None: each expert sliced over the TP ranks

    @property
    def attention_ranks(self) -> int:
        """How many groups the requests' KV is split over (1 unless DP attention is on)."""
        return self.dp_size if self.enable_dp_attention else 1

    @property
    def attention_tp_size(self) -> int:
        """GPUs one attention rank's heads are split over: all of them, or tp / dp under DP attention."""
        return self.tp_size // self.attention_ranks


@dataclass(frozen=True, slots=True)
class StepCost:
    compute_s: float
    memory_s: float
    overhead_s: float
    exchange_s: float = 0.0  # expert parallelism's token exchange, the part no computation hides

    @property
    def total_s(self) -> float:
        return max(self.compute_s, self.memory_s) + self.exchange_s + self.overhead_s


class RooflineCostModel:
    def __init__(
        self,
        model: ModelProfile,
        hardware: HardwareProfile,
        parallel: ParallelConfig,
        kv_dtype_bytes: int = 2,
        constants: CostConstants | None = None,
    ) -> None:
        self._model = model
        self._hw = hardware
        self._parallel = parallel
        self._constants = c = constants or cost_constants_for(hardware.vendor)
        self._kv_bytes_per_token = model.kv_bytes_per_token(kv_dtype_bytes)
        self._expert_bytes = model.expert_params * model.weight_bytes_per_param
        self._non_expert_bytes = model.non_expert_params_read * model.weight_bytes_per_param
        # The engine reads a step's work right after its time, for the same batch: the last two batches' costs spare a
        # second roofline (two, as a speculative step prices two batches on its draft model: the verify's, the steps').
        self._last: tuple[StepBatch, StepCost] | None = None
        self._before_last: tuple[StepBatch, StepCost] | None = None
        # The roofline's fixed divisors, computed once as _step_cost's expressions compute them (the same floats).
        bandwidth = hardware.hbm_bytes_per_s * c.memory_efficiency
        self._kv_read_divisor = parallel.attention_ranks * bandwidth
        self._attention_divisor = parallel.tp_size * hardware.bf16_flops_per_s * c.attention_efficiency
        # What a step's time owes to its token count alone (the weights it reads, its GEMMs): (memory s, compute s)
        # by tokens. A server sees few distinct counts (batch sizes, prefill chunks): each is worked out once.
        self._by_tokens: dict[int, tuple[float, float]] = {}
        self._one_rank = parallel.ep is None and parallel.attention_ranks == 1  # _step_cost's shortcut applies

    @property
    def constants(self) -> CostConstants:
        return self._constants

    def distinct_experts_per_layer(self, tokens: int) -> float:
        """Expected distinct routed experts B tokens touch in one MoE layer, with uniform routing."""
        experts = self._model.num_routed_experts
        return experts * (1.0 - (1.0 - self._model.experts_per_token / experts) ** tokens)

    def step_cost(self, batch: StepBatch) -> StepCost:
        last = self._last
        if last is not None and last[0] is batch:
            return last[1]
        before = self._before_last
        if before is not None and before[0] is batch:
            return before[1]
        cost = self._step_cost(batch)
        self._before_last, self._last = last, (batch, cost)
        return cost

    def _step_cost(self, batch: StepBatch) -> StepCost:
        loads = batch.loads
        if self._one_rank and len(loads) == 1:
            return self._one_rank_cost(batch.mode, loads[0])
        tokens = batch.new_tokens
        if tokens <= 0:
            return StepCost(0.0, 0.0, 0.0)
        if self._parallel.ep is not None:
            return self._expert_parallel_cost(batch, self._parallel.ep)
        by_tokens = self._by_tokens.get(tokens)
        if by_tokens is None:
            by_tokens = self._by_tokens[tokens] = self._token_costs_s(tokens)
        weights_s, gemm_s = by_tokens
        memory_s = weights_s + self._kv_read_s(batch)
        overhead_s = self._overhead_s(batch)
        if self._parallel.tp_size > GPUS_PER_NODE:
            overhead_s += INTER_NODE_MOE_EXCHANGE_S * self._model.num_moe_layers
        compute_s = gemm_s + self._attention_s(batch)
        return StepCost(compute_s, memory_s, overhead_s, self.dp_gather_s(batch))

    def _one_rank_cost(self, mode: ForwardMode, load: RankLoad) -> StepCost:
        """_step_cost of a one-rank batch without expert parallelism, straight from its one load (every step of most
        servers): the same operations on the same floats, in the same order."""
        tokens = load.new_tokens
        if tokens <= 0:
            return StepCost(0.0, 0.0, 0.0)
        by_tokens = self._by_tokens.get(tokens)
        if by_tokens is None:
            by_tokens = self._by_tokens[tokens] = self._token_costs_s(tokens)
        weights_s, gemm_s = by_tokens
        memory_s = weights_s + load.kv_tokens * self._kv_bytes_per_token / self._kv_read_divisor
        model, c = self._model, self._constants
        if mode is ForwardMode.DECODE:
            overhead_s = c.decode_layer_s * model.num_layers
            flops = model.decode_attention_flops_per_context_token * load.attended_tokens
        else:
            overhead_s = c.extend_layer_s * model.num_layers
            flops = model.prefill_attention_flops_per_context_token * (load.causal_pairs_x2 / 2)
        if self._parallel.tp_size > GPUS_PER_NODE:
            overhead_s += INTER_NODE_MOE_EXCHANGE_S * model.num_moe_layers
        compute_s = gemm_s + flops / self._attention_divisor
        return StepCost(compute_s, memory_s, overhead_s, 0.0)  # dp_gather_s: 0.0 on one rank

    def _token_costs_s(self, tokens: int) -> tuple[float, float]:
        """(memory s, compute s) of `tokens` new tokens before attention: the weights they read (the non-expert
        ones and the distinct routed experts they touch) and their GEMMs, over the TP GPUs."""
        model, hw, par, c = self._model, self._hw, self._parallel, self.constants
        expert_bytes = self.distinct_experts_per_layer(tokens) * model.num_moe_layers * self._expert_bytes
        weight_bytes = self._non_expert_bytes + expert_bytes
        bandwidth = hw.hbm_bytes_per_s * c.memory_efficiency
        gemm_flops = 2.0 * model.active_params * tokens
        return (weight_bytes / (par.tp_size * bandwidth),
                gemm_flops / (par.tp_size * hw.fp8_flops_per_s * c.gemm_efficiency))  # fmt: skip

    def dp_gather_s(self, batch: StepBatch) -> float:
        """DP attention's extend step: every rank's tokens meet for the MLP, in SGLang's SUM_LEN mode (0.5.23
        layers/dp_attention.py: get_dp_padding_mode picks it for an extend batch over several ranks;
        _dp_gather_via_all_reduce all-reduces a zeroed buffer of every rank's hidden states) and the MLP's TP
        output is all-reduced again: two ring all-reduces of tokens x hidden in BF16 a layer, each moving
        2(n-1)/n of the buffer through every GPU. A decode step's gather is small and inside the fitted step
        overhead; without DP attention the step's TP all-reduces are too."""
        ranks = self._parallel.attention_ranks
        if ranks <= 1 or batch.mode is ForwardMode.DECODE:
            return 0.0
        gpus = self._parallel.tp_size
        per_all_reduce = 2.0 * (gpus - 1) / gpus * batch.new_tokens * self._model.hidden_size * BF16_BYTES
        link = self._hw.nic_bytes_per_s if gpus > self._hw.scale_up_domain_gpus else self._hw.scale_up_bytes_per_s
        return DP_GATHER_ALL_REDUCES * per_all_reduce * self._model.num_layers / (link * self.constants.link_efficiency)

    def _busiest_rank(self, batch: StepBatch, work: Callable[[RankLoad], int]) -> int:
        """Under DP attention the ranks step together, so the rank with the most `work(load)` sets the step: that
        rank's total times the ranks (what the even split of a pooled total divides back to); the total without
        DP attention."""
        ranks = self._parallel.attention_ranks
        if ranks <= 1:
            return sum(map(work, batch.loads))
        per_rank = [0] * ranks
        for rank, load in enumerate(batch.loads):
            per_rank[rank % ranks] += work(load)
        return max(per_rank) * ranks

    def _kv_read_s(self, batch: StepBatch) -> float:
        """Every request's latent KV, read by each GPU of its attention rank (MLA's KV is not split by TP)."""
        kv_tokens = self._busiest_rank(batch, _kv_tokens)
        return kv_tokens * self._kv_bytes_per_token / self._kv_read_divisor

    def _attention_s(self, batch: StepBatch) -> float:
        model = self._model
        if batch.mode is ForwardMode.DECODE:
            # Every new token attends to the whole context: one query per request in plain decode, all
            # the draft tokens of a speculative verify (endpoints/sim/engine/speculative.py).
            attended = self._busiest_rank(batch, _attended_tokens)
            flops = model.decode_attention_flops_per_context_token * attended
        else:
            # Causal: a chunk's i-th token attends to the context plus the i tokens before it.
            pairs = self._busiest_rank(batch, _causal_pairs_x2) / 2
            flops = model.prefill_attention_flops_per_context_token * pairs
        return flops / self._attention_divisor

    def _overhead_s(self, batch: StepBatch) -> float:
        per_layer = self.constants.decode_layer_s if batch.mode is ForwardMode.DECODE else self.constants.extend_layer_s
        return per_layer * self._model.num_layers

    def _expert_parallel_cost(self, batch: StepBatch, ep: ExpertParallel) -> StepCost:
        """The busiest GPU's step under expert parallelism (expert_parallel.py): its whole experts and their
        token-slots, the attention weights of its rank, and the exchange, overlapped by two-batch overlap."""
        model, hw, par, c = self._model, self._hw, self._parallel, self.constants
        tokens = batch.new_tokens
        decode = batch.mode is ForwardMode.DECODE
        bandwidth = hw.hbm_bytes_per_s * c.memory_efficiency
        attention_bytes = model.attention_params * model.weight_bytes_per_param
        shared_bytes = (
            self._non_expert_bytes - attention_bytes
        ) / par.tp_size + attention_bytes / par.attention_tp_size
        routed_active = model.experts_per_token * model.expert_params * model.num_moe_layers
        other_gemm_s = (
            2.0
            * (model.active_params - routed_active)
            * tokens
            / (par.tp_size * hw.fp8_flops_per_s * c.gemm_efficiency)
        )
        attention_s = self._attention_s(batch)
        kv_s = self._kv_read_s(batch)

        def roofline(load: ExpertLoad, share: float) -> tuple[float, float]:
            expert_flops = 2.0 * model.expert_params * load.token_slots * model.num_moe_layers
            compute = share * (other_gemm_s + attention_s) + expert_flops / (hw.fp8_flops_per_s * c.gemm_efficiency)
            memory = (shared_bytes + load.experts_touched * model.num_moe_layers * self._expert_bytes) / bandwidth
            return compute, memory + share * kv_s

        overhead_s = self._overhead_s(batch)
        # Without DeepEP, DP attention's extend step gathers its ranks' tokens with one more all-reduce a layer.
        gathers = DP_GATHER_ALL_REDUCES if par.attention_ranks > 1 and not decode else 1
        if not ep.two_batch_overlap or tokens < 2:
            load = busiest_gpu_load(tokens, ep, model)
            compute_s, memory_s = roofline(load, 1.0)
            exchange_s = exchange(tokens, par.tp_size, ep, load, model, hw, c, decode, gathers).total_s
            return StepCost(compute_s, memory_s, overhead_s, exchange_s)
        # Two micro-batches, interleaved layer by layer: one's exchange runs under the other's compute, so the
        # longer stream sets the pace, plus one layer's worth of the shorter to fill the pipeline.
        half = tokens // 2
        load = busiest_gpu_load(half, ep, model)
        compute_h, memory_h = roofline(load, 0.5)
        busy_h, exchange_h = (
            max(compute_h, memory_h),
            exchange(half, par.tp_size, ep, load, model, hw, c, decode, gathers).total_s,
        )
        visible = 2 * max(0.0, exchange_h - busy_h) + min(busy_h, exchange_h) / model.num_moe_layers
        return StepCost(2 * compute_h, 2 * memory_h, overhead_s, visible)

    def step_time_s(self, batch: StepBatch) -> float:
        return self.step_cost(batch).total_s

    def step_work(self, batch: StepBatch) -> StepWork:
        cost = self.step_cost(batch)
        # Every byte the roofline reads is timed at the same achieved bandwidth, so its memory time gives them back.
        return StepWork(cost.compute_s, cost.memory_s * self._hw.hbm_bytes_per_s * self.constants.memory_efficiency)

    def uniform_decode(self) -> UniformDecodeCost | None:
        par = self._parallel
        return self._uniform_decode if par.ep is None and par.attention_ranks == 1 else None

    def _uniform_decode(self, requests: int, context_tokens: int) -> tuple[float, float, float]:
        """_step_cost, step_time_s and step_work of a decode batch of RankLoad.of_uniform(requests, 1, context_tokens,
        0), one rank, no expert parallelism: the same operations on the same floats, in the same order."""
        by_tokens = self._by_tokens.get(requests)
        if by_tokens is None:
            by_tokens = self._by_tokens[requests] = self._token_costs_s(requests)
        weights_s, gemm_s = by_tokens
        kv_tokens = context_tokens + requests  # the load's kv_tokens, and (one new token each) its attended_tokens
        memory_s = weights_s + kv_tokens * self._kv_bytes_per_token / self._kv_read_divisor
        model = self._model
        overhead_s = self.constants.decode_layer_s * model.num_layers
        if self._parallel.tp_size > GPUS_PER_NODE:
            overhead_s += INTER_NODE_MOE_EXCHANGE_S * model.num_moe_layers
        compute_s = gemm_s + model.decode_attention_flops_per_context_token * kv_tokens / self._attention_divisor
        step_s = max(compute_s, memory_s) + 0.0 + overhead_s  # StepCost.total_s: no exchange in a one-rank decode
        return step_s, compute_s, memory_s * self._hw.hbm_bytes_per_s * self.constants.memory_efficiency
