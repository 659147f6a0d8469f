"""`costbench demo`: the weekly job on the embedded default (twin + bundled traces), end to end.

Materializes the weekly job for the last complete weeks x every scenario in a real Dagster instance,
then prints the weekly trend table, the check verdicts and where the results are.
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import dagster as dg

from pipelines.definitions import WEEKLY_JOB, build_definitions
from pipelines.resources import REPO_ROOT
from pipelines.trend_console import print_check_verdicts, print_weekly_trends
from warehouse.store import Warehouse
from workloads.scenarios import load_scenarios


def last_complete_weeks(today: date, count: int) -> list[date]:
    """Mondays of the `count` most recent weeks that have ended, oldest first."""
    this_monday = today - timedelta(days=today.weekday())
    return [this_monday - timedelta(weeks=n) for n in range(count, 0, -1)]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("demo", help="run the weekly job on the twin and the bundled traces")
    parser.add_argument("--weeks", type=int, default=3, help="how many past weeks to materialize (default 3)")
    parser.add_argument("--warehouse", type=Path, default=REPO_ROOT / "warehouse", help="warehouse root")
    parser.add_argument(
        "--dagster-home", type=Path, default=None,
        help="Dagster instance folder (default: $DAGSTER_HOME, else .dagster_home/ in the repo)",
    )
    parser.set_defaults(func=run)


def _instance(home: Path) -> dg.DagsterInstance:
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists():
        shutil.copy(REPO_ROOT / "dagster.yaml", home / "dagster.yaml")
    os.environ["DAGSTER_HOME"] = str(home.resolve())
    return dg.DagsterInstance.get()


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    home = args.dagster_home or Path(os.environ.get("DAGSTER_HOME") or REPO_ROOT / ".dagster_home")
    instance = _instance(home)
    scenarios_path = REPO_ROOT / "workloads" / "scenarios.yaml"
    defs = build_definitions(scenarios_path=scenarios_path, warehouse_root=args.warehouse)
    job = defs.resolve_job_def(WEEKLY_JOB)
    weeks = last_complete_weeks(datetime.now(timezone.utc).date(), args.weeks)
    scenarios = sorted(load_scenarios(scenarios_path, REPO_ROOT))
    verdicts: list[tuple[str, str, str, bool, str]] = []
    for week in weeks:
        for scenario in scenarios:
            key = dg.MultiPartitionKey({"week": week.isoformat(), "scenario": scenario})
            print(f"materializing week {week} x {scenario} ...", flush=True)
            result = job.execute_in_process(partition_key=key, instance=instance, raise_on_error=False)
            if not result.success:
                print(f"  run {result.run_id} failed; see the Dagster UI (DAGSTER_HOME={home})")
            for evaluation in result.get_asset_check_evaluations():
                verdicts.append(
                    (week.isoformat(), scenario, evaluation.check_name, evaluation.passed, evaluation.severity.value)
                )
    store = Warehouse(args.warehouse)
    print_weekly_trends(store.weekly_trends())
    print_check_verdicts(verdicts)
    print(f"DuckDB warehouse: {store.db_path}")
    print(f"Parquet lake:     {store.lake_root}")
    print(f"Dagster instance: {home}  (open the UI with `make dagster`)")
    print(f"demo finished in {time.monotonic() - started:.0f} s")
    failed_runs = not store.weekly_trends()
    return 1 if failed_runs else 0
