"""Runs carried out the way a scheduled run, a backfill or the UI's Materialize button carries them out.

Runs are submitted to the instance with Dagster's own commands (`dagster job backfill`, `dagster job
launch`); `dagster-daemon run` dequeues them through the instance's run coordinator (dagster.yaml: the
queued coordinator, its per-endpoint tag limits and the warehouse pool), starts each with the run
launcher, and each run executes with the job's own executor. Nothing here runs a job in-process: the
demo and the tests of the weekly job take this path, because it is the only one users' runs take.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import orjson
from dagster._core.execution.backfill import BULK_ACTION_TERMINAL_STATUSES, BulkActionStatus

from assets.resources import REPO_ROOT
from endpoints.process_group import stop_group
from pipelines.instance.daemon_claim import (
    DaemonClaim,
    daemon_lock,
    end_orphan,
    other_daemon,
    record_group,
    record_started,
    record_stopped,
)
from pipelines.instance.stop_guard import InstanceInUse

BACKFILL_TAG = "dagster/backfill"
_BACKFILL_ID = re.compile(r"Launched backfill job `([^`]+)`")


class RunsDidNotFinish(RuntimeError):
    """Runs still queued or running when the wait ended; the message says which."""


@dataclass(frozen=True, slots=True)
class InstancePaths:
    """Where the instance lives and what every Dagster process of it is started with."""

    dagster_home: Path
    workspace: Path = REPO_ROOT / "workspace.yaml"
    env: Mapping[str, str] | None = None  # added to this process's environment (COSTBENCH_* paths)

    def environ(self) -> dict[str, str]:
        return {**os.environ, **(self.env or {}), "DAGSTER_HOME": str(Path(self.dagster_home).resolve())}

    def command(self, name: str) -> str:
        return str(Path(sys.executable).parent / name)


# How long past its grace a command waits for the daemon of one that died to be stopped by its watchdog.
CLAIM_SLACK_S = 10.0


def instance_home(option: Path | None) -> Path:
    """The instance folder: the option given, else $DAGSTER_HOME, else the repository's .dagster_home/ (what
    `make dagster` and `make demo` use), so no command needs DAGSTER_HOME exported."""
    return (option or Path(os.environ.get("DAGSTER_HOME") or REPO_ROOT / ".dagster_home")).resolve()


def prepare_instance(home: Path) -> None:
    """The folder with the shipped dagster.yaml (a user's own is kept), made this process's DAGSTER_HOME, and its
    storage created once here: left to the daemon's threads and the first `dagster job backfill` at the same
    moment, two of them can stamp a fresh SQLite schema and the next to open it fails ("alembic_version has more
    than one head")."""
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists():
        shutil.copy(REPO_ROOT / "dagster.yaml", home / "dagster.yaml")
    os.environ["DAGSTER_HOME"] = str(home)
    with dg.DagsterInstance.get() as instance:
        instance.get_runs(limit=1)
        instance.fetch_materializations(dg.AssetKey("weekly_report"), limit=1)
        instance.all_instigator_state()


@contextmanager
def claimed_daemon(
    instance: dg.DagsterInstance, home: Path, command: str, stop_grace_s: float, report: Callable[[str], None]
) -> Iterator[tuple[DaemonClaim, str | None]]:
    """The instance's daemon lock for the block (daemon_claim.py), once the daemon of a command that died is gone and
    what it left unfinished is marked cancelled (said through `report`); with it, the daemon costbench did not start
    that runs on the instance now, in words (None: none)."""
    with daemon_lock(home, command, stop_grace_s + CLAIM_SLACK_S, report) as claim:
        ended = end_orphan(instance, claim)
        if ended is not None:
            report(ended)
        yield claim, other_daemon(instance, claim)


@contextmanager
def own_daemon(
    paths: InstancePaths, instance: dg.DagsterInstance, command: str, stop_grace_s: float, report: Callable[[str], None]
) -> Iterator[subprocess.Popen]:
    """running_daemon, and never beside another daemon of the instance: InstanceInUse names one that runs."""
    home = Path(paths.dagster_home)
    with claimed_daemon(instance, home, command, stop_grace_s, report) as (claim, other):
        if other is not None:
            raise InstanceInUse(
                f"{other} runs on the Dagster instance at {home}; {command} starts a daemon of its own (its runs "
                "read the warehouse and endpoints it names) and never a second beside one: stop that daemon, or give "
                "this command its own --dagster-home"
            )
        with running_daemon(paths, claim=claim, stop_grace_s=stop_grace_s) as daemon:
            yield daemon


@contextmanager
def running_daemon(
    paths: InstancePaths, log_path: Path | None = None, stop_grace_s: float = 30.0, claim: DaemonClaim | None = None
) -> Iterator[subprocess.Popen]:
    """`dagster-daemon run` for the block: the scheduler, sensors, backfills and the run queue. At the end its
    whole process group gets SIGTERM, and SIGKILL after `stop_grace_s`.

    The daemon runs under a watchdog (daemon_watchdog.py) that leads its process group and stops all of it when this
    process ends without doing so (SIGKILL, OOM). `claim`: the instance's daemon lock, already held (own_daemon);
    None: held here for the block. The process yielded is the watchdog's (its pid is the group's id)."""
    home = Path(paths.dagster_home)
    with daemon_lock(home, "costbench", stop_grace_s + CLAIM_SLACK_S, lambda _: None) if claim is None else (
        nullcontext(claim)
    ) as held:  # fmt: skip
        log_path = log_path or home / "daemon.log"
        command = [paths.command("dagster-daemon"), "run", "-w", str(paths.workspace)]
        watchdog = [sys.executable, "-m", "pipelines.instance.daemon_watchdog", "--grace-s", str(stop_grace_s),
                    "--keep-fd", str(held.fd), "--owner-pid", str(os.getpid()), "--", *command]  # fmt: skip
        record = record_started(held)
        with open(log_path, "ab") as log:
            # stdin: a pipe whose write end only this process holds; its end-of-file is this process's end.
            daemon = subprocess.Popen(
                watchdog, cwd=Path(paths.workspace).parent, env=paths.environ(), stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.PIPE, start_new_session=True, pass_fds=(held.fd,),
            )  # fmt: skip
        record = record_group(held, record, daemon.pid)
        try:
            yield daemon
        finally:
            stop_group(daemon, grace_s=stop_grace_s)  # the watchdog, the daemon, its code server and run workers
            if daemon.stdin is not None:
                daemon.stdin.close()
            record_stopped(held, record)


def _dagster(paths: InstancePaths, *args: str) -> str:
    done = subprocess.run(
        [paths.command("dagster"), *args, "-w", str(paths.workspace)],
        cwd=Path(paths.workspace).parent, env=paths.environ(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"dagster {' '.join(args[:2])} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done.stdout + done.stderr


def submit_backfill(paths: InstancePaths, job: str, partition_keys: list[str]) -> str:
    """A backfill of these partitions, as `dagster job backfill` (or the UI) submits it; returns its id.
    The daemon's backfill loop submits one run per partition in the partitions definition's order (the CLI keeps
    that order whatever order the keys are given in): for the weekly job, by scenario, then oldest week first."""
    output = _dagster(paths, "job", "backfill", "-j", job, "--partitions", ",".join(partition_keys), "--noprompt")
    found = _BACKFILL_ID.search(output)
    if not found:
        raise RuntimeError(f"dagster job backfill printed no backfill id:\n{output}")
    return found.group(1)


def submit_run(paths: InstancePaths, job: str, tags: Mapping[str, str], run_id: str) -> str:
    """One run with these tags (a schedule's RunRequest, say), submitted to the run coordinator."""
    _dagster(paths, "job", "launch", "-j", job, "--tags", orjson.dumps(dict(tags)).decode(), "--run-id", run_id)
    return run_id


def wait_for_runs(
    instance: dg.DagsterInstance,
    runs_filter: dg.RunsFilter,
    expected: int,
    timeout_s: float | None,
    on_finished: Callable[[dg.DagsterRun], None] | None = None,
    poll_s: float = 1.0,
    stall_s: float | None = None,
) -> list[dg.DagsterRun]:
    """Wait until `expected` runs match the filter and all have finished; returns them oldest first. Gives up
    (RunsDidNotFinish) after `timeout_s` in all, or after `stall_s` in which no run was submitted or changed
    status: a slow machine's runs take longer, and are waited for as long as they progress."""
    started = last_change = time.monotonic()
    seen: set[str] = set()
    state: frozenset[tuple[str, str]] = frozenset()
    while True:
        runs = instance.get_runs(filters=runs_filter)
        for run in runs:
            if run.is_finished and run.run_id not in seen:
                seen.add(run.run_id)
                if on_finished is not None:
                    on_finished(run)
        if len(runs) >= expected and all(r.is_finished for r in runs):
            return list(reversed(runs))
        now = time.monotonic()
        current = frozenset((r.run_id, r.status.value) for r in runs)
        if current != state:
            state, last_change = current, now
        stalled = stall_s is not None and now - last_change > stall_s
        if stalled or (timeout_s is not None and now - started > timeout_s):
            waiting = ", ".join(f"{r.run_id[:8]} {r.status.value}" for r in runs if not r.is_finished)
            why = (
                f"no run started or finished for {stall_s:.0f} s (a machine too slow or too busy for the runs, or "
                "a daemon that stopped: its log says which)"
                if stalled
                else f"the {timeout_s:.0f} s allowed ran out"
            )
            raise RunsDidNotFinish(
                f"{why}; after {now - started:.0f} s, {len(runs)} of {expected} runs submitted, "
                f"{len(seen)} finished; not finished: {waiting or 'none'}"
            )
        time.sleep(poll_s)


def cancel_backfill(instance: dg.DagsterInstance, backfill_id: str) -> list[str]:
    """What the UI's Cancel backfill does, at once: no further run is submitted, and each of the backfill's
    runs not finished is cancelled through the run coordinator (a queued run is dropped, a started one
    terminated by its run launcher). Returns the runs cancelled."""
    backfill = instance.get_backfill(backfill_id)
    if backfill is not None and backfill.status not in BULK_ACTION_TERMINAL_STATUSES:
        instance.update_backfill(backfill.with_status(BulkActionStatus.CANCELED))
    cancelled = []
    for run in instance.get_runs(filters=dg.RunsFilter(tags={BACKFILL_TAG: backfill_id})):
        if not run.is_finished:
            instance.run_coordinator.cancel_run(run.run_id)
            cancelled.append(run.run_id)
    return cancelled


def mark_unfinished_cancelled(instance: dg.DagsterInstance, backfill_id: str, why: str) -> None:
    """A run whose worker was stopped before it could record its end is marked cancelled, not left started."""
    for run in instance.get_runs(filters=dg.RunsFilter(tags={BACKFILL_TAG: backfill_id})):
        if not run.is_finished:
            instance.report_run_canceled(run, message=why)


def run_seconds(instance: dg.DagsterInstance, run_id: str) -> float | None:
    record = instance.get_run_record_by_id(run_id)
    if record is None or record.start_time is None or record.end_time is None:
        return None
    return record.end_time - record.start_time


def partition_label(run: dg.DagsterRun) -> str:
    return f"week {run.tags.get('dagster/partition/week')} x {run.tags.get('dagster/partition/scenario')}"


def run_line(instance: dg.DagsterInstance, run: dg.DagsterRun) -> str:
    """How a finished run ended, one line: '  week W x S: ok in 82 s' (a demo's or `costbench run`'s progress)."""
    outcome = "ok" if run.status is dg.DagsterRunStatus.SUCCESS else f"{run.status.value} (run {run.run_id})"
    seconds = run_seconds(instance, run.run_id)
    return f"  {partition_label(run)}: {outcome}" + (f" in {seconds:.0f} s" if seconds is not None else "")


def failure_line(instance: dg.DagsterInstance, run: dg.DagsterRun) -> str:
    """A run that did not succeed, named with the last of its reasons (failure_reasons), for stderr."""
    why = "; ".join(failure_reasons(instance, run)[-2:]) or "no reason recorded"
    return f"costbench: error: run {run.run_id} ({partition_label(run)}) ended {run.status.value}: {why}"


def failure_reasons(instance: dg.DagsterInstance, run: dg.DagsterRun) -> list[str]:
    """Why a run failed, from its event log: each failed step's error (its innermost cause), each failed
    check, each engine event that carried an error (a run worker that died, say) and the run's failure."""
    reasons = []
    for entry in instance.all_logs(run.run_id):
        event = entry.dagster_event
        if event is None:
            continue
        kind = event.event_type
        if kind is dg.DagsterEventType.STEP_FAILURE:
            reasons.append(f"step {event.step_key}: {_innermost(event.step_failure_data.error) or entry.message}")
        elif kind is dg.DagsterEventType.ASSET_CHECK_EVALUATION and not event.asset_check_evaluation_data.passed:
            check = event.asset_check_evaluation_data
            reasons.append(f"check {check.check_name} failed: {dict(check.metadata)}")
        elif kind is dg.DagsterEventType.ENGINE_EVENT and event.engine_event_data.error is not None:
            reasons.append(f"engine: {entry.message}: {_innermost(event.engine_event_data.error)}")
        elif kind is dg.DagsterEventType.RUN_FAILURE:
            reasons.append(f"run: {entry.message}")
    return reasons


def unsuccessful(instance: dg.DagsterInstance, runs: list[dg.DagsterRun]) -> dict[str, tuple[str, list[str]]]:
    """The runs that did not succeed, by partition: their status and why (for a test's or a user's message)."""
    return {
        run.tags.get("dagster/partition", run.run_id): (run.status.value, failure_reasons(instance, run))
        for run in runs
        if run.status is not dg.DagsterRunStatus.SUCCESS
    }


def _innermost(error) -> str | None:
    while error is not None and error.cause is not None:
        error = error.cause
    return None if error is None else error.message.strip()


def check_evaluations(instance: dg.DagsterInstance, run: dg.DagsterRun) -> list[dg.AssetCheckEvaluation]:
    """The asset check results a run recorded in the event log."""
    return [
        entry.dagster_event.asset_check_evaluation_data
        for entry in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
        if entry.dagster_event is not None
    ]
