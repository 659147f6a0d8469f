"""The twin's command line: SGLang's own flag names (`sglang.launch_server`), plus a few `--sim-*` flags.

Unknown flags are rejected with a clear message, so a typo never silently changes a benchmark.
A documented set of real SGLang flags that do not change what the twin models (logging, kernels,
parsers, multi-node plumbing) is accepted with SGLang's type and default, recorded in /server_info, and
otherwise ignored. A few more are accepted only at the value the twin models (`--page-size 1`, ...).
Flags that would change cost but are not modelled (the overlap scheduler or CUDA graphs turned off,
hierarchical cache, the speculative flags other than EAGLE/NEXTN's four, the disaggregation flags other than
the role's, an all-to-all backend other than DeepEP) are rejected by name, saying why, rather than ignored;
speculative decoding's own flags are parsed in speculative.py; PD disaggregation is modelled in
engine/disaggregation.py, expert parallelism (`--ep-size`, DeepEP, EPLB, two-batch overlap) in
calibration/expert_parallel.py. `make conformance` checks every accepted flag against SGLang's parser.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from endpoints.sim.cost.cost_model import ParallelConfig
from endpoints.sim.cost.expert_parallel import ExpertParallel, expert_parallel_server_info
from endpoints.sim.cost.profiles import HARDWARE_PROFILES, HardwareName, model_profile_for
from endpoints.sim.cost.run_variation import RunVariation
from endpoints.sim.engine.cuda_graphs import default_decode_graph_max_bs
from endpoints.sim.engine.disaggregation import (
    DEFAULT_BOOTSTRAP_PORT,
    DEFAULT_RESERVED_DECODE_TOKENS,
    TRANSFER_BACKENDS,
    DisaggregationMode,
)
from endpoints.sim.engine.faults import FaultConfig
from endpoints.sim.engine.schedule_policy import SchedulePolicy
from endpoints.sim.engine.speculative import SPEC_DEFAULT_MAX_RUNNING_REQUESTS, SpecConfig, spec_server_info

DEFAULT_MODEL_PATH = "deepseek-ai/DeepSeek-V3"
DEFAULT_MEM_FRACTION_STATIC = 0.88  # about what SGLang picks for DeepSeek on 8×H200/B200
DEFAULT_CHUNKED_PREFILL_TOKENS = 8192  # SGLang's default below 160 GB of HBM (H100, H200)
LARGE_GPU_CHUNKED_PREFILL_TOKENS = 16384  # and at 160 GB or more (B200)
LARGE_GPU_HBM_BYTES = 160 * 2**30
DEFAULT_MAX_RUNNING_REQUESTS = 2048
# Per KV transfer: the decode's readiness notice, the RDMA write's completion and its notice. Not a published
# figure: an RDMA round trip is microseconds, the notices go through each side's scheduler loop (docs/twin.md).
DEFAULT_KV_TRANSFER_LATENCY_MS = 1.0
KV_DTYPE_BYTES = {"auto": 2, "bf16": 2, "bfloat16": 2, "fp8_e4m3": 1, "fp8_e5m2": 1}

# Real SGLang flags accepted and recorded without effect: logs, parsers, kernel choice (the cost model's
# efficiencies stand for SGLang's default kernels), multi-node plumbing. Each with SGLang's own type and
# default, so /server_info shows what SGLang's would (`make conformance` checks them against its parser).
IGNORED_VALUE_FLAGS: tuple[tuple[tuple[str, ...], Callable[[str], object], object], ...] = (
    (("--log-level",), str, "info"),
    (("--attention-backend",), str, None),
    (("--moe-runner-backend",), str, "auto"),
    (("--tool-call-parser",), str, None),
    (("--chat-template",), str, None),
    (("--watchdog-timeout",), float, 300),
    (("--random-seed",), int, None),
    (("--decode-log-interval",), int, 40),
    (("--node-rank",), int, 0),
    (("--dist-init-addr", "--nccl-init-addr"), str, None),
    (("--revision",), str, None),
    (("--disaggregation-ib-device",), str, None),  # which NICs: the link's speed is --sim-kv-link-gb-s
    (("--download-dir",), str, None),
    (("--num-continuous-decode-steps",), int, 1),  # declared, but read nowhere since the overlap scheduler (#2095)
    (("--cuda-graph-max-bs-prefill",), int, None),  # the twin's extend steps are not graphs
)
IGNORED_BOOL_FLAGS = ("--trust-remote-code", "--log-requests", "--enable-metrics-for-all-schedulers")
# Aliases SGLang dropped after the release named, kept for command lines published for it.
RETIRED_SGLANG_FLAGS = {"--cuda-graph-max-bs": "0.5.19", "--stream-output": "0.5.19"}
# Real SGLang flags accepted only at the value the twin models (SGLang's default, or its equivalent for the
# DeepSeek block-FP8 checkpoint); any other value changes cost in a way the twin does not model: refused.
MODELLED_VALUE_FLAGS: tuple[tuple[tuple[str, ...], Callable[[str], object], object, tuple, str], ...] = (
    (("--page-size",), int, None, (None, 1),
     "a paged KV cache is not modelled (the radix cache matches token by token)"),
    (("--dtype",), str, "auto", ("auto", "bfloat16"), "only the checkpoint's own bf16 activations are modelled"),
    (("--quantization",), str, None, (None, "fp8"), "only the checkpoint's own block-FP8 weights are modelled"),
    (("--device",), str, None, (None, "cuda"), "only GPUs are modelled"),
    (("--load-balance-method",), str, "auto", ("auto",),
     "only SGLang's default DP routing is modelled (round robin; a PD prefill follows the bootstrap room)"),
)  # fmt: skip
# Real SGLang flags that change cost in ways the twin does not model: refused by name, saying why.
UNMODELLED_FLAGS = {
    "--disable-overlap-schedule": "the twin models the overlap scheduler, whose CPU work hides behind the GPU's",
    "--disable-cuda-graph": "the twin's decode step is a CUDA-graph replay, without per-kernel launch gaps",
    "--enable-torch-compile": "torch.compile's kernels are not modelled",
    "--enable-dp-lm-head": "a vocabulary-parallel LM head under DP attention is not modelled",
    "--disable-custom-all-reduce": "the twin's TP all-reduce is SGLang's custom one, not NCCL's",
}
UNMODELLED_FLAG_PREFIXES = ("--speculative-", "--disaggregation-", "--enable-hierarchical-cache", "--pp-size")


DP_ATTENTION_CONSERVATIVENESS = 0.3  # SGLang's factor on --schedule-conservativeness under DP attention


# Slots as_server_info leaves out: records that add their own SGLang fields, and the twin's own resolutions.
_NOT_SERVER_INFO = ("ignored", "faults", "speculative", "run_variation", "expert_parallel", "decode_graph_max_bs")


class ServerArgsError(ValueError):
    pass


GRAMMAR_BACKENDS = ("xgrammar", "outlines", "llguidance", "none")  # SGLang's choices
DEFAULT_GRAMMAR_BACKEND = "xgrammar"  # what SGLang resolves an unset --grammar-backend to
DEFAULT_UNCONSTRAINED_FAILURE_RATE = 0.1
REASONING_PARSERS = ("deepseek-r1", "deepseek-v3")  # SGLang's names for DeepSeek's; only R1's has an effect
_SI = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_IEC = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def human_readable_int(value: str) -> int:
    """SGLang's token-count type: an int, or one with an SI (k, M, G, T; decimals allowed) or IEC (Ki, Mi,
    Gi, Ti) suffix, case-sensitive: '16k' is 16000, '32Ki' is 32768."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", value.strip())
    if match is None:
        return int(value)
    number, suffix = match.groups()
    if suffix in _IEC:
        if "." in number:
            raise argparse.ArgumentTypeError(f"decimals are not allowed with IEC suffixes like {suffix!r}")
        return int(number) * _IEC[suffix]
    return int(Decimal(number) * _SI[suffix])


@dataclass(frozen=True, slots=True)
class SimServerArgs:
    model_path: str
    tokenizer_path: str
    served_model_name: str
    host: str
    port: int
    tp_size: int
    dp_size: int
    enable_dp_attention: bool
    schedule_policy: SchedulePolicy
    max_running_requests: int
    cuda_graph_max_bs_decode: int | None  # as given; None: SGLang's default (decode_graph_max_bs)
    decode_graph_max_bs: int  # resolved: a decode step with more requests on a rank runs eagerly (cuda_graphs.py)
    chunked_prefill_size: int
    max_prefill_tokens: int
    disable_radix_cache: bool
    enable_mixed_chunk: bool  # running decodes ride along in extend steps (scheduler.py)
    enable_metrics: bool
    enable_cache_report: bool
    stream_interval: int
    incremental_streaming_output: bool
    stream_response_default_include_usage: bool
    reasoning_parser: str | None
    schedule_conservativeness: float
    mem_fraction_static: float
    context_length: int | None  # None: the model's own maximum
    kv_cache_dtype: str
    api_key: str | None
    skip_server_warmup: bool
    sim_hardware: HardwareName
    sim_warmup_s: float
    sim_cold_start: bool  # the first batched prefill pays the fitted cold-start stall (cold_start.py)
    grammar_backend: str  # constrained decoding's backend, as SGLang resolves it ("none": constraints refused)
    sim_unconstrained_failure_rate: float  # prompt-only schemas: share of answers that do not parse (grammar.py)
    faults: FaultConfig
    run_variation: RunVariation | None  # --sim-run-seed: this run's node, clocks and step jitter; None: off
    speculative: SpecConfig | None  # --speculative-algorithm EAGLE/NEXTN; None: off
    expert_parallel: ExpertParallel | None  # --ep-size / --moe-a2a-backend deepep; None: experts sliced by TP
    nnodes: int  # hosts one server spans (--nnodes); its GPUs are --tp-size over them
    disaggregation_mode: DisaggregationMode  # null: a unified server; prefill or decode: one PD role
    disaggregation_bootstrap_port: int  # a prefill server's bootstrap port, where its decode servers meet it
    disaggregation_transfer_backend: str
    num_reserved_decode_tokens: int  # a decode server keeps this many free slots per request it runs
    sim_kv_link_gb_s: float  # per GPU, the link a KV transfer crosses (default: the GPU's NIC)
    sim_kv_transfer_latency_ms: float  # per transfer, on top of its bytes' time
    ignored: tuple[tuple[str, object], ...]  # accepted SGLang flags with no effect on the twin

    @property
    def parallel(self) -> ParallelConfig:
        return ParallelConfig(self.tp_size, self.dp_size, self.enable_dp_attention, self.expert_parallel)

    @property
    def kv_dtype_bytes(self) -> int:
        return KV_DTYPE_BYTES[self.kv_cache_dtype]

    # DP attention's resolution, as SGLang's ServerArgs makes it (0.5.23 arg_groups/parallel_hook.py,
    # _handle_data_parallelism) and its /server_info then shows: each attention rank is its own scheduler, so
    # --chunked-prefill-size is divided among the ranks and --schedule-conservativeness multiplied by 0.3;
    # --max-prefill-tokens stays one rank's.

    @property
    def rank_chunked_prefill_size(self) -> int:
        ranks = self.parallel.attention_ranks
        chunk = self.chunked_prefill_size
        return max(chunk // ranks, 1) if ranks > 1 and chunk > 0 else chunk

    @property
    def resolved_schedule_conservativeness(self) -> float:
        factor = DP_ATTENTION_CONSERVATIVENESS if self.parallel.attention_ranks > 1 else 1.0
        return self.schedule_conservativeness * factor

    @property
    def warmup_s(self) -> float:
        return 0.0 if self.skip_server_warmup else self.sim_warmup_s

    def as_server_info(self) -> dict:
        """Every argument under its SGLang field name, the way /server_info shows ServerArgs."""
        info = {name: getattr(self, name) for name in self.__slots__ if name not in _NOT_SERVER_INFO}
        info.update(expert_parallel_server_info(self.expert_parallel))
        info.update(self.faults.as_server_info())
        if self.run_variation is not None:
            info.update(self.run_variation.as_server_info())
        info.update(spec_server_info(self.speculative))
        info["chunked_prefill_size"] = self.rank_chunked_prefill_size
        info["schedule_conservativeness"] = self.resolved_schedule_conservativeness
        info["schedule_policy"] = self.schedule_policy.value
        info["sim_hardware"] = self.sim_hardware.value
        info["disaggregation_mode"] = self.disaggregation_mode.value
        info["api_key"] = "<redacted>" if self.api_key else None
        info.update(dict(self.ignored))
        return info


def _build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="costbench sim", description="The SGLang twin: SGLang's HTTP API over a simulated DeepSeek server.",
        allow_abbrev=False,  # a misspelt flag must fail, not match a longer one
        exit_on_error=False,  # bad values raise, and become ServerArgsError naming the flag
    )  # fmt: skip
    p.add_argument("--model-path", "--model", dest="model_path", default=DEFAULT_MODEL_PATH)
    p.add_argument("--tokenizer-path", default=None)
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--tp-size", "--tp", "--tensor-parallel-size", dest="tp_size", type=int, default=1)
    p.add_argument("--dp-size", "--dp", "--data-parallel-size", dest="dp_size", type=int, default=1)
    p.add_argument("--enable-dp-attention", action="store_true")
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--schedule-policy", choices=[s.value for s in SchedulePolicy], default=SchedulePolicy.FCFS.value)
    p.add_argument("--max-running-requests", type=int, default=None)
    p.add_argument("--cuda-graph-max-bs-decode", "--cuda-graph-max-bs", dest="cuda_graph_max_bs_decode", type=int)
    p.add_argument("--chunked-prefill-size", type=int, default=None)
    p.add_argument("--max-prefill-tokens", type=human_readable_int, default=16384)
    p.add_argument("--disable-radix-cache", action="store_true")
    p.add_argument("--enable-mixed-chunk", action="store_true")
    p.add_argument("--enable-metrics", action="store_true")
    p.add_argument("--enable-cache-report", action="store_true")
    p.add_argument("--stream-interval", type=int, default=1)
    p.add_argument(
        "--incremental-streaming-output", "--stream-output", dest="incremental_streaming_output", action="store_true"
    )
    p.add_argument("--stream-response-default-include-usage", action="store_true")
    p.add_argument("--reasoning-parser", choices=REASONING_PARSERS, default=None)
    p.add_argument("--schedule-conservativeness", type=float, default=1.0)
    p.add_argument("--mem-fraction-static", type=float, default=None)
    p.add_argument("--context-length", type=human_readable_int, default=None)
    p.add_argument("--kv-cache-dtype", choices=sorted(KV_DTYPE_BYTES), default="auto")
    p.add_argument("--api-key", default=None)
    p.add_argument("--skip-server-warmup", action="store_true")
    # Unset by default, as in SGLang's parser; resolved to xgrammar after parsing, as SGLang does.
    p.add_argument("--grammar-backend", choices=GRAMMAR_BACKENDS, default=None)
    p.add_argument("--sim-hardware", choices=[h.value for h in HardwareName], default=HardwareName.H200.value)
    p.add_argument("--sim-warmup-s", type=float, default=0.0, help="seconds /health answers 503 after start")
    p.add_argument(
        "--sim-cold-start", action="store_true", help="the first batched prefill pays a cold server's one-off stall"
    )
    p.add_argument(
        "--sim-unconstrained-failure-rate", type=float, default=DEFAULT_UNCONSTRAINED_FAILURE_RATE,
        help="share of answers to a schema given only in the prompt that do not parse (wrapped in prose or truncated)",
    )  # fmt: skip
    FaultConfig.add_arguments(p.add_argument_group("fault injection (twin only, all off by default)"))
    RunVariation.add_arguments(p.add_argument_group("run-to-run variation (twin only, off by default)"))
    SpecConfig.add_arguments(p)
    ExpertParallel.add_arguments(p)
    pd = p.add_argument_group("prefill/decode disaggregation")
    pd.add_argument("--disaggregation-mode", choices=[m.value for m in DisaggregationMode], default="null")
    pd.add_argument("--disaggregation-bootstrap-port", type=int, default=DEFAULT_BOOTSTRAP_PORT)
    pd.add_argument("--disaggregation-transfer-backend", choices=TRANSFER_BACKENDS, default="mooncake")
    pd.add_argument("--num-reserved-decode-tokens", type=int, default=DEFAULT_RESERVED_DECODE_TOKENS)
    pd.add_argument(
        "--sim-kv-link-gb-s", type=float, default=None,
        help="GB/s per GPU of the link a KV transfer crosses (default: the GPU's 400 Gb/s NIC, 50)",
    )  # fmt: skip
    pd.add_argument(
        "--sim-kv-transfer-latency-ms", type=float, default=DEFAULT_KV_TRANSFER_LATENCY_MS,
        help="fixed milliseconds per KV transfer (handshake and completion notice), on top of its bytes' time",
    )  # fmt: skip
    ignored = p.add_argument_group("accepted SGLang flags the twin ignores")
    for flags, kind, default in IGNORED_VALUE_FLAGS:
        ignored.add_argument(*flags, type=kind, default=default)
    for flag in IGNORED_BOOL_FLAGS:
        ignored.add_argument(flag, action="store_true")
    modelled = p.add_argument_group("SGLang flags the twin accepts at their default only")
    for flags, kind, default, _, _ in MODELLED_VALUE_FLAGS:
        modelled.add_argument(*flags, type=kind, default=default)
    return p


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


_IGNORED_DESTS = tuple(
    _dest(f)
    for f in (
        *(entry[0][0] for entry in IGNORED_VALUE_FLAGS),
        *(entry[0][0] for entry in MODELLED_VALUE_FLAGS),
        *IGNORED_BOOL_FLAGS,
    )
)


def _positive(name: str, value: int | float) -> None:
    if value <= 0:
        raise ServerArgsError(f"{name} must be positive, got {value}")


def _check_nodes(ns: argparse.Namespace, gpus_per_node: int) -> None:
    """A server over several hosts, as SGLang starts one: the same command on each with its --node-rank."""
    _positive("--nnodes", ns.nnodes)
    if not 0 <= ns.node_rank < ns.nnodes:
        raise ServerArgsError(f"--node-rank {ns.node_rank} must be in 0..{ns.nnodes - 1} (--nnodes {ns.nnodes})")
    if ns.tp_size % ns.nnodes:
        raise ServerArgsError(f"--tp-size {ns.tp_size} must split evenly over --nnodes {ns.nnodes}")
    if ns.tp_size // ns.nnodes > gpus_per_node:
        raise ServerArgsError(
            f"--tp-size {ns.tp_size} over --nnodes {ns.nnodes} puts {ns.tp_size // ns.nnodes} GPUs on a host; a "
            f"{ns.sim_hardware} host has {gpus_per_node}: raise --nnodes"
        )
    if ns.nnodes > 1 and ns.dist_init_addr is None:
        raise ServerArgsError(
            f"--nnodes {ns.nnodes} needs --dist-init-addr HOST:PORT, where the hosts meet (as in SGLang)"
        )


def parse_server_args(argv: list[str]) -> SimServerArgs:
    """Parse and validate; raises ServerArgsError naming the offending flag."""
    parser = _build_parser()
    try:
        ns, unknown = parser.parse_known_args(argv)
    except argparse.ArgumentError as exc:
        raise ServerArgsError(str(exc)) from None
    if unknown:
        flag = next((u for u in unknown if u.startswith("-")), unknown[0])
        if flag.split("=", 1)[0] in UNMODELLED_FLAGS:
            name = flag.split("=", 1)[0]
            raise ServerArgsError(f"{name} is a real SGLang flag that changes cost, refused: {UNMODELLED_FLAGS[name]}")
        if flag.startswith(UNMODELLED_FLAG_PREFIXES):
            raise ServerArgsError(f"{flag} is a real SGLang flag, but the twin does not model it yet")
        raise ServerArgsError(f"unknown flag or stray value {flag!r} (see `costbench sim --help`)")
    for flags, _, _, modelled_values, why in MODELLED_VALUE_FLAGS:
        value = getattr(ns, _dest(flags[0]))
        if value not in modelled_values:
            shown = "/".join(str(v) for v in modelled_values if v is not None)
            unset = " or leaves it unset" if None in modelled_values else ""
            raise ServerArgsError(f"{flags[0]} {value}: {why}; the twin accepts only {flags[0]} {shown}{unset}")
    for name in ("tp_size", "dp_size", "stream_interval", "max_prefill_tokens"):
        _positive(f"--{name.replace('_', '-')}", getattr(ns, name))
    if ns.max_running_requests is not None:
        _positive("--max-running-requests", ns.max_running_requests)
    if ns.cuda_graph_max_bs_decode is not None:
        _positive("--cuda-graph-max-bs", ns.cuda_graph_max_bs_decode)
    if ns.context_length is not None:
        _positive("--context-length", ns.context_length)
    mem = DEFAULT_MEM_FRACTION_STATIC if ns.mem_fraction_static is None else ns.mem_fraction_static
    if not 0 < mem <= 1:
        raise ServerArgsError(f"--mem-fraction-static must be in (0, 1], got {mem}")
    if ns.sim_warmup_s < 0:
        raise ServerArgsError(f"--sim-warmup-s must be >= 0, got {ns.sim_warmup_s}")
    if not 0 <= ns.sim_unconstrained_failure_rate <= 1:
        raise ServerArgsError(
            f"--sim-unconstrained-failure-rate must be in [0, 1], got {ns.sim_unconstrained_failure_rate}"
        )
    if ns.schedule_conservativeness <= 0:
        raise ServerArgsError(f"--schedule-conservativeness must be positive, got {ns.schedule_conservativeness}")
    if not 0 <= ns.port <= 65535:
        raise ServerArgsError(f"--port must be 0-65535, got {ns.port}")
    try:
        faults = FaultConfig.from_namespace(ns)
        run_variation = RunVariation.from_namespace(ns)
        speculative = SpecConfig.from_namespace(ns, ns.model_path)
        wants_ep = ns.ep_size != 1 or ns.moe_a2a_backend != "none"
        routed_experts = model_profile_for(ns.model_path).num_routed_experts if wants_ep else 0
        expert_parallel = ExpertParallel.from_namespace(ns, ns.tp_size, routed_experts)
    except ValueError as exc:
        raise ServerArgsError(str(exc)) from None
    if not 0 < ns.disaggregation_bootstrap_port <= 65535:
        port = ns.disaggregation_bootstrap_port
        raise ServerArgsError(f"--disaggregation-bootstrap-port must be 1-65535, got {port}")
    if ns.num_reserved_decode_tokens < 0:
        raise ServerArgsError(f"--num-reserved-decode-tokens must be >= 0, got {ns.num_reserved_decode_tokens}")
    if ns.sim_kv_link_gb_s is not None:
        _positive("--sim-kv-link-gb-s", ns.sim_kv_link_gb_s)
    if ns.sim_kv_transfer_latency_ms < 0:
        raise ServerArgsError(f"--sim-kv-transfer-latency-ms must be >= 0, got {ns.sim_kv_transfer_latency_ms}")
    _check_nodes(ns, HARDWARE_PROFILES[HardwareName(ns.sim_hardware)].gpus_per_node)
    default_running = DEFAULT_MAX_RUNNING_REQUESTS if speculative is None else SPEC_DEFAULT_MAX_RUNNING_REQUESTS
    hardware = HardwareName(ns.sim_hardware)
    default_chunk = (
        LARGE_GPU_CHUNKED_PREFILL_TOKENS
        if HARDWARE_PROFILES[hardware].hbm_bytes >= LARGE_GPU_HBM_BYTES
        else DEFAULT_CHUNKED_PREFILL_TOKENS
    )
    chunk = default_chunk if ns.chunked_prefill_size is None else ns.chunked_prefill_size
    if chunk == 0 or chunk < -1:
        raise ServerArgsError(f"--chunked-prefill-size must be positive or -1 (off), got {chunk}")
    return SimServerArgs(
        model_path=ns.model_path,
        tokenizer_path=ns.tokenizer_path or ns.model_path,
        served_model_name=ns.served_model_name or ns.model_path,
        host=ns.host,
        port=ns.port,
        tp_size=ns.tp_size,
        dp_size=ns.dp_size,
        enable_dp_attention=ns.enable_dp_attention,
        schedule_policy=SchedulePolicy(ns.schedule_policy),
        max_running_requests=ns.max_running_requests or default_running,
        cuda_graph_max_bs_decode=ns.cuda_graph_max_bs_decode,
        decode_graph_max_bs=(
            default_decode_graph_max_bs(HARDWARE_PROFILES[hardware].hbm_bytes, ns.tp_size, ns.max_running_requests)
            if ns.cuda_graph_max_bs_decode is None
            else ns.cuda_graph_max_bs_decode
        ),
        chunked_prefill_size=chunk,
        max_prefill_tokens=ns.max_prefill_tokens,
        disable_radix_cache=ns.disable_radix_cache,
        enable_mixed_chunk=ns.enable_mixed_chunk,
        enable_metrics=ns.enable_metrics,
        enable_cache_report=ns.enable_cache_report,
        stream_interval=ns.stream_interval,
        incremental_streaming_output=ns.incremental_streaming_output,
        stream_response_default_include_usage=ns.stream_response_default_include_usage,
        reasoning_parser=ns.reasoning_parser,
        schedule_conservativeness=ns.schedule_conservativeness,
        mem_fraction_static=mem,
        context_length=ns.context_length,
        kv_cache_dtype=ns.kv_cache_dtype,
        api_key=ns.api_key,
        skip_server_warmup=ns.skip_server_warmup,
        sim_hardware=HardwareName(ns.sim_hardware),
        sim_warmup_s=ns.sim_warmup_s,
        sim_cold_start=ns.sim_cold_start,
        grammar_backend=ns.grammar_backend or DEFAULT_GRAMMAR_BACKEND,
        sim_unconstrained_failure_rate=ns.sim_unconstrained_failure_rate,
        faults=faults,
        run_variation=run_variation,
        speculative=speculative,
        expert_parallel=expert_parallel,
        nnodes=ns.nnodes,
        disaggregation_mode=DisaggregationMode(ns.disaggregation_mode),
        disaggregation_bootstrap_port=ns.disaggregation_bootstrap_port,
        disaggregation_transfer_backend=ns.disaggregation_transfer_backend,
        num_reserved_decode_tokens=ns.num_reserved_decode_tokens,
        sim_kv_link_gb_s=(
            HARDWARE_PROFILES[hardware].nic_bytes_per_s / 1e9 if ns.sim_kv_link_gb_s is None else ns.sim_kv_link_gb_s
        ),
        sim_kv_transfer_latency_ms=ns.sim_kv_transfer_latency_ms,
        ignored=tuple((dest, getattr(ns, dest)) for dest in _IGNORED_DESTS),
    )


def help_text() -> str:
    return _build_parser().format_help()


def argument_parser() -> argparse.ArgumentParser:
    """The twin's parser, every flag it accepts (`make conformance` checks them against SGLang's)."""
    return _build_parser()
