"""When the lease sensor ends an endpoint's lease, and when it must leave it alone (real processes)."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import dagster as dg
import pytest

from assets.resources import WarehouseResource
from endpoints.fleet_commands import smg_program
from endpoints.lease_file import UNREADABLE_DIR, LeaseRecord, end_lease, new_lease, write_lease
from endpoints.process_group import group_alive, process_start, stop_group_by_id
from endpoints.provision import start_detached
from endpoints.router.router_spec import RouterSpec
from endpoints.spec import EndpointMode, EndpointSpec, FleetSpec, WorkerGroup, WorkerRole
from pipelines.lease_sensor import endpoint_lease_sensor, lease_over
from process_members import group_members


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
        assert end_lease(leases, "run-1", grace_s=1.0) is True  # the lease ends: its server is gone
        assert unrelated.poll() is None and group_alive(unrelated.pid)  # and the unrelated group lives on
        assert not (leases / "run-1.json").exists()
    finally:
        unrelated.kill()
        unrelated.wait()


def test_a_lease_of_the_servers_own_group_stops_it(tmp_path):
    leases = tmp_path / "leases"
    server = _own_group()
    try:
        write_lease(leases, new_lease("run-1", "v3-8xh200", server.pid, os.getpid()))
        assert end_lease(leases, "run-1", grace_s=5.0) is True
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
