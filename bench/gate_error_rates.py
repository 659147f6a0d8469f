"""The weekly regression gate's false-alarm and miss rates, measured on simulated years of seeded twin canaries.

1. Pool: M seeded runs of each bundled canary scenario (workloads/scenarios.yaml, role canary), replayed on the
   twin on a virtual clock with `--sim-run-seed i` and swept for its capacity as it ran (bench/gate_pool.py), cached
   under --pool-dir. Their spread (CV of the efficiency cost per request and p95 TTFT, sd of the hit rate, from
   run_summary) is the run-to-run variation the
   gate has to see through.
2. Years: per scenario and year, an A/A series (no change) and one series per injected change (efficiency cost per
   request +5/+10/+20%: the run's capacity lowered, its latency at the replayed rate kept; p95 TTFT +10/+20/+40%;
   prefix-cache hit rate -5/-10/-20 points; bench/gate_changes.py), each 52
   Mondays from 2025-01-06 of k runs drawn with replacement from the pool, the change made from a random week in
   12..49 on (--inject-week fixes it). Each series is judged in a fresh lake by the warehouse's own refresh
   (run_summary, cost_intervals, weekly_trends.sql's regression_verdict), first regressions confirmed by a rerun
   of the week as the pipeline's sensor does (bench/gate_years.py).
3. Table: false notices per scenario-year, the share of each change detected in its week and within two weeks,
   against the issue's targets (bench/gate_tally.py).

    .venv/bin/python bench/gate_error_rates.py --quick   # one scenario, 3-run pool, one year: a smoke run
    .venv/bin/python bench/gate_error_rates.py           # every canary, 16-run pool, one year: ~6 min cached
    .venv/bin/python bench/gate_error_rates.py --years 3 # the table for docs: ~20 min on 2 cores

Cost: a series is 2-3 warehouse refreshes of a 52-week lake (the year's, and one per confirmation), ~8-15 s of
CPU each, most of it the real block bootstrap (warehouse/marts/bootstrap_interval.py); a pool run is 10-20 s of
CPU, paid once. Year y of a given --seed is the same series whatever --years says, so runs with more years extend
runs with fewer.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import gate_tally as tally  # noqa: E402
from gate_changes import CHANGES, THRESHOLDS, Metric  # noqa: E402
from gate_pool import POOL_WEEK, canary_scenarios, ensure_pool, read_pool  # noqa: E402
from gate_years import RunSource, SeriesOutcome, SeriesPlan, judge_batch, plan_series, variant_sources  # noqa: E402

VERDICT_MARKS = {"ok": ".", "no_baseline": "_", "within_noise": "n", "regression": "R", "sustained": "S", "drift": "d"}


@dataclass(frozen=True, slots=True)
class Settings:
    scenarios: tuple[str, ...]
    pool_size: int
    years: int
    runs_per_week: int
    seed: int
    inject_week: int | None  # None: a random week per series
    pool_dir: Path
    workers: int
    show_series: bool


def _judge_job(
    job: tuple[Path, int, tuple[SeriesPlan, ...], int],
) -> tuple[list[SeriesOutcome], int, tuple[float, float, float] | None]:
    """One worker's share: the series of one scenario, each in its own fresh lake (thresholds: None without plans)."""
    folder, pool_size, plans, runs_per_week = job
    pool = [RunSource(r.runs, r.requests) for r in read_pool(folder, pool_size)]
    changes = sorted({p.change for p in plans if p.change is not None}, key=CHANGES.index)
    sources: dict[tuple[str, str], Sequence[RunSource]] = {
        (plans[0].scenario, k): v for k, v in variant_sources(pool, changes).items()
    }
    outcomes, refreshes, thresholds = [], 0, None
    for plan in plans:
        [outcome], n, thresholds = judge_batch([plan], sources, runs_per_week, {plan.scenario: pool_size}, _quiet)
        outcomes.append(outcome)
        refreshes += n
    return outcomes, refreshes, thresholds


def _quiet(*_args) -> None:
    pass


def pool_spread(folders: dict[str, Path], size: int) -> dict[str, dict[str, float]]:
    """Per scenario, the pool's runs through run_summary (each run its own week): mean and spread of each metric."""
    from statistics import mean, stdev

    from gate_years import relabelled, week_start

    from warehouse.backends.store import Warehouse

    out = {}
    with tempfile.TemporaryDirectory(prefix="gate-spread-") as tmp:
        store = Warehouse(Path(tmp))
        for scenario, folder in folders.items():
            for r in read_pool(folder, size):
                source = RunSource(r.runs, r.requests)
                runs, requests = relabelled(
                    source, f"spread-{scenario}-{r.seed}", f"{scenario}.pool", week_start(r.seed)
                )
                store.write_partition("runs", week_start(r.seed), f"{scenario}.pool", runs)
                store.write_partition("requests", week_start(r.seed), f"{scenario}.pool", requests)
        store.refresh()
        rows = store.run_summary()
    for scenario in folders:
        mine = [r for r in rows if r.scenario == f"{scenario}.pool"]
        cost = _known([r.efficiency_cost_per_request_usd for r in mine], "cost")  # the judged cost: its own sweep
        ttft = _known([r.p95_ttft_ms for r in mine], "p95 TTFT")
        hit = _known([r.prefix_cache_hit_rate for r in mine], "hit rate")
        spread = {"runs": len(mine), "cost": mean(cost), "ttft": mean(ttft), "hit": mean(hit)}
        if len(mine) > 1:
            spread |= {"cost_cv": stdev(cost) / mean(cost), "ttft_cv": stdev(ttft) / mean(ttft), "hit_sd": stdev(hit)}
        out[scenario] = spread
    return out


def _known(values: list[float | None], metric: str) -> list[float]:
    """`values`, none of them missing: run_summary has every metric of a pool run (each completes requests)."""
    known = [v for v in values if v is not None]
    if len(known) < len(values):
        raise SystemExit(f"a pool run has no {metric} in run_summary")
    return known


def run(settings: Settings) -> int:
    started = time.monotonic()
    scenarios_path, endpoints_path = REPO / "workloads/scenarios.yaml", REPO / "workloads/endpoints.yaml"
    folders = ensure_pool(
        list(settings.scenarios),
        settings.pool_size,
        settings.pool_dir,
        scenarios_path,
        endpoints_path,
        settings.workers,
    )
    pool_s = time.monotonic() - started
    spread = pool_spread(folders, settings.pool_size)
    plans = [
        plan_series(
            scenario, year, change, settings.pool_size, settings.runs_per_week, settings.seed, settings.inject_week
        )
        for scenario in settings.scenarios
        for year in range(settings.years)
        for change in (None, *CHANGES)
    ]
    # Jobs of a few series each, so both workers stay busy to the end.
    jobs = []
    for scenario in settings.scenarios:
        mine = [p for p in plans if p.scenario == scenario]
        for i in range(0, len(mine), 5):
            jobs.append((folders[scenario], settings.pool_size, tuple(mine[i : i + 5]), settings.runs_per_week))
    print(
        f"judging {len(plans)} series (52 weeks x {settings.runs_per_week} runs each) in {settings.workers} processes",
        flush=True,
    )
    outcomes: list[SeriesOutcome] = []
    refreshes, thresholds = 0, None
    with ProcessPoolExecutor(max_workers=settings.workers) as pool:
        for done, (judged, n, mart_thresholds) in enumerate(pool.map(_judge_job, jobs), start=1):
            outcomes.extend(judged)
            refreshes += n
            thresholds = mart_thresholds
            print(f"  [{done}/{len(jobs)}] {judged[0].plan.label} .. {judged[-1].plan.label}", flush=True)
    expected = (THRESHOLDS[Metric.COST], THRESHOLDS[Metric.P95_TTFT], -THRESHOLDS[Metric.HIT_RATE])
    if thresholds is not None and tuple(thresholds) != expected:
        raise SystemExit(
            f"weekly_trends.sql's thresholds {thresholds} are not the bench's {expected}: update gate_changes"
        )
    elapsed_s = time.monotonic() - started
    print_report(settings, outcomes, spread, thresholds, refreshes, pool_s, elapsed_s)
    return 0


def _fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def print_report(settings, outcomes, spread, thresholds, refreshes, pool_s, elapsed_s) -> None:
    today = datetime.now(timezone.utc).date().isoformat()
    p = print
    p()
    p(f"## The regression gate's error rates ({today})")
    p()
    p(
        f"settings: pool {settings.pool_size} seeded twin runs per scenario "
        f"(--sim-run-seed 0..{settings.pool_size - 1}, replayed under week {POOL_WEEK}), "
        f"{settings.years} year(s) per scenario and variant, k = "
        f"{settings.runs_per_week} runs a week drawn with replacement, seed {settings.seed}, injection week "
        f"{'random in 12..49' if settings.inject_week is None else settings.inject_week}; "
        f"{len(outcomes)} series, {refreshes} warehouse refreshes; {elapsed_s:.0f} s wall ({pool_s:.0f} s pool)"
    )
    cost, ttft, hit = thresholds if thresholds else (None, None, None)
    p(
        f"thresholds (weekly_trends.sql): efficiency cost per request +{_fmt(cost, 'g')}%, "
        f"p95 TTFT +{_fmt(ttft, 'g')}%, hit rate {_fmt(hit, 'g')} points, each also outside the week's 95% interval"
    )
    p()
    p("### Run-to-run spread of the pool (run_summary of each pool run)")
    p()
    p("| scenario | runs | efficiency cost/request (USD) | CV | p95 TTFT (ms) | CV | hit rate | sd (points) |")
    p("|---|---|---|---|---|---|---|---|")
    for scenario, s in spread.items():
        hit_sd = 100 * s["hit_sd"] if "hit_sd" in s else None
        p(
            f"| {scenario} | {s['runs']} | {s['cost']:.6f} | {_fmt(s.get('cost_cv'), '.2%')} | {s['ttft']:.0f} | "
            f"{_fmt(s.get('ttft_cv'), '.2%')} | {s['hit']:.3f} | {_fmt(hit_sd, '.2f')} |"
        )
    noise = tally.aa_noise(outcomes)
    if noise:
        p()
        p(
            "A/A weeks against their baseline (99th percentile / largest, in the rule's direction): "
            + "; ".join(
                f"{name} {q:+.1f} / {top:+.1f}{' pts' if name == 'hit' else '%'}" for name, (q, top) in noise.items()
            )
        )
    p()
    p("### False notices")
    p()
    p(
        "| scenario | A/A years | A/A notices | per scenario-year | pre-injection notices | per 52 exposed weeks | "
        "off-metric notices after injection | confirmations (not borne out) |"
    )
    p("|---|---|---|---|---|---|---|---|")
    for scenario in (*settings.scenarios, None):
        mine = [o for o in outcomes if scenario is None or o.plan.scenario == scenario]
        aa = [o for o in mine if o.plan.change is None]
        injected = [o for o in mine if o.plan.change is not None]
        aa_false = sum(len(o.notices) for o in aa)
        pre = [tally.false_notices(o) for o in injected]
        pre_false, pre_weeks, after = sum(x[0] for x in pre), sum(x[1] for x in pre), sum(x[2] for x in pre)
        confirmations = sum(o.confirmations for o in mine)
        unconfirmed = sum(o.unconfirmed for o in mine)
        p(
            f"| {scenario or 'all'} | {len(aa)} | {aa_false} | {_fmt(aa_false / len(aa) if aa else None, '.2f')} | "
            f"{pre_false} | {_fmt(52 * pre_false / pre_weeks if pre_weeks else None, '.2f')} | {after} | "
            f"{confirmations} ({unconfirmed}) |"
        )
    p()
    p("### Injected changes detected (a notice naming the metric; share [95% Wilson interval])")
    p()
    p("| change | x threshold | median realised change | in the week | within two weeks | within four weeks |")
    p("|---|---|---|---|---|---|")
    for change in CHANGES:
        realised = tally.realised_change(outcomes, change)
        unit = "" if realised is None else " pts" if change.metric is Metric.HIT_RATE else "%"
        p(
            f"| {change.label} | {change.times_threshold:g} | {_fmt(realised, '+.1f')}{unit} | "
            f"{tally.detection(outcomes, change, 1).text()} | {tally.detection(outcomes, change, 2).text()} | "
            f"{tally.detection(outcomes, change, 4).text()} |"
        )
    if len(settings.scenarios) > 1:
        p()
        p(
            "per scenario, within two weeks: "
            + "; ".join(
                f"{s}: "
                + ", ".join(f"{c.slug} {_fmt(tally.detection(outcomes, c, 2, s).value, '.0%')}" for c in CHANGES)
                for s in settings.scenarios
            )
        )
    p()
    p("### Against the issue's targets")
    p()
    for target in tally.targets(outcomes, settings.scenarios):
        verdict = "n/a" if target.passed is None else "PASS" if target.passed else "FAIL"
        p(f"- {verdict}: {target.text}: {target.measured}")
    p(f"- reference, not our result: {tally.PERFHERDER}")
    if settings.show_series:
        p()
        p("series (week by week: . ok, _ no baseline, n within noise, R regression, S sustained, d drift, ? other;")
        p("| marks the injection week; notices as week:kind:metrics)")
        for o in outcomes:
            strip = "".join(VERDICT_MARKS.get(v, "?") for v in o.verdicts)
            if o.plan.injection_week is not None:
                strip = strip[: o.plan.injection_week] + "|" + strip[o.plan.injection_week :]
            notices = " ".join(f"{n.week}:{n.kind.value}:{','.join(n.metrics) or '-'}" for n in o.notices)
            p(f"  {o.plan.label:48s} {strip}  {notices}")
    counts = tally.verdict_counts(outcomes)
    p()
    p("verdicts seen (final, every series week): " + ", ".join(f"{v} {n}" for v, n in sorted(counts.items())))


def _quick_defaults(args: argparse.Namespace, canaries: list[str]) -> None:
    if args.quick:
        args.pool = args.pool or 3
        args.years = args.years or 1
        args.scenarios = args.scenarios or canaries[:1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a smoke run: one scenario, a 3-run pool, one year")
    parser.add_argument("--pool", type=int, default=None, help="seeded twin runs per scenario (default 16)")
    parser.add_argument("--pool-dir", type=Path, default=Path(tempfile.gettempdir()) / "costbench-gate-pool")
    parser.add_argument("--years", type=int, default=None, help="simulated years per scenario and variant (default 1)")
    parser.add_argument("--runs-per-week", type=int, default=2, help="k, the canary's runs a week (default 2)")
    parser.add_argument("--seed", type=int, default=27, help="the draws' seed")
    parser.add_argument(
        "--inject-week", type=int, default=None, help="0-based week of every injection (default random)"
    )
    parser.add_argument("--scenario", dest="scenarios", action="append", help="a canary scenario (default: all)")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--show-series", action="store_true", help="print every series' verdicts week by week")
    args = parser.parse_args(argv)
    canaries = canary_scenarios(REPO / "workloads/scenarios.yaml", REPO / "workloads/endpoints.yaml")
    _quick_defaults(args, canaries)
    unknown = sorted(set(args.scenarios or ()) - set(canaries))
    if unknown:
        parser.error(f"not canary scenarios: {unknown} (canaries: {canaries})")
    if args.inject_week is not None and not 1 <= args.inject_week <= 50:
        parser.error("--inject-week must be in 1..50 (the week after it must exist)")
    settings = Settings(
        scenarios=tuple(args.scenarios or canaries),
        pool_size=args.pool or 16,
        years=args.years or 1,
        runs_per_week=args.runs_per_week,
        seed=args.seed,
        inject_week=args.inject_week,
        pool_dir=args.pool_dir,
        workers=args.workers,
        show_series=args.show_series,
    )
    return run(settings)


if __name__ == "__main__":
    sys.exit(main())
