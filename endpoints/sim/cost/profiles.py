"""Model and hardware profiles: plain frozen data the cost model and the KV pool read.

Numbers come from DeepSeek-V3's HF config.json (identical for R1) and vendor datasheets; see
docs/twin.md, "Profiles and sources". Nothing here knows about scheduling.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from endpoints.sim.cost import fitted_constants, fitted_ep_constants

BF16_BYTES = 2.0  # the embedding, the output head and the MoE router are kept in BF16


@dataclass(frozen=True, slots=True)
class ModelProfile:
    name: str
    model_type: str
    architecture: str
    num_layers: int
    num_dense_layers: int  # first_k_dense_replace: these layers have a dense FFN, no experts
    num_routed_experts: int
    experts_per_token: int
    expert_params: int  # one routed expert: 3 · hidden · moe_intermediate
    total_params: int
    active_params: int  # per token, including the output head
    lm_head_params: int  # read every step, though only one embedding row is
    num_attention_heads: int
    kv_lora_rank: int
    q_lora_rank: int  # MLA's query down-projection width
    hidden_size: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    vocab_size: int
    max_context_tokens: int
    eos_token_id: int
    weight_bytes_per_param: float  # block-FP8 checkpoint
    think_end_token_id: int  # `</think>` in DeepSeek's vocabulary
    # Reasoning models think before answering: the share of each output spent thinking is drawn
    # uniformly from this range (fixed per prompt) unless the request says how many tokens. None:
    # the model does not reason. R1's range is an assumption (long traces, answers a fifth to a
    # half of the output), not a calibrated figure; send sim_reasoning_tokens for captured lengths.
    reasoning_share: tuple[float, float] | None = None
    # The multi-token-prediction (NextN) module speculative decoding drafts with: its unique parameters
    # (it shares the embedding and output head with the model). 0: the model has none.
    mtp_params: int = 0

    @property
    def num_moe_layers(self) -> int:
        return self.num_layers - self.num_dense_layers

    @property
    def routed_expert_params(self) -> int:
        return self.num_moe_layers * self.num_routed_experts * self.expert_params

    @property
    def non_expert_params_read(self) -> int:
        """Weights every forward step reads whatever the routing: attention, dense FFNs, shared
        experts, routers and the output head (the input embedding is a row lookup, not a read)."""
        return self.total_params - self.routed_expert_params - self.lm_head_params

    @property
    def attention_params(self) -> int:
        """MLA's weights over all layers: q_a, q_b, kv_a (with the rope key), kv_b and the output projection."""
        qk = self.qk_nope_head_dim + self.qk_rope_head_dim
        per_layer = (
            self.hidden_size * self.q_lora_rank
            + self.q_lora_rank * self.num_attention_heads * qk
            + self.hidden_size * (self.kv_lora_rank + self.qk_rope_head_dim)
            + self.kv_lora_rank * self.num_attention_heads * (self.qk_nope_head_dim + self.v_head_dim)
            + self.num_attention_heads * self.v_head_dim * self.hidden_size
        )
        return per_layer * self.num_layers

    def expert_parallel_weight_bytes_per_gpu(self, tp_size: int, attention_tp_size: int, ep_size: int,
                                             redundant_experts: int) -> float:  # fmt: skip
        """One GPU's bytes under expert parallelism: whole routed experts ((256 + redundant copies) / ep per MoE
        layer), the attention weights split over its attention rank's GPUs only (replicated across DP attention
        ranks), everything else as under TP."""
        routed = self.num_moe_layers * (self.num_routed_experts + redundant_experts) / ep_size * self.expert_params
        attention = self.attention_params
        rest = (
            self.weight_bytes_per_gpu(tp_size)
            - (self.routed_expert_params + attention) * self.weight_bytes_per_param / tp_size
        )
        return rest + (routed + attention / attention_tp_size) * self.weight_bytes_per_param

    def weight_bytes_per_gpu(self, tp_size: int) -> float:
        """The checkpoint's bytes on one GPU as SGLang lays DeepSeek out under TP (models/deepseek_v2.py):
        MLA's down-projections (q_a_proj, kv_a_proj_with_mqa) and the MoE router are replicated
        (ReplicatedLinear), not sharded; the embedding and the output head are BF16, split by vocabulary;
        every other weight is block-FP8 and split over the TP ranks."""
        replicated = self.num_layers * self.hidden_size * (self.q_lora_rank + self.kv_lora_rank + self.qk_rope_head_dim)
        router = self.num_moe_layers * self.hidden_size * self.num_routed_experts
        embedding_and_head = 2 * self.lm_head_params
        sharded = self.total_params - replicated - router - embedding_and_head
        return (
            sharded * self.weight_bytes_per_param / tp_size
            + replicated * self.weight_bytes_per_param
            + router * BF16_BYTES
            + self.embedding_and_head_bytes_per_gpu(tp_size)
        )

    def embedding_and_head_bytes_per_gpu(self, tp_size: int) -> float:
        """The input embedding and the output head on one GPU: BF16, split by vocabulary over the TP ranks."""
        return 2 * self.lm_head_params * BF16_BYTES / tp_size

    def kv_bytes_per_token(self, kv_dtype_bytes: int) -> int:
        # MLA caches the compressed latent plus the rope key: (kv_lora_rank + rope) per layer.
        return (self.kv_lora_rank + self.qk_rope_head_dim) * self.num_layers * kv_dtype_bytes

    @property
    def decode_attention_flops_per_context_token(self) -> float:
        """Absorbed MLA (decode): scores over 576-wide latents, values over 512-wide ones."""
        latent = self.kv_lora_rank + self.qk_rope_head_dim
        return 2.0 * self.num_attention_heads * (latent + self.kv_lora_rank) * self.num_layers

    @property
    def prefill_attention_flops_per_context_token(self) -> float:
        """Non-absorbed MLA (prefill): per query token and context token, QK over 192 dims, AV over 128."""
        qk = self.qk_nope_head_dim + self.qk_rope_head_dim
        return 2.0 * self.num_attention_heads * (qk + self.v_head_dim) * self.num_layers


class Vendor(str, Enum):
    """Whose kernels SGLang runs: it sets how much of the datasheet peaks they reach (one fitted constant set
    each). Blackwell is apart from Hopper because SGLang runs other kernels there (SM100 builds of the MLA,
    MoE and block-FP8 GEMM paths): the cookbook's B200 runs decode a lone request and prefill a short prompt
    far slower than Hopper's per-layer costs say; its shares of peak are Hopper's (docs/twin.md, Calibration)."""

    NVIDIA = "nvidia"  # CUDA on Hopper (H100, H200): FlashInfer/FlashMLA attention, DeepGEMM/CUTLASS FP8 GEMMs, NCCL
    NVIDIA_BLACKWELL = "nvidia-blackwell"  # CUDA on Blackwell (B200): SM100 kernels
    AMD = "amd"  # ROCm: aiter attention and MoE kernels, hipBLASLt, RCCL


@dataclass(frozen=True, slots=True)
class HardwareProfile:
    name: str
    hbm_bytes: float
    hbm_bytes_per_s: float
    bf16_flops_per_s: float  # dense
    fp8_flops_per_s: float  # dense
    vendor: Vendor = Vendor.NVIDIA
    # Each GPU's own scale-out NIC (RDMA), decimal bytes/s one way: what a KV transfer between nodes and an
    # expert-parallel exchange between NVLink domains cross. The HGX H100/H200/B200, the GB200 NVL72 and the
    # MI300-series reference nodes pair every GPU with a 400 Gb/s NIC (ConnectX-7); GB300 NVL72 with 800 Gb/s.
    nic_bytes_per_s: float = 50e9
    # The scale-up fabric: NVLink (Infinity Fabric on AMD) bytes/s one way per GPU, and how many GPUs it joins.
    # An HGX board joins 8; an NVL72 rack joins all 72 of its GPUs, across its 18 compute trays.
    scale_up_bytes_per_s: float = 450e9
    scale_up_domain_gpus: int = 8
    gpus_per_node: int = 8  # one host: an HGX board, or a GB200/GB300 compute tray of 4


@dataclass(frozen=True, slots=True)
class CostConstants:
    """The cost model's fitted numbers for one vendor's stack: the shares of the datasheet peaks SGLang's
    kernels reach, and the fixed per-layer cost of each kind of step. bench/twin_fit.py fits them on the
    declared fit set and writes them to fitted_constants.py; `sglang_version` is the release the fit
    set was measured on (SGLang gets faster from release to release)."""

    sglang_version: str
    memory_efficiency: float  # weight streaming and MLA KV reads, share of peak HBM bandwidth
    gemm_efficiency: float  # the token GEMMs (FP8), share of dense FP8 peak
    attention_efficiency: float  # prefill attention (BF16), share of dense BF16 peak
    decode_layer_s: float  # per layer per decode step: CUDA-graph replay of its kernels, two all-reduces
    extend_layer_s: float  # per layer per extend step: eager kernel launches and host work
    cold_prefill_s: float = 0.0  # once, a cold server's first batched prefill (cold_start.py, --sim-cold-start)
    # Expert parallelism's token exchange (expert_parallel.py), fitted apart by bench/twin_ep_fit.py on the
    # disaggregated, expert-parallel rows (fitted_ep_constants.py), one set for every vendor.
    a2a_layer_s: float = 0.0  # per MoE layer per exchange (dispatch + combine): launch, barrier, completions
    link_efficiency: float = 1.0  # share of NVLink's and the NIC's one-way bandwidth the exchange reaches


# The constants bench/twin_ep_fit.py fits, apart from bench/twin_fit.py's.
EP_CONSTANTS = ("a2a_layer_s", "link_efficiency")


def cost_constants_for(vendor: Vendor) -> CostConstants:
    """The fitted constants for a vendor's GPUs (endpoints/sim/cost/fitted_constants.py), with the expert
    exchange's (fitted_ep_constants.py: one set, DeepEP's kernels on every vendor's links)."""
    ep = fitted_ep_constants.FITTED_EP
    return CostConstants(
        **fitted_constants.FITTED[vendor.value], a2a_layer_s=ep["a2a_layer_s"], link_efficiency=ep["link_efficiency"]
    )


def _deepseek_v3(name: str, reasoning_share: tuple[float, float] | None = None) -> ModelProfile:
    return ModelProfile(
        name=name,
        model_type="deepseek_v3",
        architecture="DeepseekV3ForCausalLM",
        num_layers=61,
        num_dense_layers=3,
        num_routed_experts=256,
        experts_per_token=8,
        expert_params=3 * 7168 * 2048,  # 44.04M
        total_params=671_000_000_000,
        active_params=36_600_000_000,
        lm_head_params=7168 * 129_280,  # 0.927B
        num_attention_heads=128,
        kv_lora_rank=512,
        q_lora_rank=1536,
        hidden_size=7168,
        qk_nope_head_dim=128,
        qk_rope_head_dim=64,
        v_head_dim=128,
        vocab_size=129_280,
        max_context_tokens=163_840,
        eos_token_id=1,  # <｜end▁of▁sentence｜>
        weight_bytes_per_param=1.0,
        think_end_token_id=128_799,
        reasoning_share=reasoning_share,
        mtp_params=11_500_000_000,  # num_nextn_predict_layers 1: one MoE layer plus eh_proj (model card)
    )


class ModelName(str, Enum):
    DEEPSEEK_V3 = "deepseek-v3"
    DEEPSEEK_R1 = "deepseek-r1"


class HardwareName(str, Enum):
    H100 = "h100"
    H200 = "h200"
    B200 = "b200"
    GB200 = "gb200"  # a GPU of a GB200 NVL72 rack
    GB300 = "gb300"  # a GPU of a GB300 NVL72 rack
    MI300X = "mi300x"
    MI325X = "mi325x"
    MI355X = "mi355x"


MODEL_PROFILES: dict[ModelName, ModelProfile] = {
    ModelName.DEEPSEEK_V3: _deepseek_v3("DeepSeek-V3"),
    ModelName.DEEPSEEK_R1: _deepseek_v3("DeepSeek-R1", reasoning_share=(0.5, 0.8)),  # V3's architecture and config
}

# Datasheets quote HBM capacity in binary gigabytes: an H200's "141 GB" is what nvidia-smi shows as
# 143,771 MiB (150.8e9 B), an H100's "80 GB" 81,559 MiB. Bandwidth and FLOP/s are decimal.
GIB = 2**30

HARDWARE_PROFILES: dict[HardwareName, HardwareProfile] = {
    # NVLink 4 on HGX H100/H200: 900 GB/s per GPU both ways, 450 one way; NVLink 5 on B200: 1.8 TB/s, 900 one way.
    HardwareName.H100: HardwareProfile("H100 SXM", 80 * GIB, 3.35e12, 990e12, 1979e12),
    HardwareName.H200: HardwareProfile("H200 SXM", 141 * GIB, 4.8e12, 990e12, 1979e12),
    HardwareName.B200: HardwareProfile(
        "B200", 180 * GIB, 8.0e12, 2250e12, 4500e12, Vendor.NVIDIA_BLACKWELL, scale_up_bytes_per_s=900e9
    ),
    # NVIDIA GB200 / GB300 NVL72 datasheets, per GPU: NVLink 5 (1.8 TB/s) across all 72 GPUs of the rack, 4 GPUs a
    # compute tray, one ConnectX-7 (GB200) or ConnectX-8 SuperNIC (GB300, 800 Gb/s) per GPU for scale-out.
    HardwareName.GB200: HardwareProfile(
        "GB200 NVL72",
        186 * GIB,
        8.0e12,
        2500e12,
        5000e12,
        Vendor.NVIDIA_BLACKWELL,
        nic_bytes_per_s=50e9,
        scale_up_bytes_per_s=900e9,
        scale_up_domain_gpus=72,
        gpus_per_node=4,
    ),  # fmt: skip
    HardwareName.GB300: HardwareProfile(
        "GB300 NVL72",
        288 * GIB,
        8.0e12,
        2500e12,
        5000e12,
        Vendor.NVIDIA_BLACKWELL,
        nic_bytes_per_s=100e9,
        scale_up_bytes_per_s=900e9,
        scale_up_domain_gpus=72,
        gpus_per_node=4,
    ),  # fmt: skip
    # AMD Instinct datasheets (docs/twin.md, "Profiles and sources"): dense peaks, no sparsity. Infinity Fabric
    # joins the 8 GPUs of a platform over 7 links: 448 GB/s one way per GPU (MI300X, MI325X), 537.6 (MI355X).
    HardwareName.MI300X: HardwareProfile(
        "MI300X", 192 * GIB, 5.3e12, 1307.4e12, 2614.9e12, Vendor.AMD, scale_up_bytes_per_s=448e9
    ),
    HardwareName.MI325X: HardwareProfile(
        "MI325X", 256 * GIB, 6.0e12, 1307.4e12, 2614.9e12, Vendor.AMD, scale_up_bytes_per_s=448e9
    ),
    HardwareName.MI355X: HardwareProfile(
        "MI355X", 288 * GIB, 8.0e12, 2516.6e12, 5033.2e12, Vendor.AMD, scale_up_bytes_per_s=537.6e9
    ),
}


class UnknownProfileError(ValueError):
    pass


def model_profile_for(model_path: str) -> ModelProfile:
    """The profile for an HF id or a local path: matched on the last path part, so
    'deepseek-ai/DeepSeek-R1-0528' and '/models/DeepSeek-V3-0324' both resolve."""
    last = model_path.rstrip("/").rsplit("/", 1)[-1].lower()
    for name, profile in MODEL_PROFILES.items():
        if name.value in last:
            return profile
    known = ", ".join(n.value for n in ModelName)
    raise UnknownProfileError(
        f"--model-path {model_path!r}: the twin has no profile for this model (its name must contain one of: {known})"
    )


def hardware_profile_for(name: str) -> HardwareProfile:
    try:
        return HARDWARE_PROFILES[HardwareName(name.lower())]
    except ValueError:
        known = ", ".join(n.value for n in HardwareName)
        raise UnknownProfileError(f"--sim-hardware {name!r}: unknown GPU (expected one of: {known})") from None
