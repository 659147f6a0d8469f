"""Where a first run's time goes: the demo's runs step by step, and what a fresh process pays to import.

    python bench/first_run.py                       # the last `make demo` (.dagster_home)
    python bench/first_run.py --dagster-home DIR    # any instance the weekly job ran in

Part 1 reads the instance's event log (nothing is re-run): for each run, the seconds it waited in the run
queue, the seconds its run worker took from being launched to its first event, then each step's wall seconds in
groups (replay, capacity sweep, lake writes, quality checks, marts, report), and the totals over all runs.
Part 2 starts a fresh interpreter per import, as a run worker does, and prints the best of three wall
times for each heavy import; with --skip-imports it is left out.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GROUPS = (  # (group, step key test), first match wins
    ("replay", lambda k: k.startswith("replay_run.") and "replay_shard" in k),
    ("capacity sweep", lambda k: k.endswith("measure_capacity")),
    ("endpoint start/stop", lambda k: k.startswith("replay_run.")),
    ("quality checks", lambda k: "_quality" in k or k.endswith(("_intact", "_cost_regression", "_output"))),
    ("lake writes", lambda k: k.endswith("_lake")),
    ("marts", lambda k: k == "weekly_trends"),
    ("report", lambda k: k == "weekly_report"),
    ("workload", lambda k: k == "workload"),
)
IMPORTS = ("dagster", "great_expectations", "matplotlib.pyplot", "pandas", "duckdb", "pipelines.definitions")


def _group(step_key: str) -> str:
    return next((name for name, test in GROUPS if test(step_key)), "other")


def run_breakdown(dagster_home: Path) -> None:
    os.environ["DAGSTER_HOME"] = str(dagster_home)
    import dagster as dg

    with dg.DagsterInstance.get() as instance:
        records = sorted(instance.get_run_records(limit=200), key=lambda r: r.create_timestamp)
        if not records:
            raise SystemExit(f"{dagster_home}: no runs (run `make demo` first)")
        t0 = records[0].create_timestamp.timestamp()
        totals: dict[str, float] = defaultdict(float)
        start_up = []
        print(f"{'run (partition)':46s} {'queued s':>8s} {'worker start s':>14s} {'run s':>6s}   largest steps (s)")
        for record in records:
            run = record.dagster_run
            steps: dict[str, dict[str, float]] = defaultdict(dict)
            marks: dict[str, float] = {}
            for entry in instance.all_logs(run.run_id):
                event = entry.dagster_event
                if event is None:
                    continue
                kind = event.event_type
                if event.step_key and kind in (dg.DagsterEventType.STEP_START, dg.DagsterEventType.STEP_SUCCESS):
                    steps[event.step_key][kind.name] = entry.timestamp
                elif kind in (dg.DagsterEventType.RUN_STARTING, dg.DagsterEventType.RUN_START):
                    marks.setdefault(kind.name, entry.timestamp)
            created_s = record.create_timestamp.timestamp()
            queued_s = marks.get("RUN_STARTING", created_s) - created_s
            worker_s = marks.get("RUN_START", created_s) - marks.get("RUN_STARTING", created_s)
            run_s = (record.end_time or 0) - (record.start_time or 0)
            by_group: dict[str, float] = defaultdict(float)
            for key, marks in steps.items():
                if "STEP_START" in marks and "STEP_SUCCESS" in marks:
                    by_group[_group(key)] += marks["STEP_SUCCESS"] - marks["STEP_START"]
            by_group["between steps"] = run_s - sum(by_group.values())
            for name, seconds in by_group.items():
                totals[name] += seconds
            start_up.append(worker_s)
            top = ", ".join(f"{n} {s:.1f}" for n, s in sorted(by_group.items(), key=lambda x: -x[1])[:4])
            name = run.tags.get("dagster/partition", run.run_id[:8])
            print(f"{name:46s} {queued_s:8.1f} {worker_s:14.1f} {run_s:6.1f}   {top}")
        wall_s = max(r.end_time or 0 for r in records) - t0
        busy_s = sum(totals.values())
        print(
            f"\n{len(records)} runs, {wall_s:.0f} s from the first submission to the last run's end; "
            "run seconds by group:"
        )
        for name, seconds in sorted(totals.items(), key=lambda x: -x[1]):
            print(f"  {name:22s} {seconds:7.1f} s  {100 * seconds / busy_s:5.1f}%")
        print(f"  {'(all runs)':22s} {busy_s:7.1f} s  (two at a time on 2 cores: about {busy_s / 2:.0f} s of wall)")
        print(
            f"run worker start-up (launched -> its first event): median {sorted(start_up)[len(start_up) // 2]:.1f} s, "
            f"{sum(start_up):.0f} s over all runs"
        )


def import_costs() -> None:
    print("\nA fresh interpreter importing (best of 3, wall s):")
    for module in IMPORTS:
        best = min(_timed_import(module) for _ in range(3))
        print(f"  {module:24s} {best:5.2f}")


def _timed_import(module: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", f"import {module}"], cwd=REPO, check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dagster-home", type=Path, default=REPO / ".dagster_home")
    parser.add_argument("--skip-imports", action="store_true")
    args = parser.parse_args()
    run_breakdown(args.dagster_home.resolve())
    if not args.skip_imports:
        import_costs()


if __name__ == "__main__":
    main()
