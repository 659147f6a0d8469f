"""What `costbench run` does (pipelines/commands/run_command.py parses it): the weekly job for chosen (week,
scenario) partitions, through the instance's queue as the Monday schedule runs them.

One backfill of the partitions (`dagster job backfill`, as the UI's Materialize submits it), carried out by the
instance's dagster-daemon: the one already running (`make dagster`'s), else one started for the command and stopped
when its runs have finished. The instance folder is found without exports (instance_runs.instance_home); the runs
read the warehouse, scenarios and endpoints the environment names, as the schedule's do.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import nullcontext
from datetime import date

import dagster as dg

from pipelines.commands.cli_errors import EXIT_FAILED, CommandInputError
from pipelines.definitions import WEEKLY_JOB
from pipelines.instance.instance_runs import (
    BACKFILL_TAG,
    InstancePaths,
    RunsDidNotFinish,
    cancel_backfill,
    claimed_daemon,
    failure_line,
    instance_home,
    mark_unfinished_cancelled,
    prepare_instance,
    run_line,
    running_daemon,
    submit_backfill,
    wait_for_runs,
)
from pipelines.instance.stop_guard import DemoStopped, instance_lock, stopped_by_signals

STALL_S = 900.0  # give up when no run has started or finished for this long (a run takes 1-2 minutes here)
STOP_GRACE_S = 10.0  # the daemon this command started: SIGTERM, then SIGKILL after this


def partition_keys(weeks: list[date], scenarios: list[str]) -> list[str]:
    """The (week, scenario) partitions, oldest week first (each week's baseline exists before the next is judged);
    run_command.checked_inputs has refused a week that is not a Monday and a scenario not in the file."""
    return [
        str(dg.MultiPartitionKey({"week": week.isoformat(), "scenario": name}))
        for week in sorted(set(weeks))
        for name in dict.fromkeys(scenarios)
    ]


def run_weeks(args: argparse.Namespace) -> int:
    keys = partition_keys(args.week, args.scenario)
    home = instance_home(args.dagster_home)
    home.mkdir(parents=True, exist_ok=True)
    paths = InstancePaths(home)
    with instance_lock(home), stopped_by_signals():
        prepare_instance(home)
        with (
            dg.DagsterInstance.get() as instance,
            claimed_daemon(instance, home, "costbench run", STOP_GRACE_S, _warn) as (claim, other),
        ):
            own_daemon = other is None
            if args.no_wait and own_daemon:  # nothing would carry the runs out once this command's daemon stops
                raise CommandInputError(f"--no-wait needs a dagster-daemon running on {home} (`make dagster`)")
            backfill = None
            try:
                with running_daemon(paths, stop_grace_s=STOP_GRACE_S, claim=claim) if own_daemon else nullcontext():
                    backfill = submit_backfill(paths, WEEKLY_JOB, keys)
                    carried = "a dagster-daemon started for this command" if other is None else other
                    print(f"backfill {backfill}: {len(keys)} run(s) of {WEEKLY_JOB} submitted to {home}; {carried} "
                          "carries them out", flush=True)  # fmt: skip
                    if args.no_wait:
                        return 0
                    runs = wait_for_runs(
                        instance, dg.RunsFilter(tags={BACKFILL_TAG: backfill}), len(keys), None,
                        lambda run: print(run_line(instance, run), flush=True), stall_s=args.stall_timeout or STALL_S,
                    )  # fmt: skip
            except (BaseException, RunsDidNotFinish) as exc:
                if backfill is not None:
                    cancel_backfill(instance, backfill)
                    stopped = f"stopped by {exc.signal_name}" if isinstance(exc, DemoStopped) else f"failed: {exc}"
                    mark_unfinished_cancelled(instance, backfill, f"costbench run {stopped}")
                if isinstance(exc, RunsDidNotFinish):
                    print(f"costbench: error: {exc}; the backfill was cancelled", file=sys.stderr)
                    return EXIT_FAILED
                raise
            failed = [r for r in runs if r.status is not dg.DagsterRunStatus.SUCCESS]
            for run in failed:
                print(failure_line(instance, run), file=sys.stderr)
    print(f"{len(runs) - len(failed)} of {len(runs)} run(s) succeeded; the marts and reports are in the warehouse "
          "(`make sql`, warehouse/reports/)")  # fmt: skip
    return EXIT_FAILED if failed else 0


def _warn(line: str) -> None:
    print(f"costbench: {line}", file=sys.stderr, flush=True)
