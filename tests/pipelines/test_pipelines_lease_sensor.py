"""When the lease sensor ends an endpoint's lease, and when it must leave it alone (real processes)."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import dagster as dg
import pytest
import yaml

from assets.resources import WarehouseResource
from endpoints.fleet_commands import smg_program
from endpoints.lease_file import (
    UNPROVEN_DIR,
    UNREADABLE_DIR,
    GroupVerdict,
    LeaseRecord,
    check_group,
    end_lease,
    new_lease,
    write_lease,
)
from endpoints.process_group import group_alive, process_start, stop_group_by_id
from endpoints.provision import start_detached
from endpoints.router.router_spec import RouterSpec
from endpoints.spec import EndpointMode, EndpointSpec, FleetSpec, WorkerGroup, WorkerRole
from pipelines.definitions import build_definitions
from pipelines.failure_notice import NOTICE_FILE_ENV
from pipelines.lease_sensor import endpoint_lease_sensor, lease_over
from process_members import group_members
from workloads.scenarios import default_scenarios_path

REPO = Path(__file__).resolve().parents[2]


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid  # reaped: no process has this id now (until the kernel reuses it)


def _lease(owner_pid: int, host: str | None = None) -> LeaseRecord:
    return LeaseRecord("run-1", "v3-8xh200", 12345, host or socket.gethostname(), owner_pid)


def _run(status: dg.DagsterRunStatus) -> dg.DagsterRun:
    return dg.DagsterRun(job_name="weekly_benchmark", run_id="run-1", status=status)


def test_a_running_run_with_a_live_worker_keeps_its_endpoint():
    assert lease_over(_lease(os.getpid()), _run(dg.DagsterRunStatus.STARTED)) is None


def test_finished_cancelling_and_dead_worker_runs_lose_their_endpoint():
    for status in (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED,
                   dg.DagsterRunStatus.CANCELING):  # fmt: skip
        assert status.value in lease_over(_lease(os.getpid()), _run(status))
    assert "run worker (pid" in lease_over(_lease(_dead_pid()), _run(dg.DagsterRunStatus.STARTED))


def test_another_instances_run_is_left_alone_while_its_worker_lives():
    assert lease_over(_lease(os.getpid()), None) is None  # a second DAGSTER_HOME on the same warehouse
    assert "not in this instance" in lease_over(_lease(_dead_pid()), None)
    # On another host nothing can be told from a pid: only the run's status counts.
    assert lease_over(_lease(_dead_pid(), host="another-pod"), _run(dg.DagsterRunStatus.STARTED)) is None


# --- Lease files the sensor cannot trust: unreadable, or naming a pid or process group reused since. ---


def _own_group() -> subprocess.Popen:
    # A real server stand-in in a process group of its own, as start_in_own_group starts a twin.
    return subprocess.Popen(["sleep", "600"], start_new_session=True, stdout=subprocess.DEVNULL)


def _tick(tmp_path: Path) -> tuple[str, list[str]]:
    with dg.instance_for_test() as instance:
        context = dg.build_sensor_context(
            instance=instance, resources={"warehouse": WarehouseResource(root=str(tmp_path / "warehouse"))}
        )
        with capture_logs(context) as logged:
            result = endpoint_lease_sensor(context)
    return result.skip_message, logged


@contextmanager
def capture_logs(context: dg.SensorEvaluationContext) -> Iterator[list[str]]:
    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    context.log.addHandler(handler)
    try:
        yield lines
    finally:
        context.log.removeHandler(handler)


def test_an_unreadable_lease_is_set_aside_once_and_the_others_still_ended(tmp_path):
    leases = tmp_path / "warehouse" / "runs" / "leases"
    server = _own_group()
    try:
        # A run this instance does not know, whose worker is gone: its server must be stopped.
        write_lease(leases, new_lease("run-gone", "v3-8xh200", server.pid, _dead_pid()))
        (leases / "old-release.json").write_bytes(b'{"process_group": 1, "endpoint": "x"}')  # the previous shape
        (leases / "torn.json").write_bytes(b'{"owner_run_id": "r')
        message, logged = _tick(tmp_path)
        assert server.wait(timeout=30) is not None  # stopped, though two files beside its lease are unreadable
        assert not (leases / "run-gone.json").exists() and "v3-8xh200" in message
        # Each bad file is reported with its name and why, kept whole (moved aside), and not read again.
        for name in ("old-release.json", "torn.json"):
            assert not (leases / name).exists() and (leases / UNREADABLE_DIR / name).exists()
            assert any(name in line and "unreadable lease" in line for line in logged), logged
        assert (leases / UNREADABLE_DIR / "torn.json").read_bytes() == b'{"owner_run_id": "r'
        _, logged_again = _tick(tmp_path)
        assert not any("unreadable lease" in line for line in logged_again)
    finally:
        server.kill()
        server.wait()


def test_a_lease_whose_owner_pid_was_reused_counts_as_a_dead_owner(tmp_path):
    # The owner died and the kernel gave its pid to this (living, unrelated) process.
    lease = replace(new_lease("run-1", "v3-8xh200", None, os.getpid()), owner_start="another-boot:1")
    assert lease.owner_alive() is False
    assert "run worker (pid" in lease_over(lease, _run(dg.DagsterRunStatus.STARTED))
    assert new_lease("run-1", "v3-8xh200", None, os.getpid()).owner_alive() is True


def test_a_reused_process_group_id_is_not_signalled(tmp_path):
    leases = tmp_path / "leases"
    unrelated = _own_group()
    try:
        # The lease's group ended long ago; an unrelated process group now has its id.
        lease = replace(new_lease("run-1", "v3-8xh200", unrelated.pid, _dead_pid()), group_start="another-boot:1")
        write_lease(leases, lease)
        ended = end_lease(leases, "run-1", grace_s=1.0)  # the lease ends: its server is gone
        assert ended is not None and ended.check.verdict is GroupVerdict.GONE and not ended.signalled
        assert unrelated.poll() is None and group_alive(unrelated.pid)  # and the unrelated group lives on
        assert not (leases / "run-1.json").exists()
    finally:
        unrelated.kill()
        unrelated.wait()


def test_a_group_whose_leader_has_exited_is_not_signalled_and_its_members_are_named(tmp_path):
    leases = tmp_path / "leases"
    # A leader that leaves a member behind in its group, as a crashed launcher would, or a program that daemonized
    # after the kernel handed it the server's old group id.
    leader = subprocess.Popen(["sh", "-c", "sleep 600 & read line"], stdin=subprocess.PIPE, start_new_session=True)
    try:
        _wait_until(lambda: len(group_members(leader.pid)) == 2)
        write_lease(leases, new_lease("run-1", "v3-8xh200", leader.pid, _dead_pid()))
        assert leader.stdin is not None
        leader.stdin.close()  # the leader exits; its sleep stays in the group
        leader.wait(timeout=10)
        (member,) = group_members(leader.pid)
        ended = end_lease(leases, "run-1", grace_s=1.0)
        assert ended is not None and not ended.signalled and ended.check.verdict is GroupVerdict.UNPROVEN
        assert ended.set_aside_to == leases / UNPROVEN_DIR / "run-1.json" and ended.set_aside_to.exists()
        assert f"{member} (sleep 600)" in ended.check.why and f"kill -- -{leader.pid}" in ended.check.why
        assert group_members(leader.pid) == [member]  # left alone
    finally:
        if group_members(leader.pid):
            os.killpg(leader.pid, signal.SIGKILL)
        leader.wait()


def _wait_until(condition, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_lease_of_the_servers_own_group_stops_it(tmp_path):
    leases = tmp_path / "leases"
    server = _own_group()
    try:
        write_lease(leases, new_lease("run-1", "v3-8xh200", server.pid, os.getpid()))
        ended = end_lease(leases, "run-1", grace_s=5.0)
        assert ended is not None and ended.signalled
        assert server.wait(timeout=10) is not None
    finally:
        server.kill()
        server.wait()


def test_a_lease_whose_owner_has_exited_but_not_been_reaped_counts_as_a_dead_owner():
    owner = subprocess.Popen(["sleep", "0.5"])
    try:
        lease = new_lease("run-1", "v3-8xh200", None, owner.pid)
        assert lease.owner_alive() is True
        deadline = time.monotonic() + 10
        while process_start(owner.pid) is not None and time.monotonic() < deadline:
            time.sleep(0.05)  # it exits; its zombie stays until this test collects it
        os.kill(owner.pid, 0)  # the pid still answers a signal
        assert lease.owner_alive() is False
    finally:
        owner.wait()


@pytest.mark.skipif(smg_program() is None, reason="smg (SGLang's router) is pinned in pyproject.toml")
def test_a_fleets_lease_ended_stops_every_twin_and_the_router(tmp_path):
    # A real fleet (two `costbench sim` twins behind the real smg), leased to a run whose worker is gone.
    leases = tmp_path / "warehouse" / "runs" / "leases"
    fleet = FleetSpec(RouterSpec("cache_aware"), (WorkerGroup(WorkerRole.REGULAR, 2, 8),))
    spec = EndpointSpec("v3-fleet", EndpointMode.SIM, "deepseek-ai/DeepSeek-V3",
                        ("--tp", "8", "--sim-hardware", "h200", "--sim-warmup-s", "0"), "H200", 16, 3.5,
                        ready_timeout_s=60.0, fleet=fleet)  # fmt: skip
    lease = start_detached(spec, tmp_path / "run", on_spawned=lambda group: write_lease(
        leases, new_lease("run-gone", spec.name, group, _dead_pid())))  # fmt: skip
    members = group_members(lease.process_group)
    try:
        assert len(members) >= 3  # the twins and the router share the one group the lease names
        message, _ = _tick(tmp_path)
        assert "v3-fleet" in message and not (leases / "run-gone.json").exists()
        assert [pid for pid in members if process_start(pid) is not None] == []  # every one of them stopped
    finally:
        if group_members(lease.process_group):  # only when the test failed: a stopped group's id may be reused
            stop_group_by_id(lease.process_group, grace_s=1.0)


# --- Leases naming a group the sensor must never signal, and files in the folder that are not files. ---
# The sensor ticks in a process of its own (as it does under dagster-daemon), in a session of its own: were it to
# signal its own group or its parent's, only that session would go, not the test runner.

_TICKER = """
import json, logging, os, sys
import dagster as dg
from assets.resources import WarehouseResource
from endpoints.lease_file import new_lease, write_lease
from pipelines.lease_sensor import endpoint_lease_sensor

root, dead_pid, groups = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
warehouse = WarehouseResource(root=root)
for name in groups:  # leases naming this process's own group and its parent's, whose worker is gone
    group = {"own": os.getpgrp(), "parent": os.getpgid(os.getppid())}[name]
    write_lease(warehouse.leases_dir(), new_lease(f"run-{name}", f"endpoint-{name}", group, dead_pid))
lines = []
handler = logging.Handler()
handler.emit = lambda record: lines.append(record.getMessage())
with dg.instance_for_test() as instance:
    context = dg.build_sensor_context(instance=instance, resources={"warehouse": warehouse})
    context.log.addHandler(handler)
    skipped = endpoint_lease_sensor(context).skip_message
print(json.dumps({"skipped": skipped, "logged": lines}), flush=True)
"""
# Its parent: the leader of a session of its own, which starts the ticker in a process group of its own.
_TICKER_PARENT = """
import subprocess, sys
code = subprocess.Popen(sys.argv[1:], process_group=0).wait()
print(f"ticker exit {code}", flush=True)
"""
TICK_BOUND_S = 120.0  # importing Dagster and one tick on a busy 2-core machine; a FIFO opened for reading: forever


def _reaped_server() -> subprocess.Popen:
    """_own_group, reaped the moment it exits: the sensor's stop sees the group gone, not held by a zombie until
    the test gets to wait() for it (which held it for the whole 15 s grace)."""
    server = _own_group()
    threading.Thread(target=server.wait, daemon=True).start()
    return server


def _session_members(session: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        if int(text[text.rindex(")") + 2 :].split()[3]) == session:
            found.append(int(stat.parent.name))
    return found


def _tick_in_own_session(root: Path, *groups: str) -> tuple[int, dict]:
    """One tick of the lease sensor in a child process; the exit status of the parent it had, and what it said."""
    parent = subprocess.Popen(
        [sys.executable, "-c", _TICKER_PARENT, sys.executable, "-c", _TICKER, str(root), str(_dead_pid()), *groups],
        stdout=subprocess.PIPE, start_new_session=True, text=True,
    )  # fmt: skip
    try:
        out, _ = parent.communicate(timeout=TICK_BOUND_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"one tick of the lease sensor took over {TICK_BOUND_S:.0f} s")
    finally:
        for pid in _session_members(parent.pid):  # the ticker too, which has a group of its own
            os.kill(pid, signal.SIGKILL)
        parent.wait()
    lines = out.splitlines()
    said = json.loads(lines[0]) if lines and lines[0].startswith("{") else {}
    assert lines and lines[-1] == "ticker exit 0", out  # a signalled ticker, or parent, says nothing of the sort
    return parent.returncode, said


def test_group_0_1_and_negative_are_never_a_servers():
    for group in (0, 1, -1):
        lease = replace(new_lease("run-1", "v3-8xh200", None, _dead_pid()), process_group=group, group_start="b:1")
        check = check_group(lease)
        assert check.verdict is GroupVerdict.UNPROVEN and f"process group {group} is never" in check.why


def test_the_sensor_never_signals_group_0_its_own_its_parents_or_a_group_it_cannot_prove(tmp_path):
    root = tmp_path / "warehouse"
    leases = WarehouseResource(root=str(root)).leases_dir()
    server, unproven = _reaped_server(), _own_group()
    try:
        write_lease(leases, new_lease("run-server", "v3-8xh200", server.pid, _dead_pid()))  # a real one: stopped
        write_lease(leases, new_lease("run-zero", "endpoint-zero", 0, _dead_pid()))  # killpg(0): the sensor's own
        # A lease of an older release: no start of its leader recorded, so nothing proves the group is its server's.
        old = replace(new_lease("run-old", "endpoint-old", unproven.pid, _dead_pid()), group_start=None)
        write_lease(leases, old)
        code, said = _tick_in_own_session(root, "own", "parent")
        assert code == 0
        assert server.wait(timeout=30) is not None  # the proven one is stopped in the same tick
        assert unproven.poll() is None and group_alive(unproven.pid)
        # Each other lease is set aside, unsignalled, and the log says which group and why.
        assert sorted(p.name for p in (leases / UNPROVEN_DIR).iterdir()) == [
            "run-old.json", "run-own.json", "run-parent.json", "run-zero.json",
        ]  # fmt: skip
        assert list(leases.glob("*.json")) == []
        warned = [line for line in said["logged"] if "set aside" in line and "not signalled" in line]
        assert len(warned) == 4, said
        assert any("process group 0 is never a server's" in line for line in warned), warned
        assert sum("this process's own, or its daemon's or an ancestor's" in line for line in warned) == 2, warned
        assert any(f"nothing proves process group {unproven.pid}" in line for line in warned), warned
        assert "v3-8xh200" in said["skipped"]
    finally:
        for process in (server, unproven):
            process.kill()
            process.wait()


def test_a_directory_or_fifo_named_json_is_set_aside_unopened_and_the_others_still_ended(tmp_path):
    root = tmp_path / "warehouse"
    leases = WarehouseResource(root=str(root)).leases_dir()
    server = _reaped_server()
    try:
        write_lease(leases, new_lease("run-server", "v3-8xh200", server.pid, _dead_pid()))
        (leases / "folder.json").mkdir()
        (leases / "folder.json" / "inside").write_text("kept")
        os.mkfifo(leases / "pipe.json")  # opened for reading, it would block until someone wrote to it
        (leases / "huge.json").write_bytes(b" " * 200_000 + b"{}")
        code, said = _tick_in_own_session(root)
        assert code == 0 and "v3-8xh200" in said["skipped"]
        assert server.wait(timeout=30) is not None
        aside = leases / UNREADABLE_DIR
        assert sorted(p.name for p in aside.iterdir()) == ["folder.json", "huge.json", "pipe.json"]
        assert (aside / "folder.json" / "inside").read_text() == "kept"
        logged = " | ".join(said["logged"])
        assert "folder.json" in logged and "not a regular file (a directory)" in logged, logged
        assert "pipe.json" in logged and "not a regular file (a FIFO)" in logged, logged
        assert "huge.json" in logged and "more than 65,536 bytes" in logged, logged
    finally:
        server.kill()
        server.wait()


def _broken_scenarios(tmp_path: Path, breakage: str) -> Path:
    scenarios = tmp_path / "scenarios.yaml"
    if breakage == "missing-key":
        raw = yaml.safe_load(default_scenarios_path().read_text())
        del raw["scenarios"][0]["endpoint"]
        scenarios.write_text(yaml.safe_dump(raw))
    else:  # bytes no YAML reader takes
        scenarios.write_bytes(default_scenarios_path().read_bytes().replace(b"name: chat-v3-h200", b"name: chat\0", 1))
    return scenarios


def test_the_lease_sensor_of_a_code_location_with_a_scenario_missing_a_key_ticks(tmp_path):
    root = tmp_path / "warehouse"
    defs = build_definitions(scenarios_path=_broken_scenarios(tmp_path, "missing-key"), warehouse_root=root)
    server = _reaped_server()
    try:
        write_lease(WarehouseResource(root=str(root)).leases_dir(),
                    new_lease("run-gone", "v3-8xh200", server.pid, _dead_pid()))  # fmt: skip
        with dg.instance_for_test() as instance:
            context = dg.build_sensor_context(
                instance=instance, resources={"warehouse": WarehouseResource(root=str(root))}
            )
            assert "stopped v3-8xh200" in defs.resolve_sensor_def("endpoint_lease_sensor")(context).skip_message
        assert server.wait(timeout=30) is not None
    finally:
        server.kill()
        server.wait()


def test_a_scenarios_file_no_reader_takes_still_loads_the_code_location_and_its_lease_sensor(tmp_path, monkeypatch):
    # The sensor as dagster-daemon runs it: the code location loaded by a code server of its own. Where the file
    # is used, it still fails loudly: the scenarios_file sensor names it (test_pipelines_config_checked.py).
    root, home = tmp_path / "warehouse", tmp_path / "home"
    home.mkdir()
    server = _reaped_server()
    try:
        write_lease(WarehouseResource(root=str(root)).leases_dir(),
                    new_lease("run-gone", "v3-8xh200", server.pid, _dead_pid()))  # fmt: skip
        env = {**os.environ, "DAGSTER_HOME": str(home), "COSTBENCH_WAREHOUSE": str(root),
               "COSTBENCH_SCENARIOS": str(_broken_scenarios(tmp_path, "nul-byte"))}  # fmt: skip
        done = subprocess.run(
            [str(Path(sys.executable).parent / "dagster"), "sensor", "preview", "endpoint_lease_sensor",
             "-w", str(REPO / "workspace.yaml")],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=TICK_BOUND_S,
        )  # fmt: skip
        said = done.stdout + done.stderr
        assert done.returncode == 0 and "stopped v3-8xh200" in said, said[-3000:]
        assert server.wait(timeout=30) is not None
        broken = build_definitions(scenarios_path=_broken_scenarios(tmp_path, "nul-byte"), warehouse_root=root)
        monkeypatch.setenv(NOTICE_FILE_ENV, str(tmp_path / "notices.jsonl"))
        with dg.instance_for_test() as instance:
            context = dg.build_sensor_context(
                instance=instance, resources={"warehouse": WarehouseResource(root=str(root))}
            )
            with capture_logs(context) as logged:
                broken.resolve_sensor_def("scenarios_file")(context)
        assert any("(the whole file)" in line and "scenarios.yaml" in line for line in logged), logged
    finally:
        server.kill()
        server.wait()
