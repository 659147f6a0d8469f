"""Wide expert parallelism: where a MoE layer's routed experts live, how many tokens the busiest GPU's experts
get, and how long the token exchange between GPUs takes (DeepEP's dispatch and combine). The cost model
(cost_model.py) asks it when `--ep-size` is above 1.

- **Placement.** `--ep-size N` spreads each MoE layer's 256 routed experts (plus `--ep-num-redundant-experts`
  copies) over N GPUs, whole experts per GPU, instead of slicing every expert over the TP ranks.
- **Load.** A step's tokens each pick 8 experts, so a GPU gets on average tokens × 8 / N token-slots per layer,
  and every GPU waits for the busiest at the layer's exchange. How far the busiest sits above the mean has two
  parts: how unevenly the traffic favours some experts (spread over the n experts a GPU holds, the GPU's share
  varies by cv / sqrt(n)), and the sampling noise of the step's own tokens (1 / sqrt(mean token-slots)). The
  maximum of N such loads is about the mean plus sqrt(2 ln N) of their spreads. EPLB (`--enable-eplb`) places
  and copies experts by their measured load, which removes the first part and leaves the noise.
- **Exchange.** Every MoE layer sends each token's hidden state to the GPUs of its experts (dispatch: FP8 with
  its block scales) and brings the weighted outputs back (combine: BF16). Traffic between GPUs of one scale-up
  domain (NVLink: 8 GPUs of an HGX board, all 72 of an NVL72 rack) crosses NVLink; traffic between domains
  crosses each GPU's RDMA NIC. DeepEP's normal kernels (prefill) send a token once to each node it needs and fan
  it out over NVLink there; its low-latency kernels (decode, CUDA-graph friendly) send one copy per expert
  chosen, straight to the GPU. `--deepep-mode auto` picks normal for extend steps and low-latency for decode, as
  SGLang does. Without DeepEP (`--moe-a2a-backend none`) the expert-parallel group all-gathers the tokens and
  reduce-scatters the outputs. Each exchange also pays a fixed cost per MoE layer (kernel launch, the GPUs'
  barrier, RDMA completions).
- **Two-batch overlap** (`--enable-two-batch-overlap`) splits the step into two micro-batches so one's exchange
  runs while the other computes: the step costs the longer of the two streams plus one half of the shorter
  (the pipeline's fill), and each micro-batch reads the experts it touches again.

The fixed cost per layer and the share of the links' bandwidth DeepEP reaches are fitted (CostConstants,
bench/twin_ep_fit.py); the traffic's expert-popularity spread without EPLB is an assumption (below).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from enum import Enum

from endpoints.sim.cost.profiles import CostConstants, HardwareProfile, ModelProfile

# ASSUMPTION, not fitted and not published for DeepSeek on real traffic: the coefficient of variation of the
# routed experts' loads over a serving window, before EPLB rebalances them. No calibration row runs without
# EPLB, so nothing here can check it; docs/twin.md says what it moves.
EXPERT_POPULARITY_CV = 0.5
# DeepSeek-V3's node-limited routing: a token's 8 experts come from at most 4 of the 8 expert groups, which
# SGLang's EPLB places node by node, so a token reaches at most this many nodes (config.json topk_group).
MAX_NODES_PER_TOKEN = 4
DISPATCH_SCALE_BLOCK = 128  # DeepEP's FP8 dispatch carries one float32 scale per 128 hidden values


# SGLang 0.5.23's --moe-a2a-backend choices (`make conformance` checks them): every one parses, as in SGLang; the
# twin models none and deepep, and refuses the rest by name (ExpertParallel.from_namespace).
SGLANG_A2A_BACKENDS = ("none", "deepep", "mooncake", "nixl", "mori", "ascend_fuseep", "flashinfer", "megamoe",
                       "deepep_v2", "pplx", "ascend_tp", "flashinfer_megamoe")  # fmt: skip


class A2aBackend(str, Enum):
    NONE = "none"  # all-gather the tokens over the EP group, reduce-scatter the outputs
    DEEPEP = "deepep"  # DeepEP's dispatch and combine kernels


class DeepEpMode(str, Enum):
    AUTO = "auto"  # normal for extend steps, low-latency for decode (SGLang's default)
    NORMAL = "normal"
    LOW_LATENCY = "low_latency"


@dataclass(frozen=True, slots=True)
class ExpertParallel:
    ep_size: int
    a2a_backend: A2aBackend = A2aBackend.NONE
    deepep_mode: DeepEpMode = DeepEpMode.AUTO
    enable_eplb: bool = False
    redundant_experts: int = 0  # --ep-num-redundant-experts
    two_batch_overlap: bool = False

    def low_latency(self, decode: bool) -> bool:
        if self.deepep_mode is DeepEpMode.AUTO:
            return decode
        return self.deepep_mode is DeepEpMode.LOW_LATENCY

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        """SGLang's expert-parallel flags, with its names, types and defaults (`make conformance` checks them)."""
        group = parser.add_argument_group("expert parallelism")
        group.add_argument("--ep-size", "--expert-parallel-size", "--ep", dest="ep_size", type=int, default=1)
        group.add_argument("--moe-a2a-backend", choices=SGLANG_A2A_BACKENDS, default=A2aBackend.NONE.value)
        group.add_argument("--deepep-mode", choices=[m.value for m in DeepEpMode], default=DeepEpMode.AUTO.value)
        group.add_argument("--enable-eplb", action="store_true")
        group.add_argument("--ep-num-redundant-experts", type=int, default=0)
        group.add_argument("--enable-two-batch-overlap", action="store_true")

    @classmethod
    def from_namespace(cls, ns: argparse.Namespace, tp_size: int, routed_experts: int) -> ExpertParallel | None:
        """The expert parallelism the flags ask for; None when each expert is sliced over the TP ranks.
        Raises ValueError naming the flag."""
        try:
            backend = A2aBackend(ns.moe_a2a_backend)
        except ValueError:
            raise ValueError(
                f"--moe-a2a-backend {ns.moe_a2a_backend}: the twin models none and deepep only (its exchange is "
                "DeepEP's kernels' bytes and latency)"
            ) from None
        ep_size = ns.ep_size
        if backend is A2aBackend.DEEPEP:
            if ep_size not in (1, tp_size):
                raise ValueError(f"--ep-size {ep_size}: with --moe-a2a-backend deepep SGLang runs the experts over "
                                 f"every TP rank, so --ep-size is --tp-size ({tp_size})")  # fmt: skip
            ep_size = tp_size  # as SGLang sets it
        if ep_size < 1 or tp_size % ep_size:
            raise ValueError(f"--ep-size {ep_size} must divide --tp-size {tp_size}")
        if ns.ep_num_redundant_experts < 0:
            raise ValueError(f"--ep-num-redundant-experts must be >= 0, got {ns.ep_num_redundant_experts}")
        if ep_size == 1:
            for flag, on in (("--enable-eplb", ns.enable_eplb), ("--enable-two-batch-overlap",
                                                                  ns.enable_two_batch_overlap),
                             ("--ep-num-redundant-experts", ns.ep_num_redundant_experts > 0)):  # fmt: skip
                if on:
                    raise ValueError(
                        f"{flag} needs expert parallelism (--ep-size above 1, or --moe-a2a-backend deepep)"
                    )
            return None
        if (routed_experts + ns.ep_num_redundant_experts) % ep_size:
            raise ValueError(
                f"--ep-num-redundant-experts {ns.ep_num_redundant_experts}: {routed_experts} routed experts plus the "
                f"copies must split evenly over --ep-size {ep_size}"
            )
        if ns.enable_two_batch_overlap and backend is not A2aBackend.DEEPEP:
            raise ValueError("--enable-two-batch-overlap overlaps DeepEP's exchange: it needs --moe-a2a-backend deepep")
        return cls(ep_size, backend, DeepEpMode(ns.deepep_mode), ns.enable_eplb, ns.ep_num_redundant_experts,
                   ns.enable_two_batch_overlap)  # fmt: skip


def expert_parallel_server_info(ep: ExpertParallel | None) -> dict:
    """The six flags under SGLang's field names, as /server_info shows them."""
    shown = ep or ExpertParallel(1)
    return {
        "ep_size": shown.ep_size,
        "moe_a2a_backend": shown.a2a_backend.value,
        "deepep_mode": shown.deepep_mode.value,
        "enable_eplb": shown.enable_eplb,
        "ep_num_redundant_experts": shown.redundant_experts,
        "enable_two_batch_overlap": shown.two_batch_overlap,
    }


@dataclass(frozen=True, slots=True)
class ExpertLoad:
    """One MoE layer's routed-expert work on the busiest GPU of the EP group."""

    token_slots: float  # tokens × experts per token routed to it
    experts_touched: float  # distinct routed experts (copies) on it that the step reads


def busiest_gpu_load(tokens: int, ep: ExpertParallel, model: ModelProfile) -> ExpertLoad:
    experts_here = (model.num_routed_experts + ep.redundant_experts) / ep.ep_size
    mean_slots = tokens * model.experts_per_token / ep.ep_size
    popularity_cv = 0.0 if ep.enable_eplb else EXPERT_POPULARITY_CV
    spread = math.sqrt(popularity_cv**2 / experts_here + (1.0 / mean_slots if mean_slots > 0 else 0.0))
    slots = min(mean_slots * (1.0 + math.sqrt(2.0 * math.log(ep.ep_size)) * spread), tokens * model.experts_per_token)
    touched = experts_here * (1.0 - (1.0 - 1.0 / experts_here) ** slots) if experts_here > 1 else min(1.0, slots)
    return ExpertLoad(slots, touched)


@dataclass(frozen=True, slots=True)
class Exchange:
    """One step's dispatch + combine on the busiest GPU, summed over the MoE layers (seconds)."""

    transfer_s: float  # the bytes over the slower of its links
    fixed_s: float  # the per-layer fixed cost

    @property
    def total_s(self) -> float:
        return self.transfer_s + self.fixed_s


def _distinct(picks: float, bins: int) -> float:
    """Expected distinct bins `picks` uniform draws land in."""
    return bins * (1.0 - (1.0 - 1.0 / bins) ** picks) if bins > 1 else 1.0


def exchange(
    tokens: int,
    gpus: int,
    ep: ExpertParallel,
    load: ExpertLoad,
    model: ModelProfile,
    hw: HardwareProfile,
    constants: CostConstants,
    decode: bool,
    all_reduces: int = 1,
) -> Exchange:
    """The token exchange of one step of `tokens` (the whole instance's) over `gpus` GPUs. `all_reduces`: without
    DeepEP, ring all-reduces of the step's hidden states a layer (the MoE output's; DP attention's extend step
    gathers its ranks' tokens with one more, cost_model.dp_gather_s)."""
    hidden = model.hidden_size
    dispatch_b = hidden + 4 * hidden / DISPATCH_SCALE_BLOCK  # FP8 values and their scales
    combine_b = 2 * hidden  # BF16
    domain = min(ep.ep_size, hw.scale_up_domain_gpus)  # GPUs reachable over NVLink
    domains = math.ceil(ep.ep_size / domain)
    nvlink = hw.scale_up_bytes_per_s * constants.link_efficiency
    nic = hw.nic_bytes_per_s * constants.link_efficiency
    # The busiest GPU receives its token-slots' dispatch and sends their combine; its own tokens' share stays put.
    slots = load.token_slots
    remote_share = 1.0 - 1.0 / ep.ep_size
    off_domain = 1.0 - domain / ep.ep_size
    if ep.a2a_backend is A2aBackend.NONE:
        # All-gather the BF16 hidden states of every token, reduce-scatter the outputs: a ring over the group.
        per_layer = all_reduces * 2 * tokens * 2 * hidden * remote_share
        link = nic if domains > 1 else nvlink
        transfer = per_layer / link
    elif ep.low_latency(decode):
        # One copy per chosen expert, straight to its GPU.
        per_slot = (dispatch_b + combine_b) * remote_share
        transfer = max(slots * per_slot * (1 - off_domain) / nvlink, slots * per_slot * off_domain / nic)
    else:
        # Normal kernels: a token crosses to each other domain it needs once, then fans out over NVLink.
        own_tokens = tokens / gpus
        domains_needed = min(_distinct(model.experts_per_token, domains), MAX_NODES_PER_TOKEN)
        rdma = own_tokens * domains_needed * off_domain * (dispatch_b + combine_b) / nic if domains > 1 else 0.0
        gpus_in_domain = _distinct(model.experts_per_token * domain / ep.ep_size, domain)
        fan_out = slots / model.experts_per_token * gpus_in_domain * (1 - 1 / domain) * (dispatch_b + combine_b)
        transfer = max(rdma, fan_out / nvlink)
    layers = model.num_moe_layers
    return Exchange(transfer_s=transfer * layers, fixed_s=constants.a2a_layer_s * layers)
