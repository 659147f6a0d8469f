"""The twin beside a peer predictor: NVIDIA's AIConfigurator (PyPI `aiconfigurator`, per-kernel timings measured with
SGLang on H100, H200 and B200), asked the same questions. Its answers come from bench/aiconfigurator_predict.py, run
in its own environment (build/aic-venv) while the twin runs here; nothing is downloaded at run time.

    make aiconfigurator-compare                     # builds build/aic-venv once, then this: 3 minutes of CPU
    make aiconfigurator-compare AIC_ARGS=--quick    # five of the points, a shorter sweep: 2 minutes of CPU
    python bench/aiconfigurator_compare.py --aic-python build/aic-venv/bin/python [--quick] [--target-rps 40]

Prints two tables (docs/twin.md, "Beside a peer predictor"):
1. The single-node published points of endpoints/sim/calibration/published_points.py on 8×H200 and 8×B200 (rows
   1-3, 7 and 8): published, twin and AIConfigurator figures (throughput per GPU as the point publishes it, mean
   TTFT, mean TPOT), their ratios, and each tool's median error factor exp(median |log ratio|). The twin's figures
   on its fit set (bench/twin_fit.py) are fitted, not predictions: its factor is also given without them.
2. The plan question: 1k/1k requests at TTFT 1,000 ms / TPOT 50 ms on one 8×H200 replica with DP attention and
   8-way expert parallelism: the requests/s each tool holds inside the SLO and the GPUs each plans for a target
   rate, then the twin at AIConfigurator's rate and the twin's step costs, which say where its TPOT goes.

Without --aic-python and without build/aic-venv (a plain `make bench`) it says how to build the environment and
exits 0: nothing else in the repository needs AIConfigurator.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import IO

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from endpoints.capacity.deployment import Deployment  # noqa: E402
from endpoints.capacity.deployment_bench import FleetBenchResult, bench_deployment  # noqa: E402
from endpoints.capacity.fleet_plan import predicted_replicas  # noqa: E402
from endpoints.capacity.slo_capacity import (  # noqa: E402
    MAX_SETTLED_REQUESTS,
    SloCapacity,
    compressed,
    good_share,
    search_capacity,
)
from endpoints.clock import VirtualClock  # noqa: E402
from endpoints.sim.calibration.calibration_tables import CalibrationSet, calibration_set_of  # noqa: E402
from endpoints.sim.calibration.published_points import (  # noqa: E402
    POINTS,
    Measured,
    Metric,
    Point,
    ThroughputKind,
    Workload,
    measure,
)
from endpoints.sim.cost.profiles import HardwareName  # noqa: E402
from endpoints.sim.cost.step_batch import BatchItem, ForwardMode, StepBatch  # noqa: E402
from endpoints.sim.engine_builder import build_engine  # noqa: E402
from endpoints.sim.server_args import parse_server_args  # noqa: E402
from endpoints.sim.virtual_bench import BenchRequest, BenchResult, random_ids  # noqa: E402

AIC_VENV_PYTHON = REPO / "build" / "aic-venv" / "bin" / "python"
PREDICT = REPO / "bench" / "aiconfigurator_predict.py"
ROWS = (1, 2, 3, 7, 8)  # the single-node 8×H200 and 8×B200 rows
AIC_SYSTEMS = {HardwareName.H200: "h200_sxm", HardwareName.B200: "b200_sxm"}
METRICS = (Metric.THROUGHPUT, Metric.TTFT, Metric.TPOT)  # what both tools predict
QUICK_KEYS = ("1.c1", "3.c100", "7.c8", "7.c64", "8.c8")
WORKER_TIMEOUT_S = 1800

# The plan question: one aggregated 8×H200 replica, DP attention over the 8 GPUs, the experts spread whole over them
# and exchanged by DeepEP: the configuration AIConfigurator names tp1pp1dp8etp1ep8 (its large-EP SGLang kernels).
PLAN_FLAGS = (
    "--model-path", "deepseek-ai/DeepSeek-R1", "--tp", "8", "--dp", "8", "--enable-dp-attention",
    "--moe-a2a-backend", "deepep", "--sim-hardware", "h200",
)  # fmt: skip
PLAN_PARALLEL = "tp1pp1dp8etp1ep8"
PLAN_GPUS = 8
PLAN_ISL = PLAN_OSL = 1024
PLAN_SLO = (1000.0, 50.0)  # TTFT ms, TPOT ms
PLAN_SEED = 38  # the arrivals and prompts the twin sweeps (Poisson at 1 request/s, compressed by the sweep)
# Requests the twin's sweep replays: enough to turn the running batch over slo_capacity.MIN_TURNOVERS times at its
# capacity (74 running at 1.7 requests/s, about 90 at 2), so the sweep is settled as measure_capacity wants it.
PLAN_REQUESTS = 400
PLAN_REQUESTS_QUICK = 300
# The twin at AIConfigurator's rate: this many times its concurrency (512 requests). The twin cannot carry the rate,
# so no count settles it; two turnovers show how far outside the SLO it runs (--quick leaves it out).
PEER_RATE_TURNOVERS = 2


@dataclass(frozen=True, slots=True)
class TwinPlan:
    per_request: SloCapacity  # the twin's own reading: 95% of the idle share of requests inside both SLO parts
    by_means: SloCapacity  # AIConfigurator's reading: the mean TTFT and the mean TPOT inside the SLO
    at_capacity: BenchResult | None  # the sweep's requests at the per-request capacity


def mean_length(length: int, range_ratio: float) -> int:
    """bench_serving's random lengths are uniform on [max(length × ratio, 1), length]: their mean, which is what
    AIConfigurator's one ISL / OSL stands for."""
    return round((max(int(length * range_ratio), 1) + length) / 2)


def estimate_job(point: Point) -> dict:
    """The point as AIConfigurator's estimate takes it: one aggregated SGLang server at the benchmark's concurrency,
    the mean prompt and output lengths, the point's parallelism and MTP."""
    workload = point.workload
    assert isinstance(workload, Workload)
    args = parse_server_args(list(point.flags))
    dp = args.dp_size if args.enable_dp_attention else 1
    ep = args.expert_parallel.ep_size if args.expert_parallel is not None else 1
    job = {
        "key": point.key,
        "system": AIC_SYSTEMS[point.hardware],
        "isl": mean_length(workload.input_len, workload.range_ratio),
        "osl": mean_length(workload.output_len, workload.range_ratio),
        "batch_size": max(1, workload.concurrency // dp),  # per attention rank
        "tp": args.tp_size // dp,
        "dp": dp,
        "moe_tp": args.tp_size // ep,
        "moe_ep": ep,
    }
    if args.speculative is not None:  # MTP: the same drafts and acceptance the twin runs with
        job["nextn"] = args.speculative.num_steps
        job["nextn_accepted"] = args.speculative.accept_length - 1.0  # drafts accepted, the bonus token not
    return job


def peer_throughput(point: Point, job: dict, answer: dict) -> float:
    """AIConfigurator's requests/s as the point's throughput per GPU (output or input + output tokens)."""
    tokens = job["osl"] if point.throughput_kind is ThroughputKind.OUTPUT else job["isl"] + job["osl"]
    return answer["requests_per_s"] * tokens / point.gpus


def peer_values(point: Point, job: dict, answer: dict) -> dict[Metric, float]:
    if "error" in answer:
        return {}
    return {
        Metric.THROUGHPUT: peer_throughput(point, job, answer),
        Metric.TTFT: answer["ttft_ms"],
        Metric.TPOT: answer["tpot_ms"],
    }


def plan_requests(count: int) -> list[BenchRequest]:
    """1k/1k requests (AIConfigurator's fixed ISL and OSL), Poisson arrivals at 1 request/s; a longer list starts
    with the same requests."""
    rng = random.Random(PLAN_SEED)
    arrival_s, out = 0.0, []
    for _ in range(count):
        arrival_s += rng.expovariate(1.0)
        out.append(BenchRequest(random_ids(PLAN_ISL, rng), PLAN_OSL, arrival_s))
    return out


def at_rate(deployment: Deployment, requests: list[BenchRequest], rps: float) -> BenchResult:
    span_s = requests[-1].arrival_s - requests[0].arrival_s
    return bench_deployment(deployment, compressed(requests, rps * span_s / len(requests))).bench


def twin_plan(quick: bool) -> TwinPlan:
    """The twin's capacity sweep (slo_capacity.search_capacity, the search sweep_capacity runs, each probe a cold
    replica replayed by bench_deployment) read two ways over the same replays: the twin's SLO verdict, and
    AIConfigurator's (means); then the requests at the twin's capacity."""
    deployment = Deployment(PLAN_FLAGS, PLAN_GPUS)
    requests = plan_requests(PLAN_REQUESTS_QUICK if quick else PLAN_REQUESTS)
    ttft_ms, tpot_ms = PLAN_SLO
    replays: dict[float, FleetBenchResult] = {}  # by the last arrival: one replay per rate factor

    def replay(scaled: list[BenchRequest]) -> FleetBenchResult:
        key = scaled[-1].arrival_s
        if key not in replays:
            replays[key] = bench_deployment(deployment, scaled)
        return replays[key]

    def per_request(scaled: list[BenchRequest]) -> tuple[float, float]:
        run = replay(scaled)
        return good_share(run.bench, ttft_ms, tpot_ms), run.mean_running_per_replica

    def by_means(scaled: list[BenchRequest]) -> tuple[float, float]:
        run = replay(scaled)
        inside = run.bench.mean_ttft_s * 1e3 <= ttft_ms and run.bench.mean_tpot_s * 1e3 <= tpot_ms
        return float(inside), run.mean_running_per_replica

    strict = search_capacity(requests, per_request, max_requests=len(requests))
    means = search_capacity(requests, by_means, max_requests=len(requests))
    rps = strict.capacity_rps_at_slo
    return TwinPlan(strict, means, None if rps is None else at_rate(deployment, requests, rps))


def twin_at_peer_rate(peer: dict) -> BenchResult:
    """The twin at the rate AIConfigurator holds, on PEER_RATE_TURNOVERS x its concurrency of the same requests."""
    count = min(MAX_SETTLED_REQUESTS, math.ceil(PEER_RATE_TURNOVERS * peer["concurrency"]))
    return at_rate(Deployment(PLAN_FLAGS, PLAN_GPUS), plan_requests(count), peer["requests_per_s"])


def step_ms(flags: tuple[str, ...], batch: StepBatch) -> float:
    """One step's time on the twin's cost model, as its scheduler asks it."""
    engine = build_engine(parse_server_args(list(flags)), VirtualClock())
    return engine.scheduler.cost_model.step_time_s(batch) * 1e3


@dataclass(frozen=True, slots=True)
class PeerRun:
    """AIConfigurator's side, running beside the twin: a second process in its own environment."""

    process: subprocess.Popen
    answers: IO[str]  # its stdout: one JSON document
    log: IO[str]  # its stderr: AIConfigurator's own logging, shown if it fails

    @classmethod
    def start(cls, python: Path, job: dict) -> PeerRun:
        answers = tempfile.TemporaryFile("w+")
        log = tempfile.TemporaryFile("w+")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1")
        process = subprocess.Popen(
            [str(python), str(PREDICT), "--job", "-"], stdin=subprocess.PIPE, stdout=answers, stderr=log, text=True,
            env=env,
        )  # fmt: skip
        assert process.stdin is not None
        process.stdin.write(json.dumps(job))
        process.stdin.close()
        return cls(process, answers, log)

    def result(self) -> dict:
        try:
            code = self.process.wait(timeout=WORKER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise SystemExit(f"AIConfigurator's side took more than {WORKER_TIMEOUT_S} s") from None
        self.answers.seek(0)
        self.log.seek(0)
        if code != 0:
            raise SystemExit(f"AIConfigurator's side failed (exit {code}):\n{self.log.read()[-4000:]}")
        return json.loads(self.answers.read())


def fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"


def factor(ratios: list[float]) -> str:
    if not ratios:
        return "-"
    return f"{math.exp(median(abs(math.log(r)) for r in ratios)):.2f} ({len(ratios)} figures)"


def points_table(measured: list[Measured], jobs: dict[str, dict], answers: dict[str, dict]) -> list[str]:
    lines = [
        "\nPublished points (single node): published / twin / AIConfigurator, and the ratios to published\n",
        "| point | setup | twin set | AIC ISL/OSL, batch | throughput/GPU pub / twin / AIC = twin/pub / AIC/pub "
        "| mean TTFT ms | mean TPOT ms |",
        "|---|---|---|---|---|---|---|",
    ]
    ratios: dict[tuple[str, str], list[float]] = {}  # (tool, group) -> ratios
    notes = []
    for m in measured:
        point, job, answer = m.point, jobs[m.point.key], answers[m.point.key]
        peer = peer_values(point, job, answer)
        fitted = calibration_set_of(point.key) is CalibrationSet.FIT
        cells = []
        for metric in METRICS:
            if metric not in point.published:
                cells.append("-")
                continue
            pub, twin, aic = point.published[metric], m.values[metric], peer.get(metric)
            twin_ratio, aic_ratio = twin / pub, None if aic is None else aic / pub
            cells.append(
                f"{fmt(pub)} / {fmt(twin)} / {fmt(aic)} = {twin_ratio:.2f} / "
                + ("-" if aic_ratio is None else f"{aic_ratio:.2f}")
            )
            gpu = point.hardware.value.upper()
            for group in ("all", gpu, metric.value) + (() if fitted else ("validation",)):
                ratios.setdefault(("twin", group), []).append(twin_ratio)
                if aic_ratio is not None:
                    ratios.setdefault(("aic", group), []).append(aic_ratio)
        shape = f"{job['isl']}/{job['osl']}, {job['batch_size']}"
        if "nextn" in job:
            shape += f", MTP {job['nextn']} ({job['nextn_accepted']:.2f} accepted)"
        twin_set = "fit" if fitted else "validation"
        lines.append(
            f"| {point.key} | {point.setup} ({point.throughput_kind.value} tok/s) | {twin_set} | {shape} "
            f"| {' | '.join(cells)} |"
        )
        if "error" in answer:
            notes.append(f"{point.key}: AIConfigurator refused: {answer['error']}")
        elif answer.get("kv_warning"):
            notes.append(f"{point.key}: AIConfigurator warns: {answer['kv_warning']}")
    lines.append("\nMedian error factor, exp(median |log ratio|), over the figures above:\n")
    lines.append("| figures | twin | AIConfigurator |")
    lines.append("|---|---|---|")
    gpus = sorted({p.hardware.value.upper() for p in (m.point for m in measured)})
    groups = ["all", *gpus, *(metric.value for metric in METRICS), "validation"]
    labels = {"all": "all", "validation": "the twin's validation points only (its fit set left out)"}
    labels.update({gpu: f"8×{gpu}" for gpu in gpus})
    for group in groups:
        label = labels.get(group, group)
        by_twin, by_peer = factor(ratios.get(("twin", group), [])), factor(ratios.get(("aic", group), []))
        lines.append(f"| {label} | {by_twin} | {by_peer} |")
    return lines + [f"\n{n}" for n in notes]


def twin_row(reading: str, capacity: SloCapacity, run: BenchResult | None, target_rps: float) -> str:
    rps = capacity.capacity_rps_at_slo
    if rps is None:
        return f"| twin | {reading} | none sustained | - | - |"
    gpus = predicted_replicas(target_rps, rps) * PLAN_GPUS
    settled = "" if capacity.settled else ", not settled"
    at = "-" if run is None else (
        f"{run.mean_running_requests:,.0f} running, {fmt(run.mean_ttft_s * 1e3)}, {fmt(run.mean_tpot_s * 1e3)}"
    )  # fmt: skip
    return (
        f"| twin | {reading} ({capacity.requests} requests, Poisson{settled}) | {rps:.2f} | {at} "
        f"| {gpus} ({gpus // PLAN_GPUS} replicas) |"
    )


def plan_table(plan: TwinPlan, peer: dict, at_peer: BenchResult | None, target_rps: float) -> list[str]:
    ttft_slo, tpot_slo = PLAN_SLO
    lines = [
        f"\nPlan: {PLAN_ISL}/{PLAN_OSL} tokens, TTFT {ttft_slo:,.0f} ms / TPOT {tpot_slo:,.0f} ms, one 8×H200 replica "
        f"with DP attention + EP8 (twin: {' '.join(PLAN_FLAGS[2:])}; AIConfigurator: {PLAN_PARALLEL})\n",
        "| tool | how the SLO is read | requests/s held | at that rate: running requests, mean TTFT ms, mean TPOT ms "
        f"| GPUs for {target_rps:g} requests/s |",
        "|---|---|---|---|---|",
        twin_row("95% of the idle share of requests inside both parts", plan.per_request, plan.at_capacity, target_rps),
        twin_row("mean TTFT and mean TPOT inside", plan.by_means, None, target_rps),
    ]
    named, planned = peer.get("named"), peer.get("plan")
    if "error" in peer:
        lines.append(f"| AIConfigurator | refused: {peer['error']} | - | - | - |")
    elif named is not None:
        gpus_cell = "-"
        if planned is not None:
            gpus_cell = f"{planned['total_gpus']} ({planned['replicas']} × {planned['parallel']})"
        lines.append(
            f"| AIConfigurator | mean TTFT and mean TPOT inside, its steady state at one batch size (agg sweep of "
            f"{peer['configurations']:,} configurations) | {named['requests_per_s']:.2f} | {named['concurrency']} "
            f"({named['batch_per_rank']} a rank), {fmt(named['ttft_ms'])}, {fmt(named['tpot_ms'])} | {gpus_cell} |"
        )
    best = peer.get("best")
    if best is not None and best["parallel"] != PLAN_PARALLEL:
        lines.append(f"\nAIConfigurator's best 8-GPU aggregated configuration is {best['parallel']}: "
                     f"{best['requests_per_s']:.2f} requests/s.")  # fmt: skip
    if at_peer is not None and named is not None:
        run = at_peer
        lines.append(
            f"\nThe twin at AIConfigurator's {named['requests_per_s']:.2f} requests/s, {len(run.requests):,} requests: "
            f"{good_share(run, *PLAN_SLO) * 100:.1f}% of requests inside the SLO, mean TTFT "
            f"{fmt(run.mean_ttft_s * 1e3)} ms, mean TPOT {fmt(run.mean_tpot_s * 1e3)} ms, "
            f"{run.mean_running_requests:,.0f} running on average."
        )
    lines += step_lines(plan, named)
    return lines


def step_lines(plan: TwinPlan, named: dict | None) -> list[str]:
    """Where each side's TPOT goes. The twin at its capacity: its decode step at the mean running batch (context: the
    prompt and half the output) against the mean TPOT measured, the rest being prefill steps run ahead of decode;
    then that TPOT were the ranks without a prefill in an extend step to decode in it (SGLang's one scheduler per DP
    rank does; the twin's extend step holds every rank's decodes), from the same figures, one rank prefilling per
    extend step.
    AIConfigurator at its rate: the mixed and decode-only steps its answer counts, and how often its ranks' mixed
    steps come when they fall together, as its per-rank model times the DP size has them."""
    ranks = parse_server_args(list(PLAN_FLAGS)).dp_size
    extend = StepBatch(ForwardMode.EXTEND, (BatchItem(PLAN_ISL, 0),))
    extend_ms = step_ms(PLAN_FLAGS, extend)
    lines = []
    run = plan.at_capacity
    if run is not None:
        batch = max(1, round(run.mean_running_requests))
        decode_ms = step_ms(PLAN_FLAGS, _decode_batch(batch, ranks))
        tpot_ms = run.mean_tpot_s * 1e3
        decode_steps_s = 1e3 / tpot_ms  # each gives every running request a token
        extend_steps_s = max(0.0, 1.0 - decode_steps_s * decode_ms / 1e3) / (extend_ms / 1e3)  # the rest of the time
        per_rank_ms = 1e3 / (decode_steps_s + extend_steps_s * (ranks - 1) / ranks)
        lines.append(
            f"\nThe twin at its capacity: a decode step of {batch} requests {decode_ms:.1f} ms; an extend step of one "
            f"{PLAN_ISL}-token prompt {extend_ms:.1f} ms. Mean TPOT {tpot_ms:.1f} ms: {tpot_ms - decode_ms:.1f} ms a "
            f"token is prefill steps ({extend_steps_s:.2f} a second), run ahead of decode on all {ranks} ranks. Were "
            f"the {ranks - 1} ranks without the prefill to decode in those steps, as SGLang's per-rank schedulers do, "
            f"the mean TPOT would be about {per_rank_ms:.1f} ms (estimated from these figures)."
        )
    steps = None if named is None else named.get("steps")
    if named is not None and steps is not None:
        mixed_s = steps["mixed_steps"] * steps["mixed_step_ms"]
        share = mixed_s / (mixed_s + steps["decode_steps"] * steps["decode_step_ms"])
        prompts_per_step = steps["mixed_prompt_tokens"] / PLAN_ISL
        aligned_s = named["requests_per_s"] / ranks / prompts_per_step
        own_steps_s = named["requests_per_s"] * steps["mixed_step_ms"] / 1e3
        twin_decode_ms = step_ms(PLAN_FLAGS, _decode_batch(named["concurrency"], ranks))
        aligned = StepBatch(ForwardMode.EXTEND, tuple(BatchItem(PLAN_ISL, 0, rank=i) for i in range(ranks)))
        twin_aligned_ms = step_ms(PLAN_FLAGS, aligned)
        lines.append(
            f"\nAIConfigurator at its {named['requests_per_s']:.2f} requests/s: each request's life is "
            f"{steps['mixed_steps']:.0f} mixed steps of {steps['mixed_step_ms']:.1f} ms "
            f"({steps['mixed_prompt_tokens']:,.0f} prompt tokens and {steps['mixed_decode_requests']:.0f} running "
            f"requests' next tokens on each rank, one forward) and {steps['decode_steps']:.0f} decode-only steps of "
            f"{steps['decode_step_ms']:.1f} ms ({named['batch_per_rank']} a rank). The twin's: an extend step of one "
            f"prompt on each rank {twin_aligned_ms:.1f} ms, a decode step of {named['concurrency']} "
            f"{twin_decode_ms:.1f} ms. With the {ranks} ranks' mixed steps falling together, {aligned_s:.2f} a second, "
            f"they take {share * 100:.0f}% of the time; each prompt in a mixed step of its own, they would take "
            f"{own_steps_s:.2f} s a second."
        )
    return lines


def _decode_batch(requests: int, ranks: int) -> StepBatch:
    """A decode step of `requests` running requests, each at the prompt plus half its output, dealt round robin over
    the DP-attention ranks as SGLang's DataParallelController (and the twin's scheduler) deals them."""
    context = PLAN_ISL + PLAN_OSL // 2
    return StepBatch(ForwardMode.DECODE, tuple(BatchItem(1, context, rank=i % ranks) for i in range(requests)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aic-python", type=Path, help=f"AIConfigurator's Python (default {AIC_VENV_PYTHON})")
    parser.add_argument("--quick", action="store_true", help=f"points {', '.join(QUICK_KEYS)}; a shorter sweep")
    parser.add_argument("--target-rps", type=float, default=40.0, help="the plan's target rate (requests/s)")
    args = parser.parse_args(argv)
    aic_python = args.aic_python or AIC_VENV_PYTHON
    if not aic_python.exists():
        if args.aic_python is None:
            print(f"AIConfigurator's environment {AIC_VENV_PYTHON.relative_to(REPO)} is missing: "
                  "`make aiconfigurator-compare` builds it and runs this")  # fmt: skip
            return 0
        raise SystemExit(f"{aic_python}: no such interpreter")
    started = time.perf_counter()
    points = [p for p in POINTS if p.row in ROWS and p.gpus == 8 and p.hardware in AIC_SYSTEMS]
    if args.quick:
        points = [p for p in points if p.key in QUICK_KEYS]
    jobs = {p.key: estimate_job(p) for p in points}
    plan_job = {
        "system": "h200_sxm", "gpus": PLAN_GPUS, "isl": PLAN_ISL, "osl": PLAN_OSL, "ttft_ms": PLAN_SLO[0],
        "tpot_ms": PLAN_SLO[1], "target_rps": args.target_rps, "parallel": PLAN_PARALLEL,
    }  # fmt: skip
    peer_run = PeerRun.start(aic_python, {"estimates": list(jobs.values()), "plan": plan_job})
    measured = [measure(p) for p in points]
    print(f"Twin: {len(measured)} published points by {time.perf_counter() - started:.0f} s", file=sys.stderr)
    plan = twin_plan(args.quick)
    print(f"Twin: the plan's sweep by {time.perf_counter() - started:.0f} s", file=sys.stderr)
    peer = peer_run.result()
    print(f"AIConfigurator: answered by {time.perf_counter() - started:.0f} s", file=sys.stderr)
    answers = {a["key"]: a for a in peer["estimates"]}
    peer_plan = peer["plan"] or {}
    named = peer_plan.get("named")
    at_peer = None if args.quick or named is None else twin_at_peer_rate(named)
    versions = sorted({a["backend_version"] for a in peer["estimates"] if "backend_version" in a})
    print(f"AIConfigurator {peer['aiconfigurator']}, SGLang kernel timings of {', '.join(versions) or '-'}; "
          "model deepseek-ai/DeepSeek-R1 (FP8 block GEMMs and MoE, FP8 KV)")  # fmt: skip
    if args.quick:
        print(
            f"(--quick: points {', '.join(QUICK_KEYS)}; the plan's sweep on {PLAN_REQUESTS_QUICK} requests; "
            "no replay at AIConfigurator's rate)"
        )
    print("\n".join(points_table(measured, jobs, answers)))
    print("\n".join(plan_table(plan, peer_plan, at_peer, args.target_rps)))
    print(f"\n{time.perf_counter() - started:.0f} s in all", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
