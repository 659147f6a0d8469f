"""`costbench demo` stopped by a signal stops all it started (the daemon, its code server, run workers,
twins), leaves nothing of its backfill to run later, and a second demo on the same instance refuses to start.
SIGKILLed, its daemon's watchdog stops all of that within seconds, and the next demo never runs a daemon beside
another: it waits for the killed one's to go and marks what it left cancelled, and refuses beside one it did not start.

The demo is a real process started as a user starts it; what it left is found from outside: every process
whose environment names its DAGSTER_HOME, the process groups in its leases, and its instance's runs.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.execution.backfill import BulkActionStatus

from endpoints.lease_file import read_leases
from endpoints.process_group import group_alive, group_members, process_group_of
from pipelines.instance.daemon_claim import local_daemons

COSTBENCH = str(Path(sys.executable).parent / "costbench")
REPO = Path(__file__).resolve().parents[2]
START_BOUND_S = 240.0  # a fresh instance, the daemon, the backfill and the first run's twin on 2 cores
STOP_BOUND_S = 60.0  # the demo's own bound: the daemon's 10 s grace (pipelines/demo/demo_run.py), the leases' 10 s
KILLED_BOUND_S = 25.0  # a SIGKILLed demo's daemon group: the watchdog's poll, the 10 s grace, then SIGKILL


def _wait_for(condition: Callable[[], object], timeout_s: float, what: str, demo: subprocess.Popen, log: Path):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        if demo.poll() is not None:
            pytest.fail(f"the demo exited ({demo.returncode}) before {what}:\n{log.read_text()[-3000:]}")
        time.sleep(0.5)
    pytest.fail(f"no {what} after {timeout_s:.0f} s:\n{log.read_text()[-3000:]}")


def processes_of(home: Path) -> list[int]:
    """Living processes started with DAGSTER_HOME=home (zombies have no environment left to read)."""
    marker = f"DAGSTER_HOME={home}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _environ() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_", "COSTBENCH_"))}
    return {**env, "PYTHONUNBUFFERED": "1"}


def _demo(tmp_path: Path, home: Path, name: str) -> tuple[subprocess.Popen, Path]:
    log = tmp_path / f"{name}.log"
    with open(log, "wb") as out:
        demo = subprocess.Popen(
            [COSTBENCH, "demo", "--weeks", "1", "--warehouse", str(tmp_path / f"{name}-warehouse"),
             "--dagster-home", str(home)],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=_environ(), cwd=tmp_path,
        )  # fmt: skip
    return demo, log


def _kill_demos(home: Path, *demos: subprocess.Popen | None) -> None:
    """On every exit of a test: the demos themselves by pid (they take --dagster-home, so only what they start has it
    in its environment), then whatever is left with the instance in its environment."""
    started = [demo for demo in demos if demo is not None]
    for pid in [*(demo.pid for demo in started), *processes_of(home)]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for demo in started:
        demo.wait()


def _live_twin_groups(leases: Path) -> list[int]:
    return [
        lease.process_group for lease in read_leases(leases) if lease.process_group and group_alive(lease.process_group)
    ]


CASES = {  # the signal, and when it comes: mid-replay, or just after the backfill was submitted
    "SIGTERM-mid-replay": (signal.SIGTERM, "replay"),
    # Ctrl-C as soon as the runs are queued: the stop is the same handler's as SIGTERM's (mid-replay here and, for a
    # SIGKILL, in the next test), and a demo that goes no further costs the suite one demo's runs less.
    "SIGINT-after-submitting": (signal.SIGINT, "submitted"),
    "SIGHUP-after-submitting": (signal.SIGHUP, "submitted"),
}


def test_a_signalled_demo_stops_everything_it_started(tmp_path):
    # The three demos run at once, each with an instance and a warehouse of its own: most of a demo's time here
    # is waiting (for its daemon, its runs, its teardown), which they can share.
    with ThreadPoolExecutor(len(CASES)) as pool:
        done = {name: pool.submit(_signal_a_demo, tmp_path / name, *case) for name, case in CASES.items()}
    for future in done.values():
        future.result()  # the first case that failed, with its own message


def _signal_a_demo(tmp_path: Path, signum: int, stage: str) -> None:
    tmp_path.mkdir()
    home = tmp_path / "home"
    runs = tmp_path / "first-warehouse" / "runs"
    leases = runs / "leases"
    demo, log = _demo(tmp_path, home, "first")
    second: subprocess.Popen | None = None
    groups: set[int] = set()
    try:
        if stage == "replay":
            # The demo's twins run on the virtual clock, inside the run's own process (no group of their own).
            replaying = lambda: any(runs.glob("week=*/scenario=*/*/shard-0/run.json"))  # noqa: E731
            _wait_for(replaying, START_BOUND_S, "replay", demo, log)
            groups.update(_live_twin_groups(leases))
        else:
            _wait_for(lambda: "runs submitted" in log.read_text(), START_BOUND_S, "backfill", demo, log)
        if signum == signal.SIGTERM:
            # A second demo over the running one's instance refuses, naming it, and leaves it running.
            second, second_log = _demo(tmp_path, home, "second")
            # Its refusal comes after its imports (seconds of CPU), which a loaded machine held up for over a minute
            # in two suite runs here (2026-12-07, beside the instance files' processes at a higher priority then).
            assert second.wait(timeout=START_BOUND_S) != 0
            said = second_log.read_text()
            assert f"pid {demo.pid}" in said and str(home) in said, said
            assert demo.poll() is None
        demo.send_signal(signum)
        code = demo.wait(timeout=STOP_BOUND_S)
        said = log.read_text()
        assert code == 128 + signum, said[-3000:]
        assert f"stopped by {signal.Signals(signum).name}" in said, said[-3000:]
        assert processes_of(home) == [], said[-3000:]
        assert not any(group_alive(g) for g in groups)
        assert read_leases(leases) == []
        # Nothing of the backfill is left for the next daemon on this instance to carry on.
        with dg.DagsterInstance.from_config(str(home)) as instance:
            assert all(b.status is not BulkActionStatus.REQUESTED for b in instance.get_backfills())
            unfinished = [r.run_id for r in instance.get_runs() if not r.is_finished]
            assert unfinished == [], unfinished
    finally:
        _kill_demos(home, demo, second)
        for group in groups:
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _daemon_groups(home: Path) -> set[int]:
    return {g for pid, _ in local_daemons(home) if (g := process_group_of(pid)) is not None}


def test_a_sigkilled_demos_daemon_goes_within_seconds_and_the_next_demo_never_runs_beside_it(tmp_path):
    home = tmp_path / "home"
    runs = tmp_path / "first-warehouse" / "runs"
    first, log = _demo(tmp_path, home, "first")
    second = None
    try:
        replaying = lambda: any(runs.glob("week=*/scenario=*/*/shard-0/run.json"))  # noqa: E731
        _wait_for(replaying, START_BOUND_S, "replay", first, log)
        orphan_groups = _daemon_groups(home)
        assert len(orphan_groups) == 1 and len(processes_of(home)) >= 4  # the watchdog, daemon, code server, runs
        first.kill()  # no teardown of its own runs: what it started must go all the same
        first.wait()
        killed = time.monotonic()
        # The next demo starts at once, while the killed one's daemon is still being stopped.
        second, second_log = _demo(tmp_path, home, "second")
        gone_after = None
        while time.monotonic() - killed < START_BOUND_S and "runs submitted" not in second_log.read_text():
            orphan_alive = any(group_members(g) for g in orphan_groups)
            if not orphan_alive and gone_after is None:
                gone_after = time.monotonic() - killed
            beside = _daemon_groups(home) - orphan_groups
            assert not (orphan_alive and beside), f"a second daemon (group {beside}) beside the killed demo's"
            if second.poll() is not None:
                pytest.fail(f"the second demo exited ({second.returncode}):\n{second_log.read_text()[-3000:]}")
            time.sleep(0.2)
        assert gone_after is not None and gone_after <= KILLED_BOUND_S, (gone_after, log.read_text()[-2000:])
        print(f"the SIGKILLed demo's daemon group was gone {gone_after:.1f} s after the SIGKILL")
        said = second_log.read_text()
        assert "runs submitted" in said, said[-3000:]
        # It said whose daemon had died, and what was marked cancelled, before it started its own.
        assert f"the dagster-daemon of costbench demo (pid {first.pid}), which ended without stopping it" in said
        assert "marked cancelled" in said, said[-3000:]
        with dg.DagsterInstance.from_config(str(home)) as instance:
            backfills = sorted(instance.get_backfills(), key=lambda b: b.backfill_timestamp)
            # The killed demo's backfill carries on nowhere (submitted in full, or cancelled), nor do its runs.
            assert len(backfills) == 2 and backfills[0].status is not BulkActionStatus.REQUESTED
            left = [r.run_id for r in instance.get_runs() if not r.is_finished
                    and r.tags.get("dagster/backfill") != backfills[1].backfill_id]  # fmt: skip
            assert left == [], left  # nothing of the killed demo's for the second's daemon to carry on
        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=STOP_BOUND_S) == 128 + signal.SIGTERM
        assert processes_of(home) == []
        with dg.DagsterInstance.from_config(str(home)) as instance:
            assert [r.run_id for r in instance.get_runs() if not r.is_finished] == []
    finally:
        _kill_demos(home, first, second)


def test_a_demo_refuses_to_start_beside_a_daemon_it_did_not_start(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(REPO / "dagster.yaml", home / "dagster.yaml")
    with dg.DagsterInstance.from_config(str(home)) as instance:  # its storage made before two processes race to
        instance.get_runs(limit=1)
        instance.all_instigator_state()
    # `make dagster`'s daemon, say: started by someone else, on the same instance.
    theirs = subprocess.Popen(
        [str(Path(sys.executable).parent / "dagster-daemon"), "run", "-w", str(REPO / "workspace.yaml")],
        cwd=REPO, env={**_environ(), "DAGSTER_HOME": str(home)}, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    demo = None
    try:
        demo, log = _demo(tmp_path, home, "demo")
        code = demo.wait(timeout=START_BOUND_S)
        said = log.read_text()
        assert code != 0 and f"pid {theirs.pid}" in said and "not started by costbench" in said, said[-3000:]
        assert theirs.poll() is None  # left alone
        assert set(processes_of(home)) <= set(group_members(theirs.pid))  # nothing of the demo's is left
        with dg.DagsterInstance.from_config(str(home)) as instance:
            assert instance.get_backfills() == []  # it submitted nothing
    finally:
        os.killpg(theirs.pid, signal.SIGKILL)
        _kill_demos(home, demo)  # and, only when the test failed, what the demo started beside theirs
        theirs.wait()
