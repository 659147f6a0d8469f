"""Calibration of the SGLang twin: every published point of published_points.py (the calibration rows
of docs/twin.md, "Profiles and sources"), run on the twin's engine in virtual time and measured as the
publisher measured it, printed as two tables: the fit set (the points bench/twin_fit.py fitted the
cost model's constants on: their ratios say how well the fit went, nothing about accuracy) and the
validation set (every other point: predictions). Each row gives the ratio twin / published of
throughput per GPU, mean TTFT and mean TPOT (and P99 TTFT where published), whichever the source
publishes; each table ends with its median error factor, exp(median |log ratio|), and its worst figure.
Each row also says how the benchmark sent its requests (closed loop at C, its prompt count, the warm-ups
sent first; reproduced by the twin) and the twin's mean TTFT of the measured run's first burst and of
every later request, which is where a closed-loop mean TTFT comes from.

    python bench/twin_calibration.py            # every point, as published (about a minute)
    python bench/twin_calibration.py --quick    # the cheap points only, same figures (a few seconds)

A third table checks the cookbook runs' P99 TTFT (the first burst of a cold server) and median TTFT,
which nothing was fitted on but the C = 100 run's P99 (Blackwell's fit set, marked). The disaggregated,
expert-parallel rows (4-6, 11, 12: one saturated phase each) get their own fit and validation tables, and row 5
is counted the three ways InferenceX counts such a deployment.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean, median

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from endpoints.sim.calibration.calibration_tables import QUICK_KEYS, TARGET, PointSet, run_calibration  # noqa: E402
from endpoints.sim.calibration.phase_bench import PhaseResult  # noqa: E402
from endpoints.sim.calibration.published_points import Measured, Metric  # noqa: E402
from endpoints.sim.cost import fitted_constants, fitted_ep_constants  # noqa: E402
from endpoints.sim.virtual_bench import BenchResult, random_requests, run_bench  # noqa: E402

# The cookbook page's runs with their published median / P99 TTFT (SGLang cookbook DeepSeek-R1.mdx,
# section 5.1.4): none of these was fitted on.


@dataclass(frozen=True, slots=True)
class CookbookRun:
    name: str
    input_len: int
    output_len: int
    concurrency: int
    prompts: int
    median_ttft_ms: float
    p99_ttft_ms: float
    p99_fitted: bool = False  # the Blackwell fit set holds it (point 3.c100): shown, not a check


COOKBOOK_RUNS = (
    CookbookRun("chat 1K/1K", 1000, 1000, 16, 80, 131.71, 839.57),
    CookbookRun("chat 1K/1K", 1000, 1000, 100, 500, 147.62, 2632.11, p99_fitted=True),
    CookbookRun("reasoning 1K/8K (later, warm server)", 1000, 8000, 64, 320, 158.15, 474.86),
    CookbookRun("summarization 8K/1K", 8000, 1000, 16, 80, 189.59, 2138.73),
)
# SGLang's bench_serving sends one warm-up request before it measures (--warmup-requests, default 1).
SGLANG_BENCH_WARMUPS = 1
# --quick runs calibration_tables.QUICK_KEYS only (each as published), and the first cookbook check: the same
# figures the full run prints for them, in a few seconds.
B200_R1 = ["--model-path", "deepseek-ai/DeepSeek-R1-0528", "--tp", "8", "--sim-hardware", "b200"]


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"


SINGLE_METRICS = (Metric.THROUGHPUT, Metric.TTFT, Metric.TPOT, Metric.P99_TTFT)
PD_METRICS = (Metric.THROUGHPUT, Metric.TPOT, Metric.MEDIAN_TTFT, Metric.MEDIAN_TPOT)


def _cells(m: Measured, metrics: tuple[Metric, ...] = SINGLE_METRICS) -> list[str]:
    cells = []
    for metric in metrics:
        if metric in m.point.published:
            cells.append(f"{_fmt(m.point.published[metric])} / {_fmt(m.values[metric])} = {m.ratio(metric):.2f}")
        else:
            cells.append("-")
    return cells


def _burst_and_rest(result: BenchResult | PhaseResult) -> str:
    """The twin's mean TTFT of the measured run's first burst and of every later request: where it comes from
    (a saturated phase: its step instead)."""
    if isinstance(result, PhaseResult):
        return (
            f"step of {result.batch_requests:,} requests, {result.step_tokens:,} tokens: {result.step_s * 1e3:,.0f} ms"
        )
    burst = result.first_wave_ttft_s
    start_s = min(r.sent_s for r in result.requests)
    rest = [r.ttft_s for r in result.requests if r.sent_s > start_s]
    return f"{fmean(burst) * 1e3:,.0f} / {fmean(rest) * 1e3:,.0f}" if rest else f"{fmean(burst) * 1e3:,.0f} / -"


def _table(title: str, measured: list[Measured]) -> list[str]:
    lines = [
        f"\n{title}\n",
        "| point | setup | arrivals | throughput/GPU pub / twin = ratio | mean TTFT ms | mean TPOT ms | P99 TTFT ms "
        "| twin TTFT ms: first burst / rest |",
        "|---|---|---|---|---|---|---|---|",
    ]
    logs: list[tuple[float, str]] = []
    for m in measured:
        kind = m.point.throughput_kind.value
        cells = " | ".join(_cells(m))
        lines.append(
            f"| {m.point.key} | {m.point.setup} ({kind} tok/s) | {m.point.workload.arrivals} | {cells} "
            f"| {_burst_and_rest(m.result)} |"
        )
        logs += [(math.log(m.ratio(mt)), f"{m.point.key} {mt.value}") for mt in m.point.published if mt in TARGET]
    if logs:
        factor = math.exp(median(abs(x) for x, _ in logs))
        worst_log, worst = max(logs, key=lambda t: abs(t[0]))
        within = sum(1 for x, _ in logs if 0.75 <= math.exp(x) <= 1.33)
        lines.append(
            f"\n{len(logs)} figures (throughput, mean TTFT, mean TPOT): median error factor {factor:.3f}; "
            f"worst {worst} ({math.exp(worst_log):.2f}); "
            f"{within}/{len(logs)} within 0.75-1.33"
        )
    return lines


def _pd_table(title: str, measured: list[Measured]) -> list[str]:
    """Whole disaggregated fleets driven closed loop (rows 14-17), with the twin's per-GPU throughput counted the
    three ways InferenceX counts such a fleet, and its mean TTFT (none of these rows publishes one)."""
    lines = [
        f"\n{title}\n",
        "| point | setup | arrivals | throughput/GPU pub / twin = ratio | mean TPOT ms | median TTFT ms "
        "| median TPOT ms | twin tok/s per GPU: input ÷ prefill GPUs / output ÷ decode GPUs / total ÷ all GPUs "
        "| twin mean TTFT ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    logs: list[float] = []
    for m in measured:
        assert m.point.fleet is not None and not isinstance(m.result, PhaseResult)
        result = m.result
        prefill_gpus, decode_gpus = m.point.fleet.role_gpus()
        inputs = sum(r.prompt_tokens for r in result.requests) / result.duration_s
        outputs = result.output_tok_s
        ways = f"{inputs / prefill_gpus:,.0f} / {outputs / decode_gpus:,.0f} / {result.total_tok_s / m.point.gpus:,.0f}"
        lines.append(
            f"| {m.point.key} | {m.point.setup} ({m.point.throughput_kind.value} tok/s) | {m.point.workload.arrivals} "
            f"| {' | '.join(_cells(m, PD_METRICS))} | {ways} | {result.mean_ttft_s * 1e3:,.0f} |"
        )
        logs += [math.log(m.ratio(mt)) for mt in m.point.published if mt in TARGET]
    if logs:
        within = sum(1 for x in logs if 0.75 <= math.exp(x) <= 1.33)
        lines.append(f"\n{len(logs)} figures: median error factor {math.exp(median(abs(x) for x in logs)):.3f}; "
                     f"{within}/{len(logs)} within 0.75-1.33")  # fmt: skip
    return lines


def _unfitted_checks(quick: bool) -> list[str]:
    lines = [
        "\nNot fitted on: the cookbook runs' P99 TTFT (a cold server's first burst) and median TTFT\n",
        "| run | P99 TTFT ms pub / twin | median TTFT ms pub / twin |",
        "|---|---|---|",
    ]
    for run in COOKBOOK_RUNS[:1] if quick else COOKBOOK_RUNS:
        prompts = run.prompts
        flags = B200_R1 + ([] if "warm" in run.name else ["--sim-cold-start"])
        requests = random_requests(prompts, run.input_len, run.output_len, 0.0, seed=run.concurrency)
        result = run_bench(flags, requests, run.concurrency, warmups=SGLANG_BENCH_WARMUPS)
        p99, med = result.p99_ttft_s * 1e3, result.median_ttft_s * 1e3
        fitted = " (fitted)" if run.p99_fitted else ""
        lines.append(
            f"| 8×B200 cookbook {run.name}, C={run.concurrency}, {prompts} prompts "
            f"| {run.p99_ttft_ms:,.0f} / {p99:,.0f} = {p99 / run.p99_ttft_ms:.2f}{fitted} "
            f"| {run.median_ttft_ms:,.0f} / {med:,.0f} = {med / run.median_ttft_ms:.2f} |"
        )
    return lines


def _phase(m: Measured) -> bool:
    return isinstance(m.result, PhaseResult)


def _fleet(m: Measured) -> bool:
    return m.point.fleet is not None


def _three_ways(measured: list[Measured]) -> list[str]:
    """Row 5 counted the three ways InferenceX counts a disaggregated deployment: input over the prefill GPUs and
    output over the decode GPUs (as published), and total over all 96 GPUs (derived from those two)."""
    by_key = {m.point.key: m for m in measured}
    if not {"5.prefill", "5.decode"} <= set(by_key):
        return []
    prefill, decode = by_key["5.prefill"], by_key["5.decode"]
    gpus = prefill.point.gpus + decode.point.gpus

    def ways(pick) -> tuple[float, float, float]:
        inp, out = pick(prefill), pick(decode)
        # Steady state: the decode side emits what the prefill side admits, so the slower side sets both rates.
        requests_s = min(inp * prefill.point.gpus / 2000, out * decode.point.gpus / 2000)
        return inp, out, requests_s * 2000 * 2 / gpus

    pub = ways(lambda m: m.point.published[Metric.THROUGHPUT])
    twin = ways(lambda m: m.values[Metric.THROUGHPUT])
    return [
        "\nRow 5 counted three ways (tokens/s per GPU; total assumes as many output as input tokens a request, as the "
        "blog's 2,000-token runs do not say)\n",
        "| count | published | twin | ratio |",
        "|---|---|---|---|",
        *(f"| {name} | {p:,.0f} | {t:,.0f} | {t / p:.2f} |" for name, p, t in zip(
            ("input ÷ prefill GPUs (24)", "output ÷ decode GPUs (72)", f"total ÷ all GPUs ({gpus})"), pub, twin)),
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the cheap points only")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    run = run_calibration(PointSet.QUICK if args.quick else PointSet.FULL)
    fit, validation = list(run.fit), list(run.validation)
    print(f"Constants fitted {fitted_constants.FIT_DATE} on {', '.join(fitted_constants.FIT_SET)}; SGLang versions:")
    for vendor, values in fitted_constants.FITTED.items():
        print(f"  {vendor}: {values['sglang_version']}")
    if args.quick:
        print(f"(--quick: only {', '.join(QUICK_KEYS)}, as the full run gives them)")
    single = (
        [m for m in fit if not _phase(m) and not _fleet(m)],
        [m for m in validation if not _phase(m) and not _fleet(m)],
    )
    print("\n".join(_table("Fit set (fitted: not predictions)", single[0])))
    print("\n".join(_table("Validation set (predictions)", single[1])))
    large = [m for m in fit if _phase(m)], [m for m in validation if _phase(m)]
    if large[0] or large[1]:
        print(
            f"\nDisaggregated, expert-parallel rows: the expert exchange fitted {fitted_ep_constants.FIT_DATE} on "
            f"{', '.join(fitted_ep_constants.FIT_SET)} ({fitted_ep_constants.FITTED_EP}), the rest as above"
        )
        print("\n".join(_table("Fit set, disaggregated and expert-parallel (fitted: not predictions)", large[0])))
        print("\n".join(_table("Validation set, disaggregated and expert-parallel (predictions)", large[1])))
        print("\n".join(_three_ways(large[1])))
    fleets = [m for m in fit if _fleet(m)], [m for m in validation if _fleet(m)]
    if fleets[0]:
        print("\n".join(_pd_table("Fit set, whole disaggregated fleets (fitted: not predictions)", fleets[0])))
    if fleets[1]:
        print("\n".join(_pd_table("Validation set, whole disaggregated fleets, closed loop (predictions)", fleets[1])))
    for point, why in run.not_modelled:
        print(f"\n{point.key} ({point.setup}): not modelled yet ({why})")
    print("\nNot modelled: row 12's FP8-attention + NVFP4-MoE variant and row 13 (NVFP4 MoE weights).")
    print("\n".join(_unfitted_checks(args.quick)))
    print(f"\n(wall time {time.perf_counter() - started:.1f} s{', --quick' if args.quick else ''})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
