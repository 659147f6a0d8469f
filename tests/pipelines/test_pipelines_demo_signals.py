"""`costbench demo` stopped by a signal stops all it started (the daemon, its code server, run workers,
twins), leaves nothing of its backfill to run later, and a second demo on the same instance refuses to start.

The demo is a real process started as a user starts it; what it left is found from outside: every process
whose environment names its DAGSTER_HOME, the process groups in its leases, and its instance's runs.
"""

from __future__ import annotations

import os
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
from endpoints.process_group import group_alive

COSTBENCH = str(Path(sys.executable).parent / "costbench")
START_BOUND_S = 240.0  # a fresh instance, the daemon, the backfill and the first run's twin on 2 cores
STOP_BOUND_S = 60.0  # the demo's own bound: the daemon's 10 s grace (pipelines/demo/demo_run.py), the leases' 10 s


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


def _live_twin_groups(leases: Path) -> list[int]:
    return [
        lease.process_group for lease in read_leases(leases) if lease.process_group and group_alive(lease.process_group)
    ]


CASES = {  # the signal, and when it comes: mid-replay, or just after the backfill was submitted
    "SIGTERM-mid-replay": (signal.SIGTERM, "replay"),
    "SIGINT-mid-replay": (signal.SIGINT, "replay"),
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
            assert second.wait(timeout=60) != 0
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
        for pid in [demo.pid, *processes_of(home)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for group in groups:
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
        demo.wait()
