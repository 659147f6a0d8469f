"""What `costbench demo` does (pipelines/demo/demo_command.py parses it): the weekly job on the embedded default
(twin + bundled traces), end to end.

Submits one backfill of the last complete weeks x every scenario to a real Dagster instance and lets
the instance carry it out as it carries out a scheduled run: `dagster-daemon` submits the runs, the
queued run coordinator keeps one replay per endpoint (the runs' endpoint tags, dagster.yaml) and one
warehouse writer (the pool), the run launcher starts each run and the job's own executor runs its
steps. Then it prints the weekly trend table, the check verdicts and where the results are.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import dagster as dg
import orjson
from dagster._core.execution.backfill import BulkActionsFilter

from assets.resources import ENDPOINTS_ENV, REPO_ROOT, WAREHOUSE_ENV, WarehouseResource
from assets.trend_assets import CONFIRMS_TAG
from endpoints.spec import EndpointClock, load_endpoint_specs
from pipelines.commands.cli_errors import EXIT_FAILED
from pipelines.commands.cli_inputs import check_output_folder
from pipelines.commands.trend_console import (
    print_check_verdicts,
    print_cost_attribution,
    print_diagnoses,
    print_fleet_plans,
    print_fleet_routing,
    print_regression_verdicts,
    print_week_spend,
    print_weekly_trends,
)
from pipelines.definitions import WEEKLY_JOB
from pipelines.demo.demo_story import STORY_ENDPOINT, STORY_NOTE, story_endpoints, story_partitions
from pipelines.demo.fleet_routing import fleet_routing
from pipelines.failure_notice import DEFAULT_NOTICE_FILE, NOTICE_FILE_ENV
from pipelines.instance.instance_runs import (
    BACKFILL_TAG,
    InstancePaths,
    RunsDidNotFinish,
    cancel_backfill,
    check_evaluations,
    failure_line,
    instance_home,
    mark_unfinished_cancelled,
    own_daemon,
    prepare_instance,
    run_line,
    submit_backfill,
    wait_for_runs,
)
from pipelines.instance.stop_guard import (
    DemoStopped,
    InstanceInUse,
    end_orphaned_leases,
    instance_lock,
    stopped_by_signals,
)
from warehouse.backends.store import Warehouse
from warehouse.marts.mart_rows import WeeklyTrendRow
from warehouse.marts.notice_rule import NoticeKind, row_notice
from workloads.scenarios import load_scenarios

SCENARIOS_PATH = REPO_ROOT / "workloads" / "scenarios.yaml"
ENDPOINTS_PATH = REPO_ROOT / "workloads" / "endpoints.yaml"
# The demo waits as long as its runs progress: it gives up only when no run has started or finished for this long
# (`--stall-timeout`). One run takes 60-130 s on the 2-core machine this was built on, so this allows a machine
# several times slower.
RUNS_STALL_S = 900.0
# A run worker busy replaying does not end on SIGTERM until its step returns (measured: none of them did within
# 30 s), and whatever a run writes is staged and renamed, so SIGKILL loses nothing stored: a demo someone stops
# waits this long, not the 30 s a test instance gives its daemon.
STOP_GRACE_S = 10.0
NOTICE_WAIT_S = 30.0  # the sensor's ticks: every 5 s at most, as the daemon's sensor loop gets to it
CONFIRMATION_WAIT_S = 300.0  # the confirmation runs the regression_notice sensor launches after the backfill's


def last_complete_weeks(today: date, count: int) -> list[date]:
    """Mondays of the `count` most recent weeks that have ended, oldest first."""
    this_monday = today - timedelta(days=today.weekday())
    return [this_monday - timedelta(weeks=n) for n in range(count, 0, -1)]


def _regression_notices(path: Path) -> int:
    if not path.exists():
        return 0
    return sum(1 for line in path.read_bytes().splitlines() if line and orjson.loads(line).get("kind") == "regression")


def run_demo(args: argparse.Namespace) -> int:
    started = time.monotonic()
    home = instance_home(args.dagster_home)
    warehouse = Path(args.warehouse).resolve()
    # Both are written minutes from now, by the runs: a path that cannot be is refused before anything starts.
    check_output_folder(warehouse, "--warehouse")
    check_output_folder(home, "--dagster-home")
    home.mkdir(parents=True, exist_ok=True)
    try:
        with instance_lock(home), stopped_by_signals():
            return _demo(args, started, home, warehouse)
    except InstanceInUse as exc:
        print(f"costbench: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except DemoStopped as stop:
        print(f"costbench: demo stopped by {stop.signal_name}; its daemon, runs and twins were stopped and its "
              f"backfill cancelled ({home})", file=sys.stderr, flush=True)  # fmt: skip
        return int(stop.code or 1)


def _demo(args: argparse.Namespace, started: float, home: Path, warehouse: Path) -> int:
    weeks = last_complete_weeks(datetime.now(timezone.utc).date(), args.weeks)
    scenarios = load_scenarios(SCENARIOS_PATH, REPO_ROOT)
    prepare_instance(home)
    endpoints = story_endpoints(ENDPOINTS_PATH, home / "demo-endpoints.yaml", weeks)
    # Regression (and failure) notices go to the user's channel, else to a file in the instance folder.
    notices = Path(os.environ.get(NOTICE_FILE_ENV) or home / DEFAULT_NOTICE_FILE)
    notices_before = _regression_notices(notices)
    # The runs read the warehouse and the demo's dated endpoints from here (assets/resources.py).
    env = {WAREHOUSE_ENV: str(warehouse), ENDPOINTS_ENV: str(endpoints), NOTICE_FILE_ENV: str(notices)}
    paths = InstancePaths(home, env=env)
    # Oldest week first: the run queue is first in, first out, so each week's baseline exists before it.
    partitions = story_partitions(scenarios, weeks)
    keys = [str(dg.MultiPartitionKey({"week": w.isoformat(), "scenario": s})) for w, s in partitions]
    print(f"weekly job: {len(keys)} runs of {len(scenarios)} scenarios in weeks {', '.join(map(str, weeks))} "
          "on the SGLang twin")  # fmt: skip
    for endpoint in sorted({s.endpoint for s in scenarios.values()}):
        roles = ", ".join(f"{s.name} ({s.role})" for s in scenarios.values() if s.endpoint == endpoint)
        replayed = sorted({w for w, name in partitions if scenarios[name].endpoint == endpoint})
        when = "every week" if len(replayed) == len(weeks) else f"the week of {replayed[-1]} only"
        print(f"  endpoint {endpoint}: {roles}; {when}")
    if len(weeks) >= 2:
        print(
            f"story: in the week of {weeks[-2]} endpoint {STORY_ENDPOINT} ran with {STORY_NOTE}; "
            "the week after it is back"
        )

    backfill = None
    try:
        # Never beside another daemon of the instance: one a killed demo left is waited for (its watchdog stops it)
        # and its unfinished runs marked cancelled; one someone else runs is refused, named (InstanceInUse).
        with dg.DagsterInstance.get() as instance, own_daemon(paths, instance, "costbench demo", STOP_GRACE_S, _warn):
            submitting_since = datetime.now(timezone.utc)
            try:
                backfill = submit_backfill(paths, WEEKLY_JOB, keys)
                print(
                    f"backfill {backfill}: {len(keys)} runs submitted to {home}; dagster-daemon carries them out "
                    f"(each scenario's weeks in order; {_clocks(endpoints, scenarios)})",
                    flush=True,
                )
                outcome = _wait_and_read(instance, backfill, keys, warehouse, notices, notices_before, args)
                if outcome.unfinished is not None:  # what finished is kept and printed below; the rest is not run
                    cancel_backfill(instance, backfill)
                    _cancel_unfinished(instance, _confirmation_runs(instance, _backfill_runs(instance, backfill)))
            except BaseException:
                # While the daemon's code server is up to terminate the started runs (the UI's way); stopped
                # mid-submission, the backfill may exist all the same.
                backfill = backfill or _backfill_of(instance, keys, submitting_since)
                if backfill is not None:
                    cancel_backfill(instance, backfill)
                _cancel_unfinished(instance, _confirmation_runs(instance, _backfill_runs(instance, backfill)))
                raise
    except BaseException as exc:
        stopped = f"the demo was stopped by {exc.signal_name}" if isinstance(exc, DemoStopped) else None
        _leave_nothing_running(backfill, warehouse, stopped or f"the demo failed: {exc!r}")
        raise
    if outcome.unfinished is not None:
        _leave_nothing_running(backfill, warehouse, f"the demo stopped waiting: {outcome.unfinished}")
    runs, verdicts, store, rows = outcome.runs, outcome.verdicts, outcome.store, outcome.rows
    attribution = outcome.attribution
    print_weekly_trends(rows)
    if store.db_path.exists():
        print_fleet_routing(fleet_routing(store, weeks[-1]), _router_policies(endpoints, scenarios))
        print_fleet_plans([r for r in store.fleet_plans() if r.week_start == weeks[-1]])
        print_diagnoses([r for r in store.diagnoses() if r.week_start == weeks[-1]])
    print_cost_attribution(attribution)
    print_check_verdicts(sorted(verdicts))
    print_regression_verdicts(rows)
    print_week_spend(rows)
    reports = warehouse / "reports"
    print(f"DuckDB warehouse: {store.db_path}   (rows are backend='sim': modelled by the twin, not measured)")
    for week in weeks:
        page = reports / f"week={week.isoformat()}.html"
        if page.exists():
            print(f"Weekly report:    {page}  (+ cost_trend_week={week.isoformat()}.png, "
                  f"focus_week={week.isoformat()}.csv: FOCUS 1.2 cost rows)")  # fmt: skip
    print(f"Parquet lake:     {store.lake_root}")
    told = _regression_notices(notices) - notices_before
    print(f"Notices:          {notices}   ({told} regression notice(s) from this demo; failures go there too)")
    print(f"Dagster instance: {home}   (open the UI with `make dagster`; the daemon's log is {home / 'daemon.log'})")
    print(f"demo finished in {time.monotonic() - started:.0f} s")
    if outcome.unfinished is not None:
        print(f"costbench: error: the demo stopped waiting: {outcome.unfinished}; the backfill was cancelled. The "
              f"tables above hold the {len(runs)} run(s) that finished; allow more with --stall-timeout",
              file=sys.stderr)  # fmt: skip
        return EXIT_FAILED
    failed = [r for r in runs if r.status is not dg.DagsterRunStatus.SUCCESS]
    with dg.DagsterInstance.get() as instance:
        for run in failed:
            print(failure_line(instance, run), file=sys.stderr)
    return 0 if not failed else EXIT_FAILED


def _warn(line: str) -> None:
    print(f"costbench: {line}", file=sys.stderr, flush=True)


def _clocks(endpoints_path: Path, scenarios: dict) -> str:
    """How the demo's twins keep time, in words: a virtual clock's run costs CPU, not its window's length."""
    specs = load_endpoint_specs(endpoints_path)
    clocks = {specs[s.endpoint].clock for s in scenarios.values()}
    virtual = "twins on a virtual clock, served inside each run: a run takes the CPU its requests need"
    wall = "twins in real time, one run per endpoint at a time"
    if clocks == {EndpointClock.VIRTUAL}:
        return virtual
    return wall if clocks == {EndpointClock.WALL} else f"{virtual}; other endpoints' {wall}"


def _router_policies(endpoints_path: Path, scenarios: dict) -> dict[str, str]:
    """Each fleet scenario's router policy as its endpoint names it; on the virtual clock, costbench's model of smg."""
    specs = load_endpoint_specs(endpoints_path)
    policies = {}
    for name, scenario in scenarios.items():
        spec = specs[scenario.endpoint]
        if spec.fleet is not None:
            model = " (modelled)" if spec.clock is EndpointClock.VIRTUAL else ""
            policies[name] = f"{spec.fleet.router.policy}{model}"
    return policies


@dataclass(frozen=True, slots=True)
class DemoOutcome:
    runs: list[dg.DagsterRun]  # the backfill's runs that finished and the confirmation runs they led to
    verdicts: list[tuple[str, str, str, bool, str]]  # (week, scenario, check, passed, severity) of those runs
    store: Warehouse
    rows: list[WeeklyTrendRow]
    attribution: list
    unfinished: RunsDidNotFinish | None  # why the demo stopped waiting for the rest (None: every run finished)


def _wait_and_read(
    instance: dg.DagsterInstance,
    backfill: str,
    keys: list[str],
    warehouse: Path,
    notices: Path,
    notices_before: int,
    args: argparse.Namespace,
) -> DemoOutcome:
    """The backfill's runs, as each ends; then the checks' verdicts, the marts and the notices they led to. Runs that
    stop progressing end the wait, and what finished is read all the same."""

    def report(run: dg.DagsterRun) -> None:
        print(run_line(instance, run), flush=True)

    stall_s = getattr(args, "stall_timeout", None) or RUNS_STALL_S
    unfinished = None
    try:
        runs = wait_for_runs(instance, dg.RunsFilter(tags={BACKFILL_TAG: backfill}), len(keys), None, report,
                             stall_s=stall_s)  # fmt: skip
    except RunsDidNotFinish as exc:
        unfinished = exc
        runs = [r for r in _backfill_runs(instance, backfill) if r.is_finished]
    store = Warehouse(warehouse)
    rows = store.weekly_trends() if store.db_path.exists() else []
    # A first regression is told only once a confirmation run of its week agrees: the regression_notice sensor
    # launches one per such week, through the same queue; their replays replace the week's.
    confirmations = first_regressions(rows, runs)
    if confirmations and unfinished is None:
        print(f"  {confirmations} first regression(s): confirmation run(s) requested by the regression_notice sensor")
        try:
            confirmed = _wait_for_confirmations(instance, runs, confirmations, stall_s)
        except RunsDidNotFinish as exc:
            unfinished, confirmed = exc, [r for r in _confirmation_runs(instance, runs) if r.is_finished]
        for run in confirmed:
            print(f"  confirmation of {run_line(instance, run).strip()}")
        runs = [*runs, *confirmed]
        rows = store.weekly_trends()
    verdicts = [
        (run.tags["dagster/partition/week"], run.tags["dagster/partition/scenario"], e.check_name, e.passed,
         e.severity.value)
        for run in runs
        for e in check_evaluations(instance, run)
    ]  # fmt: skip
    attribution = store.cost_attribution() if store.db_path.exists() else []
    # The regression_notice sensor tells the regressed metrics of each confirmed week that starts an episode (the
    # notice rule: not its sustained weeks) once its report is built: the daemon's next ticks get time to send them.
    starts = [r for r in rows if row_notice(r, rows) is NoticeKind.REGRESSION]
    expected = sum(len(orjson.loads(r.regressed_metrics or "[]")) for r in starts)
    waited = time.monotonic()
    while (
        unfinished is None
        and _regression_notices(notices) - notices_before < expected
        and time.monotonic() - waited < NOTICE_WAIT_S
    ):
        time.sleep(1)
    return DemoOutcome(runs, verdicts, store, rows, attribution, unfinished)


def first_regressions(rows: list[WeeklyTrendRow], runs: list[dg.DagsterRun]) -> int:
    """The first regressions the regression_notice sensor asks a confirmation run for: the regression rows of the
    (week, scenario) partitions this demo's runs built. A row whose partition's run failed this time is an earlier
    demo's, left in the warehouse: no report of it was built, so no confirmation comes, and none is waited for."""
    built = {
        (run.tags.get("dagster/partition/week"), run.tags.get("dagster/partition/scenario"))
        for run in runs
        if run.status == dg.DagsterRunStatus.SUCCESS
    }
    return sum(
        1 for r in rows if r.regression_verdict == "regression" and (r.week_start.isoformat(), r.scenario) in built
    )


def _backfill_runs(instance: dg.DagsterInstance, backfill: str | None) -> list[dg.DagsterRun]:
    if backfill is None:
        return []
    return list(instance.get_runs(filters=dg.RunsFilter(tags={BACKFILL_TAG: backfill})))


def _confirmation_runs(instance: dg.DagsterInstance, of: list[dg.DagsterRun]) -> list[dg.DagsterRun]:
    """The confirmation runs the sensor launched for these runs (and for those confirmations, in turn): never one
    an earlier demo on this instance left behind."""
    ours = {r.run_id for r in of}
    found: dict[str, dg.DagsterRun] = {}
    candidates = [r for r in instance.get_runs() if CONFIRMS_TAG in r.tags]
    grew = True
    while grew:
        grew = False
        for run in candidates:
            if run.run_id not in found and run.tags[CONFIRMS_TAG] in ours:
                found[run.run_id] = run
                ours.add(run.run_id)
                grew = True
    return sorted(found.values(), key=lambda r: r.run_id)


def _cancel_unfinished(instance: dg.DagsterInstance, runs: list[dg.DagsterRun]) -> None:
    for run in runs:
        if not run.is_finished:
            instance.run_coordinator.cancel_run(run.run_id)


def _wait_for_confirmations(
    instance: dg.DagsterInstance, of: list[dg.DagsterRun], expected: int, stall_s: float
) -> list[dg.DagsterRun]:
    """The confirmation runs of `of`, once `expected` of them have finished; RunsDidNotFinish when they stop
    progressing for `stall_s`."""
    last_change, state = time.monotonic(), None
    while True:
        runs = _confirmation_runs(instance, of)
        if len(runs) >= expected and all(r.is_finished for r in runs):
            return runs
        current = [(r.run_id, r.status) for r in runs]
        if current != state:
            state, last_change = current, time.monotonic()
        if time.monotonic() - last_change > stall_s:
            raise RunsDidNotFinish(f"no confirmation run started or finished for {stall_s:.0f} s; "
                                   f"{len(runs)} of {expected} requested")  # fmt: skip
        time.sleep(1)


def _backfill_of(instance: dg.DagsterInstance, keys: list[str], since: datetime) -> str | None:
    """The backfill of these keys submitted since `since` (stopped before `dagster job backfill` printed its id), in
    any status: under load the daemon may have submitted every run of it (COMPLETED) before the CLI returned, and
    those runs still wait in the queue. Compared as sets: the CLI stores the keys in the partitions definition's
    order, not the order it was given."""
    ours = [
        b
        for b in instance.get_backfills(filters=BulkActionsFilter(created_after=since))
        if sorted(b.partition_names or []) == sorted(keys)
    ]
    return max(ours, key=lambda b: b.backfill_timestamp).backfill_id if ours else None


def _leave_nothing_running(backfill: str | None, warehouse: Path, why: str) -> None:
    """After the daemon's group has stopped: runs it could not end marked cancelled, orphaned twins ended."""
    with dg.DagsterInstance.get() as instance:
        if backfill is not None:
            mark_unfinished_cancelled(instance, backfill, why)
        for run in _confirmation_runs(instance, _backfill_runs(instance, backfill)):
            if not run.is_finished:
                instance.report_run_canceled(run, message=why)
    end_orphaned_leases(WarehouseResource(root=str(warehouse)).leases_dir())
