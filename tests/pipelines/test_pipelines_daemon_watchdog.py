"""The dagster-daemon a costbench command starts goes with that command, however it ends, and says so to the next.

Real processes on a real instance in a temporary DAGSTER_HOME: a command (a child process that holds
running_daemon, as the demo does) is SIGKILLed, and what is left of its daemon is found from outside.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import pytest

from endpoints.process_group import group_members
from pipelines.instance.daemon_claim import daemon_lock, end_orphan, local_daemons, other_daemon

REPO = Path(__file__).resolve().parents[2]
GRACE_S = 5.0
START_BOUND_S = 180.0  # the daemon, its code server and its first heartbeat on a busy 2-core machine
GONE_BOUND_S = GRACE_S + 10.0  # the watchdog's poll, its grace and its SIGKILL

_COMMAND = """
import sys, time
from pathlib import Path
from pipelines.instance.instance_runs import InstancePaths, prepare_instance, running_daemon
prepare_instance(Path(sys.argv[1]))  # its storage made once, before the daemon's threads race to
with running_daemon(InstancePaths(Path(sys.argv[1])), stop_grace_s=float(sys.argv[2])) as watchdog:
    print(watchdog.pid, flush=True)
    while not Path(sys.argv[3]).exists():  # the test says when to stop (or SIGKILLs this first)
        time.sleep(0.1)
"""


def _wait_for(condition: Callable[[], object], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    pytest.fail(f"no {what} after {timeout_s:.0f} s")


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(REPO / "dagster.yaml", home / "dagster.yaml")
    return home


def _start_command(home: Path, stop_file: Path) -> tuple[subprocess.Popen, int]:
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    command = subprocess.Popen([sys.executable, "-c", _COMMAND, str(home), str(GRACE_S), str(stop_file)],
                               stdout=subprocess.PIPE, text=True, env=env, cwd=REPO)  # fmt: skip
    assert command.stdout is not None
    return command, int(command.stdout.readline())


def _beating(home: Path) -> bool:
    with dg.DagsterInstance.from_config(str(home)) as instance:
        return bool(instance.get_daemon_heartbeats())


def _cleanup(command: subprocess.Popen, group: int | None) -> None:
    command.kill()
    command.wait()
    if group is not None and group_members(group):  # only when the test failed: a stopped group's id may be reused
        os.killpg(group, signal.SIGKILL)


def test_a_sigkilled_commands_daemon_and_its_whole_group_stop_within_seconds(tmp_path):
    home = _home(tmp_path)
    command, group = _start_command(home, tmp_path / "stop")
    try:
        _wait_for(lambda: _beating(home), START_BOUND_S, "daemon heartbeat")
        daemons = local_daemons(home)
        assert len(daemons) == 1 and len(group_members(group)) >= 2  # the daemon and its code server (and watchdog)
        command.kill()
        command.wait()
        killed = time.monotonic()
        _wait_for(lambda: not group_members(group), GONE_BOUND_S, "end of the killed command's daemon group")
        print(f"the daemon's group was gone {time.monotonic() - killed:.1f} s after its command's SIGKILL")
        assert local_daemons(home) == []
        log = (home / "daemon.log").read_text()
        assert f"the command that started this daemon (pid {command.pid}) is gone" in log
        # The next command finds the lock free at once, and is told whose daemon died.
        with (
            daemon_lock(home, "test", 0.0, lambda line: None) as claim,
            dg.DagsterInstance.from_config(str(home)) as instance,
        ):
            assert claim.orphan is not None and claim.orphan.pid == command.pid and claim.orphan.group == group
            said = end_orphan(instance, claim)
            assert said is not None and f"pid {command.pid}" in said
            # Its last heartbeats are a minute young, but the daemon is gone: no other daemon is running.
            assert other_daemon(instance, claim) is None
    finally:
        _cleanup(command, group)


def test_a_claim_waits_for_a_daemon_still_alive_and_refuses_past_its_wait(tmp_path):
    from pipelines.instance.stop_guard import InstanceInUse

    home = _home(tmp_path)
    command, group = _start_command(home, tmp_path / "stop")
    try:
        _wait_for(lambda: local_daemons(home), START_BOUND_S, "daemon process")
        told: list[str] = []
        with pytest.raises(InstanceInUse) as refused:
            with daemon_lock(home, "test", 1.0, told.append):
                pass
        assert f"pid {command.pid}, running" in str(refused.value) and f"kill -- -{group}" in str(refused.value)
        assert told and "waiting up to 1 s" in told[0]
        # Stopped by its command, cleanly: the record says so, and the next claim finds no orphan.
        (tmp_path / "stop").touch()
        assert command.wait(timeout=GONE_BOUND_S + 10) == 0
        assert not group_members(group)
        with daemon_lock(home, "test", 0.0, lambda line: None) as claim:
            assert claim.orphan is None and claim.quiet_since_wall_s > 0
    finally:
        _cleanup(command, group)
