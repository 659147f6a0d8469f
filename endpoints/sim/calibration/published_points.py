"""The published SGLang figures the twin is fitted and validated on (docs/twin.md, "Profiles and
sources" and "Calibration"), each as the setup and workload that reproduce it on the twin's engine in
virtual time, and how the twin's result is measured the way the publisher measured it.

One `Point` is one benchmark run: a server (SGLang flags, the GPUs it uses), a workload, and what was
published for it: throughput per GPU, mean TTFT, mean TPOT (whichever the source gives). Its key
(`"7.c64"`: calibration row 7, concurrency 64) is what bench/twin_fit.py's fit set names.

Used by bench/twin_fit.py (the fit), bench/twin_spec_fit.py (row 8's acceptance), and calibration_tables.py
(bench/twin_calibration.py's tables and the weekly twin_calibration asset); the engine, scheduler and cost
model are exactly those behind HTTP.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache

from endpoints.sim.calibration.phase_bench import Phase, PhaseResult, run_phase
from endpoints.sim.calibration.spec_fitted import ROW8_SPEC_ACCEPT_LENGTH  # row 8's fitted MTP acceptance
from endpoints.sim.cost.profiles import CostConstants, HardwareName
from endpoints.sim.pd_fleet_bench import PdFleet, run_pd_fleet
from endpoints.sim.virtual_bench import BenchRequest, BenchResult, random_ids, random_requests, run_bench


class Metric(str, Enum):
    THROUGHPUT = "throughput per GPU"  # tok/s per GPU: total, output or decode, as `Point.throughput_kind` says
    TTFT = "mean TTFT"  # ms
    TPOT = "mean TPOT"  # ms
    P99_TTFT = "P99 TTFT"  # ms: bench_serving's first burst on a cold server (row 7 publishes it)
    MEDIAN_TTFT = "median TTFT"  # ms (rows 16-17)
    MEDIAN_TPOT = "median TPOT"  # ms (rows 16-17)


class ThroughputKind(str, Enum):
    """Which tokens over which GPUs: InferenceX counts a disaggregated deployment three ways (total over all GPUs,
    output over the decode GPUs, input over the prefill GPUs); each point says which one it was published as."""

    TOTAL = "total"  # (input + output) tokens / duration, over all GPUs
    OUTPUT = "output"  # output tokens / duration, over all GPUs
    DECODE = "decode"  # decode tokens per second once every request has its first token (row 4)
    INPUT_PER_PREFILL_GPU = "input per prefill GPU"  # a saturated prefill server's input tokens/s per GPU
    OUTPUT_PER_DECODE_GPU = "output per decode GPU"  # a saturated decode server's output tokens/s per GPU


@dataclass(frozen=True, slots=True)
class Workload:
    """bench_serving-style random prompts at `--request-rate inf` behind `--max-concurrency`."""

    input_len: int
    output_len: int
    range_ratio: float  # lengths uniform on [len × ratio, len]
    prompts: int
    concurrency: int
    seed: int
    warmups: int = 0  # unmeasured copies of the first prompt sent first, behind the same concurrency cap

    @property
    def arrivals(self) -> str:
        """How the benchmark sends its requests, for the printed tables."""
        warm = f", after {self.warmups} warm-up{'s' if self.warmups != 1 else ''}" if self.warmups else ""
        if self.prompts == self.concurrency:
            return f"one burst of {self.prompts}{warm}"
        return f"closed loop: C={self.concurrency}, {self.prompts} prompts{warm}"


@dataclass(frozen=True, slots=True)
class PhaseWorkload:
    """One phase of a disaggregated deployment kept saturated, as the large EP deployments publish (phase_bench.py)."""

    phase: Phase
    input_len: int  # the published prompt length: a prefill's prompts, a decode's context
    batch_per_gpu: int | None = None  # decode: the published running batch per GPU (None: what the KV pool holds)

    @property
    def arrivals(self) -> str:
        if self.phase is Phase.PREFILL:
            return "saturated prefill: each rank's step full (--max-prefill-tokens)"
        held = "as many as the KV pool holds" if self.batch_per_gpu is None else f"{self.batch_per_gpu} a GPU"
        return f"saturated decode: {held}"


@dataclass(frozen=True, slots=True)
class Point:
    key: str  # "<calibration row>.c<concurrency>"; a phase point "<row>.prefill" / "<row>.decode"
    row: int
    setup: str
    flags: tuple[str, ...]
    gpus: int
    workload: Workload | PhaseWorkload
    published: dict[Metric, float]
    throughput_kind: ThroughputKind
    sglang_version: str
    source: str
    # A disaggregated fleet driven end to end (rows 14-17): its prefill and decode workers; `flags` are the decode's.
    fleet: PdFleet | None = None

    @property
    def disaggregated(self) -> bool:
        """A prefill/decode deployment: one saturated phase of one (rows 5, 6, 11, 12) or a whole fleet (14-17)."""
        return self.fleet is not None or isinstance(self.workload, PhaseWorkload)

    @property
    def hardware(self) -> HardwareName:
        """The GPU its flags name (--sim-hardware)."""
        return HardwareName(self.flags[self.flags.index("--sim-hardware") + 1])


@dataclass(frozen=True, slots=True)
class Measured:
    point: Point
    values: dict[Metric, float]
    result: BenchResult | PhaseResult

    def ratio(self, metric: Metric) -> float:
        return self.values[metric] / self.point.published[metric]


def _tokens(flags: str) -> tuple[str, ...]:
    return tuple(flags.split())


COOKBOOK = "SGLang cookbook DeepSeek-R1.mdx"
# Every published run started on a freshly launched server: the twin's --sim-cold-start reproduces its
# one-off first-burst stall (endpoints/sim/cost/cold_start.py).
B200_R1 = _tokens("--model-path deepseek-ai/DeepSeek-R1-0528 --tp 8 --sim-hardware b200 --sim-cold-start")
H200_DP16 = _tokens(
    "--model-path deepseek-ai/DeepSeek-R1 --tp 16 --dp 16 --enable-dp-attention --nnodes 2 "
    "--dist-init-addr 10.0.0.1:5000 --sim-hardware h200 --sim-cold-start"
)
# InferenceX (rows 7-9): R1-0528 FP8, --disable-radix-cache, stream interval 10.
H200_V057 = _tokens(
    "--model-path deepseek-ai/DeepSeek-R1-0528 --tp 8 --sim-hardware h200 --disable-radix-cache "
    "--chunked-prefill-size 32768 --max-prefill-tokens 32768 --mem-fraction-static 0.82 "
    "--attention-backend flashinfer --stream-interval 10 --max-running-requests 512 --cuda-graph-max-bs 512 "
    "--sim-cold-start"
)
H200_V0519_MTP = _tokens(
    "--model-path deepseek-ai/DeepSeek-R1-0528 --tp 8 --sim-hardware h200 --disable-radix-cache "
    "--chunked-prefill-size 32768 --max-prefill-tokens 32768 --mem-fraction-static 0.82 "
    "--attention-backend flashinfer --stream-interval 10 --max-running-requests 256 --cuda-graph-max-bs 256 "
    "--speculative-algorithm EAGLE --speculative-num-steps 2 --speculative-num-draft-tokens 3 "
    f"--speculative-eagle-topk 1 --sim-spec-accept-length {ROW8_SPEC_ACCEPT_LENGTH} --sim-cold-start"
)
MI325X_V0519 = _tokens(
    "--model-path deepseek-ai/DeepSeek-R1-0528 --tp 8 --sim-hardware mi325x --mem-fraction-static 0.8 "
    "--cuda-graph-max-bs 128 --chunked-prefill-size 131072 --max-prefill-tokens 131072 "
    "--num-continuous-decode-steps 4 --kv-cache-dtype fp8_e4m3 --attention-backend aiter --disable-radix-cache "
    "--sim-cold-start"
)


def _cookbook(row: int, concurrency: int, prompts: int, published: dict[Metric, float]) -> Point:
    return Point(
        key=f"{row}.c{concurrency}",
        row=row,
        setup=f"8×B200 R1 TP8 (v0.5.6.post1), 1K/1K ratio 0, C={concurrency}, {prompts} prompts",
        flags=B200_R1,
        gpus=8,
        # SGLang's bench_serving sends one warm-up request first (--warmup-requests, default 1).
        workload=Workload(1000, 1000, 0.0, prompts, concurrency, seed=concurrency, warmups=1),
        published=published,
        throughput_kind=ThroughputKind.OUTPUT,
        sglang_version="0.5.6.post1",
        source=COOKBOOK,
    )


def _inferencex(row: int, flags: tuple[str, ...], label: str, version: str, source: str, input_len: int,
                figures: dict[int, tuple[float, float, float]], p99_ttft: dict[int, float] | None = None,
                ) -> list[Point]:  # fmt: skip
    """InferenceX's method (utils/bench_serving/benchmark_serving.py): random lengths on [0.8·L, L]; 2·C
    warm-ups, copies of the first prompt behind the concurrency cap, all finished before 10·C prompts
    are sent closed loop; total tok/s per GPU, mean TTFT, mean TPOT (and the P99 TTFT where published)."""
    points = []
    for concurrency, (tput, ttft, tpot) in figures.items():
        published = {Metric.THROUGHPUT: tput, Metric.TTFT: ttft, Metric.TPOT: tpot}
        if p99_ttft:
            published[Metric.P99_TTFT] = p99_ttft[concurrency]
        points.append(
            Point(
                key=f"{row}.c{concurrency}",
                row=row,
                setup=f"{label} ({version}), {input_len // 1024}k/1k, C={concurrency}",
                flags=flags,
                gpus=8,
                workload=Workload(
                    input_len, 1024, 0.8, 10 * concurrency, concurrency, seed=concurrency, warmups=2 * concurrency
                ),
                published=published,
                throughput_kind=ThroughputKind.TOTAL,
                sglang_version=version,
                source=source,
            )
        )
    return points


ROW4 = Point(
    key="4.c32",
    row=4,
    setup="16×H200 DP attention, 2 req/rank, 65,536 in / 4,096 out (decode phase)",
    flags=H200_DP16,
    gpus=16,
    workload=Workload(65_536, 4096, 1.0, 32, 32, seed=4),
    published={Metric.THROUGHPUT: 51.0},
    throughput_kind=ThroughputKind.DECODE,
    sglang_version="2025-07 main (LMSYS blog)",
    source="LMSYS blog 2025-07-17 (sglang issue #7998)",
)

# Rows 5, 6, 11 and 12: prefill/decode disaggregation with DP attention and DeepEP over many GPUs, each phase
# published apart at saturation (LMSYS blogs; SGLang's main branch of the day). Flags as the blogs' commands give
# them where the twin models them; what they leave out (the decode's output length: the context is the input
# length) is said in docs/twin.md. A node of HGX H100 holds 8 GPUs, a GB200 NVL72 compute tray 4.
_LARGE_EP = "--enable-dp-attention --moe-a2a-backend deepep --enable-eplb --ep-num-redundant-experts 32"
H100_EP_PREFILL = (f"--model-path deepseek-ai/DeepSeek-V3-0324 --sim-hardware h100 --disaggregation-mode prefill "
                   f"{_LARGE_EP} --deepep-mode normal --enable-two-batch-overlap --mem-fraction-static 0.85 "
                   "--dist-init-addr 10.0.0.1:5000")  # fmt: skip
H100_EP_DECODE = (f"--model-path deepseek-ai/DeepSeek-V3-0324 --sim-hardware h100 --disaggregation-mode decode "
                  f"{_LARGE_EP} --deepep-mode low_latency --enable-two-batch-overlap --mem-fraction-static 0.835 "
                  "--dist-init-addr 10.0.0.1:5000")  # fmt: skip
# ASSUMED for rows 11 and 12's decode, which the blogs' summaries do not state: EPLB with 32 copies, as on the H100
# deployment, and no two-batch overlap (its exchange crosses NVLink, which has little to hide).
GB200_EP_DECODE = _tokens(
    f"--model-path deepseek-ai/DeepSeek-R1 --sim-hardware gb200 --disaggregation-mode decode {_LARGE_EP} "
    "--deepep-mode low_latency --tp 48 --dp 48 --nnodes 12 --dist-init-addr 10.0.0.1:5000"
)
LMSYS_EP = "LMSYS blog 2025-05-05 (large-scale EP)"


def _phase(key: str, row: int, setup: str, flags: str | tuple[str, ...], gpus: int, workload: PhaseWorkload,
           figure: float, source: str, version: str) -> Point:  # fmt: skip
    kind = (ThroughputKind.INPUT_PER_PREFILL_GPU if workload.phase is Phase.PREFILL
            else ThroughputKind.OUTPUT_PER_DECODE_GPU)  # fmt: skip
    return Point(key, row, setup, flags if isinstance(flags, tuple) else _tokens(flags), gpus, workload,
                 {Metric.THROUGHPUT: figure}, kind, version, source)  # fmt: skip


PHASE_POINTS: tuple[Point, ...] = (
    *(
        _phase(f"6.prefill{k}k", 6, f"4×8 H100 prefill, EP32 + TBO, {k}K input", f"{H100_EP_PREFILL} --tp 32 --dp 32 "
               "--nnodes 4", 32, PhaseWorkload(Phase.PREFILL, k * 1024), per_node / 8, LMSYS_EP, "2025-05 main")
        for k, per_node in ((1, 57_674), (2, 54_543), (4, 50_302))
    ),
    _phase("5.prefill", 5, "3×8 H100 prefill of 12 nodes, EP24 + TBO, 2,000 input", f"{H100_EP_PREFILL} --tp 24 "
           "--dp 24 --nnodes 3", 24, PhaseWorkload(Phase.PREFILL, 2000), 52_300 / 8, LMSYS_EP, "2025-05 main"),
    _phase("5.decode", 5, "9×8 H100 decode of 12 nodes, EP72 + TBO, 2,000 input, batch 256/GPU",
           f"{H100_EP_DECODE} --tp 72 --dp 72 --nnodes 9 --max-running-requests 18432", 72,
           PhaseWorkload(Phase.DECODE, 2000, 256), 22_300 / 8, LMSYS_EP, "2025-05 main"),
    _phase("11.decode", 11, "GB200 NVL72 decode, 12×4 GPUs, EP48, 2,000 input, saturated", GB200_EP_DECODE, 48,
           PhaseWorkload(Phase.DECODE, 2000), 7583, "LMSYS blog 2025-06-16 (GB200 NVL72 part I)", "2025-06 main"),
    _phase("12.prefill", 12, "GB200 NVL72 prefill instance of 4 GPUs, FP8 MoE, 2,000 input",
           "--model-path deepseek-ai/DeepSeek-R1 --sim-hardware gb200 --disaggregation-mode prefill --tp 4 --dp 4 "
           "--enable-dp-attention "
           "--moe-a2a-backend deepep --deepep-mode normal --mem-fraction-static 0.95", 4,
           PhaseWorkload(Phase.PREFILL, 2000), 18_471, "LMSYS blog 2025-09 (GB200 NVL72 part II)", "2025-09 main"),
    _phase("12.decode", 12, "GB200 NVL72 decode over 48 ranks, FP8 MoE, 2,000 input, batch 1,408/GPU",
           GB200_EP_DECODE, 48, PhaseWorkload(Phase.DECODE, 2000, 1408), 9087,
           "LMSYS blog 2025-09 (GB200 NVL72 part II)", "2025-09 main"),
)  # fmt: skip

# Rows 14-17: whole disaggregated fleets, closed loop (InferenceX's multi-node lanes): a router in front, prefill and
# decode workers joined by their KV transfers, 2·C warm-ups then 10·C prompts of random lengths on [0.8·L, L].
# DP8 = --tp 8 --dp 8 --enable-dp-attention; DEP8 adds --ep-size 8 (no --moe-a2a-backend: SGLang's default, none).
_B200_PD = ("--model-path deepseek-ai/DeepSeek-R1-0528 --sim-hardware b200 --quantization fp8 "
            "--kv-cache-dtype fp8_e4m3 --stream-interval 30 --disable-radix-cache "
            "--disaggregation-transfer-backend nixl")  # fmt: skip
B200_PD_PREFILL_DP8 = _tokens(
    f"{_B200_PD} --disaggregation-mode prefill --tp 8 --dp 8 --enable-dp-attention --mem-fraction-static 0.6 "
    "--max-prefill-tokens 8192 --chunked-prefill-size 65536 --max-running-requests 8 --context-length 9600"
)
B200_PD_DECODE_TP8 = _tokens(f"{_B200_PD} --disaggregation-mode decode --tp 8 --max-running-requests 32 "
                             "--cuda-graph-max-bs 32")  # fmt: skip
B200_PD_DECODE_DEP8 = _tokens(
    f"{_B200_PD} --disaggregation-mode decode --tp 8 --dp 8 --enable-dp-attention --ep-size 8 "
    "--mem-fraction-static 0.75 --max-running-requests 256 --cuda-graph-max-bs 256"
)
_MI355X_PD = ("--model-path deepseek-ai/DeepSeek-R1-0528 --sim-hardware mi355x --quantization mxfp4 "
              "--kv-cache-dtype fp8_e4m3 --moe-a2a-backend mori --disaggregation-transfer-backend mori "
              "--disable-radix-cache --tp 8 --dp 8 --enable-dp-attention --ep-size 8")  # fmt: skip
MI355X_PD_PREFILL_DEP4 = _tokens(
    f"{_MI355X_PD.replace('--tp 8 --dp 8', '--tp 4 --dp 4').replace('--ep-size 8', '--ep-size 4')} "
    "--disaggregation-mode prefill --mem-fraction-static 0.8 --max-running-requests 24"
)
MI355X_PD_DECODE_DEP8 = _tokens(f"{_MI355X_PD} --disaggregation-mode decode --mem-fraction-static 0.85 "
                                "--max-running-requests 4096 --cuda-graph-max-bs 160")  # fmt: skip
INFERENCEX_PD = "InferenceX PR #907 (commit 593fb431a)"


def _pd(row: int, setup: str, fleet: PdFleet, gpus: int, input_len: int, concurrency: int,
        published: dict[Metric, float], kind: ThroughputKind, version: str, source: str) -> Point:  # fmt: skip
    workload = Workload(input_len, 1024, 0.8, 10 * concurrency, concurrency, seed=concurrency, warmups=2 * concurrency)
    return Point(f"{row}.c{concurrency}", row, setup, fleet.decode_flags, gpus, workload, published, kind, version,
                 source, fleet)  # fmt: skip


PD_POINTS: tuple[Point, ...] = (
    # Published as whole-fleet output tokens/s (4,705-4,805: the middle is taken) and mean TPOT.
    _pd(14, "B200 FP8 1P (DP8) + 3D (TP8), NIXL, 8k/1k, C=128", PdFleet(B200_PD_PREFILL_DP8, 1, B200_PD_DECODE_TP8, 3),
        32, 8192, 128, {Metric.THROUGHPUT: 4755 / 32, Metric.TPOT: 16.3}, ThroughputKind.OUTPUT, "0.5.8.post1",
        INFERENCEX_PD),
    _pd(15, "B200 FP8 1P (DP8) + 1D (DEP8), NIXL, 8k/1k, C=288",
        PdFleet(B200_PD_PREFILL_DP8, 1, B200_PD_DECODE_DEP8, 1), 16, 8192, 288,
        {Metric.THROUGHPUT: 5166 / 16, Metric.TPOT: 30.8}, ThroughputKind.OUTPUT, "0.5.8.post1", INFERENCEX_PD),
    # Published as total tokens/s per GPU, median TTFT and median TPOT.
    _pd(16, "MI355X MXFP4 4P (DEP4) + 1D (DEP8), MoRI, 8k/1k, C=2048",
        PdFleet(MI355X_PD_PREFILL_DEP4, 4, MI355X_PD_DECODE_DEP8, 1), 24, 8192, 2048,
        {Metric.THROUGHPUT: 4222.8, Metric.MEDIAN_TTFT: 71_288.6, Metric.MEDIAN_TPOT: 108.1}, ThroughputKind.TOTAL,
        "0.5.9 (ROCm)", "InferenceX-app blog mi355x-mori-sglang-deepseek-r1-update-2026-03-13"),
    _pd(17, "MI355X MXFP4 1P (DEP4) + 1D (DEP8), MoRI, 1k/1k, C=2048",
        PdFleet(MI355X_PD_PREFILL_DEP4, 1, MI355X_PD_DECODE_DEP8, 1), 12, 1024, 2048,
        {Metric.THROUGHPUT: 3024.4, Metric.MEDIAN_TTFT: 45_187.2, Metric.MEDIAN_TPOT: 63.3}, ThroughputKind.TOTAL,
        "0.5.9 (ROCm)", "InferenceX-app blog best-gpu-for-dsr1-inference"),
)  # fmt: skip

POINTS: tuple[Point, ...] = (
    _cookbook(1, 1, 10, {Metric.THROUGHPUT: 105 / 8, Metric.TTFT: 153}),
    _cookbook(2, 16, 80, {Metric.THROUGHPUT: 795 / 8, Metric.TTFT: 273.51}),
    # The C = 100 run's P99 TTFT is on the same cookbook page (section 5.1.4).
    _cookbook(
        3, 100, 500, {Metric.THROUGHPUT: 2283 / 8, Metric.TTFT: 563.14, Metric.TPOT: 40, Metric.P99_TTFT: 2632.11}
    ),
    ROW4,
    *_inferencex(
        7, H200_V057, "8×H200 TP8", "0.5.7", "InferenceX issue #870", 1024,
        {8: (148.6, 330.6, 12.8), 16: (225.1, 356.0, 17.2), 32: (301.7, 426.5, 25.6), 64: (447.2, 423.1, 34.6)},
        p99_ttft={8: 1975, 16: 2149, 32: 2644, 64: 2741},
    ),
    *_inferencex(
        8, H200_V0519_MTP, "8×H200 TP8 + MTP", "0.5.19", "InferenceX PR #3289", 8192,
        {4: (571.87, 433.7, 7.10), 8: (790.96, 527.6, 10.32), 16: (1081.68, 752.4, 15.52),
         32: (1401.92, 1066.4, 23.92), 64: (1676.98, 4329.8, 37.55)},
    ),
    *_inferencex(
        9, MI325X_V0519, "8×MI325X TP8", "0.5.19 (ROCm)", "InferenceX PR #3318", 8192,
        {4: (223.94, 1025, 18.53), 8: (385.84, 1027, 21.56), 16: (626.19, 1163, 26.75),
         32: (854.62, 1363, 39.45), 64: (1035.63, 1918, 66.55)},
    ),
)  # fmt: skip

POINTS += PHASE_POINTS + PD_POINTS
POINTS_BY_KEY = {p.key: p for p in POINTS}


def _decode_tok_s(result: BenchResult) -> float:
    """Decode tokens per second from the moment every request has its first token to the last token."""
    start = max(r.sent_s + r.ttft_s for r in result.requests)
    end = max(r.sent_s + r.e2e_s for r in result.requests)
    tokens = 0
    for r in result.requests:
        t = r.sent_s + r.ttft_s
        for gap in r.chunk_gaps_s:
            t += gap
            if start < t <= end:
                tokens += 1
    return tokens / (end - start)


@lru_cache(maxsize=64)
def _requests(key: str) -> tuple[BenchRequest, ...]:
    """The workload's prompts, drawn once per process (the fit runs each point many times)."""
    return tuple(requests_for(POINTS_BY_KEY[key]))


def requests_for(point: Point) -> list[BenchRequest]:
    """The point's prompts as published (row 4: fixed lengths, every request in the one burst)."""
    w = point.workload
    if not isinstance(w, Workload):
        raise ValueError(f"{point.key} is a saturated phase, not a request list")
    if point.throughput_kind is ThroughputKind.DECODE:
        rng = random.Random(w.seed)
        return [BenchRequest(random_ids(w.input_len, rng), w.output_len) for _ in range(w.prompts)]
    return random_requests(w.prompts, w.input_len, w.output_len, w.range_ratio, seed=w.seed)


# The twin's step timing does not depend on how often it streams (it models no detokenizer or HTTP
# cost), and TTFT, TPOT and throughput come from the first and last chunk only: measuring with
# chunks every STREAM_INTERVAL_FOR_MEANS tokens gives the same figures with far fewer updates to
# deliver (tests/endpoints/sim/test_sim_virtual_bench.py checks the equality). Row 4 counts tokens, so it streams each.
STREAM_INTERVAL_FOR_MEANS = 64


def measure(point: Point, constants: CostConstants | None = None) -> Measured:
    """Run the point's workload on a twin built from its flags (cost constants injected, or the fitted ones)."""
    w = point.workload
    if isinstance(w, PhaseWorkload):
        phase = run_phase(list(point.flags), w.phase, w.input_len, w.batch_per_gpu, constants)
        return Measured(point, {Metric.THROUGHPUT: phase.tokens_per_gpu_s}, phase)
    if point.fleet is not None:
        fleet = point.fleet
        means = ("--stream-interval", str(STREAM_INTERVAL_FOR_MEANS))
        fleet = PdFleet(fleet.prefill_flags, fleet.prefill_workers, fleet.decode_flags + means, fleet.decode_workers)
        result = run_pd_fleet(fleet, _requests(point.key), max_concurrency=w.concurrency, warmups=w.warmups,
                              cost_constants=constants).bench  # fmt: skip
    else:
        flags = list(point.flags)
        if point.throughput_kind is not ThroughputKind.DECODE:
            flags += ["--stream-interval", str(STREAM_INTERVAL_FOR_MEANS)]
        result = run_bench(flags, list(_requests(point.key)), w.concurrency, cost_constants=constants,
                           warmups=w.warmups)  # fmt: skip
    values: dict[Metric, float] = {}
    if point.throughput_kind is ThroughputKind.TOTAL:
        values[Metric.THROUGHPUT] = result.total_tok_s / point.gpus
    elif point.throughput_kind is ThroughputKind.OUTPUT:
        values[Metric.THROUGHPUT] = result.output_tok_s / point.gpus
    else:
        values[Metric.THROUGHPUT] = _decode_tok_s(result) / point.gpus
    if Metric.TTFT in point.published:
        values[Metric.TTFT] = result.mean_ttft_s * 1e3
    if Metric.TPOT in point.published:
        values[Metric.TPOT] = result.mean_tpot_s * 1e3
    if Metric.P99_TTFT in point.published:
        values[Metric.P99_TTFT] = result.p99_ttft_s * 1e3
    if Metric.MEDIAN_TTFT in point.published:
        values[Metric.MEDIAN_TTFT] = result.median_ttft_s * 1e3
    if Metric.MEDIAN_TPOT in point.published:
        values[Metric.MEDIAN_TPOT] = result.median_tpot_s * 1e3
    return Measured(point, values, result)
