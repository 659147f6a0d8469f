"""`costbench run`: one week of one scenario through the instance's queue, as a newcomer types it.

The command finds the instance folder itself, starts a dagster-daemon when none runs, submits the backfill as the
schedule and the UI do, waits for the run, says how it ended, and leaves no process behind. The scenario is the
bundled R1 one on a twin on a virtual clock, cut to two minutes of trace, so its run takes CPU seconds.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import pytest
import yaml
from test_pipelines_demo_signals import processes_of

from assets.resources import SCENARIOS_ENV, WAREHOUSE_ENV
from pipelines.instance.instance_runs import BACKFILL_TAG, RunsDidNotFinish, wait_for_runs
from warehouse.backends.store import Warehouse

REPO = Path(__file__).resolve().parents[2]
SCENARIO = "reasoning-r1-h200-prompt-json"  # on r1-8xh200-b, a twin on a virtual clock as bundled
WEEK = "2026-11-16"
# Two minutes of trace of a virtual-clock scenario, which are CPU seconds (here and in test_pipelines_instance). Not
# fewer: a window of a few requests makes the capacity sweep repeat it until its running batch turns over
# (slo_capacity.MIN_TURNOVERS), which costs more (a 6 s window's run took 21 s here, this one's 15 s).
VIRTUAL_WINDOW_S = 120


def _costbench(*args: str, env: dict[str, str], timeout_s: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipelines.cli", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout_s)  # fmt: skip


def _env(tmp_path: Path) -> dict[str, str]:
    raw = yaml.safe_load((REPO / "workloads" / "scenarios.yaml").read_text())
    for entry in raw["scenarios"]:
        entry.update(duration_s=VIRTUAL_WINDOW_S, speedup=1.0, repeats=1)
    scenarios = tmp_path / "scenarios.yaml"
    scenarios.write_text(yaml.safe_dump(raw, sort_keys=False))
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    return {**env, SCENARIOS_ENV: str(scenarios), WAREHOUSE_ENV: str(tmp_path / "warehouse")}


@contextmanager
def _instance(home: Path) -> Iterator[dg.DagsterInstance]:
    """The instance the command used, read as it is on disk."""
    previous = os.environ.get("DAGSTER_HOME")
    os.environ["DAGSTER_HOME"] = str(home)
    try:
        with dg.DagsterInstance.get() as instance:
            yield instance
    finally:
        os.environ.pop("DAGSTER_HOME") if previous is None else os.environ.update(DAGSTER_HOME=previous)


def test_one_week_of_one_scenario_runs_through_the_daemon_and_leaves_nothing_behind(tmp_path):
    home = tmp_path / "home"
    done = _costbench("run", "--week", WEEK, "--scenario", SCENARIO, "--dagster-home", str(home), env=_env(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "a dagster-daemon started for this command" in done.stdout
    assert f"week {WEEK} x {SCENARIO}: ok" in done.stdout and "1 of 1 run(s) succeeded" in done.stdout
    with _instance(home) as instance:
        [run] = instance.get_runs()
    assert BACKFILL_TAG in run.tags and run.status is dg.DagsterRunStatus.SUCCESS
    assert (run.tags["dagster/partition/week"], run.tags["dagster/partition/scenario"]) == (WEEK, SCENARIO)
    with Warehouse(tmp_path / "warehouse").connect() as con:
        rows = con.execute("SELECT scenario, week_start FROM run_summary").fetchall()
    assert [(s, str(w)) for s, w in rows] == [(SCENARIO, WEEK)]
    assert processes_of(home) == []  # the daemon it started, its code server and run workers


def test_a_week_that_is_not_a_monday_or_an_unknown_scenario_is_refused_before_anything_starts(tmp_path):
    env = _env(tmp_path)
    tuesday = _costbench("run", "--week", "2026-11-17", "--scenario", SCENARIO, "--dagster-home", str(tmp_path / "h"),
                         env=env, timeout_s=120)  # fmt: skip
    assert tuesday.returncode == 2 and "--week 2026-11-17: not a Monday" in tuesday.stderr
    assert "the week of 2026-11-16" in tuesday.stderr
    typo = _costbench("run", "--week", WEEK, "--scenario", "reasoning-r1", "--dagster-home", str(tmp_path / "h"),
                      env=env, timeout_s=120)  # fmt: skip
    assert typo.returncode == 2 and "--scenario reasoning-r1: not in the scenarios file" in typo.stderr
    assert not (tmp_path / "h").exists()
    # --no-wait leaves the runs to a daemon that keeps running: with none on the instance, nothing is submitted.
    alone = _costbench("run", "--week", WEEK, "--scenario", SCENARIO, "--no-wait", "--dagster-home",
                       str(tmp_path / "idle"), env=env, timeout_s=120)  # fmt: skip
    assert alone.returncode == 2 and "--no-wait needs a dagster-daemon running on" in alone.stderr
    with _instance(tmp_path / "idle") as instance:
        assert instance.get_runs() == [] and instance.get_backfills() == []


def test_the_wait_gives_up_only_when_no_run_progresses(tmp_path):
    """A slow machine's runs are waited for as long as they progress; a queue that stands still is given up on,
    and the message says so."""
    with dg.instance_for_test() as instance:
        queued = dg.DagsterRun(job_name="weekly_benchmark", run_id="r-queued", status=dg.DagsterRunStatus.NOT_STARTED)
        instance.add_run(queued)
        with pytest.raises(RunsDidNotFinish, match="no run started or finished for 1 s.*not finished: r-queued"):
            wait_for_runs(instance, dg.RunsFilter(run_ids=["r-queued"]), 1, None, poll_s=0.1, stall_s=1.0)
        finished = dg.DagsterRun(job_name="weekly_benchmark", run_id="r-done", status=dg.DagsterRunStatus.SUCCESS)
        instance.add_run(finished)
        [done] = wait_for_runs(instance, dg.RunsFilter(run_ids=["r-done"]), 1, None, poll_s=0.1, stall_s=1.0)
        assert done.run_id == "r-done"
