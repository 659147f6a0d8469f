"""`costbench demo`: the weekly job on the embedded default (twin + bundled traces), end to end.

Materializes the weekly job for the last complete weeks x every scenario in a real Dagster instance,
then prints the weekly trend table, the check verdicts and where the results are. Each endpoint gets
its own child process (as the run queue allows one replay per endpoint at a time), so scenarios on
different endpoints replay in parallel; weeks run in order.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import dagster as dg
import orjson

from pipelines.definitions import WEEKLY_JOB, build_definitions
from pipelines.demo_story import STORY_ENDPOINT, STORY_NOTE, story_endpoints
from pipelines.resources import REPO_ROOT
from pipelines.trend_console import print_check_verdicts, print_regression_verdicts, print_weekly_trends
from warehouse.store import Warehouse
from workloads.scenarios import load_scenarios

SCENARIOS_PATH = REPO_ROOT / "workloads" / "scenarios.yaml"
ENDPOINTS_PATH = REPO_ROOT / "workloads" / "endpoints.yaml"
# Dagster's own step logs stay in the instance (and the UI); the console shows progress and results.
QUIET_RUN_CONFIG = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def last_complete_weeks(today: date, count: int) -> list[date]:
    """Mondays of the `count` most recent weeks that have ended, oldest first."""
    this_monday = today - timedelta(days=today.weekday())
    return [this_monday - timedelta(weeks=n) for n in range(count, 0, -1)]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("demo", help="run the weekly job on the twin and the bundled traces")
    parser.add_argument("--weeks", type=int, default=4, help="how many past weeks to materialize (default 4)")
    parser.add_argument("--warehouse", type=Path, default=REPO_ROOT / "warehouse", help="warehouse root")
    parser.add_argument(
        "--dagster-home", type=Path, default=None,
        help="Dagster instance folder (default: $DAGSTER_HOME, else .dagster_home/ in the repo)",
    )
    parser.add_argument("--parallel", type=int, default=4, help="endpoints replayed at once (default 4)")
    # Internal: a child process materializes these scenarios and writes their check verdicts here.
    parser.add_argument("--scenario", action="append", help=argparse.SUPPRESS)
    parser.add_argument("--verdicts-file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--endpoints", type=Path, help=argparse.SUPPRESS)
    parser.set_defaults(func=run)


def _instance(home: Path) -> dg.DagsterInstance:
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists():
        shutil.copy(REPO_ROOT / "dagster.yaml", home / "dagster.yaml")
    os.environ["DAGSTER_HOME"] = str(home.resolve())
    return dg.DagsterInstance.get()


def _materialize_scenario(scenario: str, weeks: list[date], warehouse: Path, home: Path, endpoints: Path) -> list[dict]:
    """One Dagster run per (week, scenario) partition, oldest week first; returns the check verdicts."""
    instance = _instance(home)
    defs = build_definitions(scenarios_path=SCENARIOS_PATH, warehouse_root=warehouse, endpoints_path=endpoints)
    job = defs.resolve_job_def(WEEKLY_JOB)
    verdicts = []
    for week in weeks:
        key = dg.MultiPartitionKey({"week": week.isoformat(), "scenario": scenario})
        started = time.monotonic()
        result = job.execute_in_process(
            partition_key=key, instance=instance, run_config=QUIET_RUN_CONFIG, raise_on_error=False
        )
        outcome = "ok" if result.success else f"FAILED (run {result.run_id}; see `make dagster`)"
        print(f"  week {week} x {scenario}: {outcome} in {time.monotonic() - started:.0f} s", flush=True)
        verdicts += [
            {"week": week.isoformat(), "scenario": scenario, "check": e.check_name, "passed": e.passed,
             "severity": e.severity.value}
            for e in result.get_asset_check_evaluations()
        ]
    return verdicts


def _run_children(by_endpoint: dict[str, list[str]], args: argparse.Namespace, home: Path, tmp: Path) -> list[dict]:
    pending = sorted(by_endpoint.items())
    running: list[tuple[subprocess.Popen, Path, str]] = []
    verdicts: list[dict] = []
    while pending or running:
        while pending and len(running) < max(1, args.parallel):
            endpoint, scenarios = pending.pop(0)
            out = tmp / f"{endpoint}.jsonl"
            command = [
                sys.executable, "-m", "pipelines", "demo", "--verdicts-file", str(out), "--weeks", str(args.weeks),
                "--warehouse", str(args.warehouse), "--dagster-home", str(home), "--endpoints", str(args.endpoints),
                *[arg for scenario in scenarios for arg in ("--scenario", scenario)],
            ]
            running.append((subprocess.Popen(command), out, endpoint))
        process, out, endpoint = running.pop(0)
        if process.wait() != 0:
            print(f"the replays on endpoint {endpoint} exited with code {process.returncode}")
        if out.exists():
            verdicts += [orjson.loads(line) for line in out.read_bytes().splitlines() if line]
    return verdicts


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    home = (args.dagster_home or Path(os.environ.get("DAGSTER_HOME") or REPO_ROOT / ".dagster_home")).resolve()
    weeks = last_complete_weeks(datetime.now(timezone.utc).date(), args.weeks)
    if args.scenario:
        verdicts = [
            v for scenario in args.scenario for v in _materialize_scenario(scenario, weeks, args.warehouse, home, args.endpoints)
        ]
        args.verdicts_file.write_bytes(b"".join(orjson.dumps(v) + b"\n" for v in verdicts))
        return 0

    scenarios = load_scenarios(SCENARIOS_PATH, REPO_ROOT)
    by_endpoint: dict[str, list[str]] = {}
    for name, scenario in sorted(scenarios.items()):
        by_endpoint.setdefault(scenario.endpoint, []).append(name)
    _instance(home).dispose()  # create the instance's storage once, before children share it
    args.endpoints = story_endpoints(ENDPOINTS_PATH, home / "demo-endpoints.yaml", weeks)
    print(f"weekly job: {len(scenarios)} scenarios x weeks {', '.join(map(str, weeks))} on the SGLang twin")
    if len(weeks) >= 2:
        print(f"story: in the week of {weeks[-2]} endpoint {STORY_ENDPOINT} ran with {STORY_NOTE}; the week after it is back")
    with tempfile.TemporaryDirectory(prefix="costbench-demo-") as tmp:
        verdicts = _run_children(by_endpoint, args, home, Path(tmp))

    store = Warehouse(args.warehouse)
    rows = store.weekly_trends() if store.db_path.exists() else []
    print_weekly_trends(rows)
    print_check_verdicts(
        [(v["week"], v["scenario"], v["check"], v["passed"], v["severity"])
         for v in sorted(verdicts, key=lambda v: (v["week"], v["scenario"], v["check"]))]
    )
    print_regression_verdicts(rows)
    reports = args.warehouse / "reports"
    print(f"DuckDB warehouse: {store.db_path}   (rows are backend='sim': modelled by the twin, not measured)")
    for week in weeks:
        page = reports / f"week={week.isoformat()}.html"
        if page.exists():
            print(f"Weekly report:    {page}  (+ cost_trend_week={week.isoformat()}.png)")
    print(f"Parquet lake:     {store.lake_root}")
    print(f"Dagster instance: {home}   (open the UI with `make dagster`)")
    print(f"demo finished in {time.monotonic() - started:.0f} s")
    expected = len(scenarios) * len(weeks)
    done = {(str(r["week_start"]), r["scenario"]) for r in rows if str(r["week_start"]) in {w.isoformat() for w in weeks}}
    return 0 if len(done) == expected else 1
