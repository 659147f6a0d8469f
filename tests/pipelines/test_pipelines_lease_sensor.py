"""When the lease sensor ends an endpoint's lease, and when it must leave it alone (real processes)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import dagster as dg

from endpoints.lease_file import LeaseRecord
from pipelines.lease_sensor import lease_over


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
