"""`dagster dev` from the repo root, with the shipped dagster.yaml and workspace.yaml, serves the UI on
loopback with the schedule (running), the sensor, the assets and the checks."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

QUERY = """
{ repositoriesOrError { ... on RepositoryConnection { nodes {
    schedules { name cronSchedule executionTimezone scheduleState { status } }
    sensors { name sensorState { status } }
    assetNodes { assetKey { path } hasAssetChecks }
} } } }
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _graphql(port: int) -> dict | None:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql", data=json.dumps({"query": QUERY}).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return json.loads(response.read())
    except OSError:
        return None


def test_dagster_dev_serves_schedule_sensor_assets_and_checks(tmp_path):
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "dagster.yaml", home / "dagster.yaml")
    port = _free_port()
    env = dict(os.environ, DAGSTER_HOME=str(home))
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "dagster"), "dev", "-h", "127.0.0.1", "-p", str(port), "-w", "workspace.yaml"],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        answer = None
        while time.monotonic() < deadline:
            answer = _graphql(port)
            if answer and answer.get("data", {}).get("repositoriesOrError", {}).get("nodes"):
                break
            assert process.poll() is None, "dagster dev exited early"
            time.sleep(1)
        repo = answer["data"]["repositoriesOrError"]["nodes"][0]
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)

    schedules = {s["name"]: s for s in repo["schedules"]}
    weekly = schedules["weekly_benchmark_schedule"]
    assert (weekly["cronSchedule"], weekly["executionTimezone"]) == ("0 6 * * 1", "UTC")
    assert weekly["scheduleState"]["status"] == "RUNNING"
    assert {s["name"]: s["sensorState"]["status"] for s in repo["sensors"]}["failure_notice"] == "RUNNING"
    assets = {"/".join(a["assetKey"]["path"]): a for a in repo["assetNodes"]}
    assert {"workload", "replay_run", "requests_lake", "runs_lake", "weekly_trends"} <= set(assets)
    assert assets["requests_lake"]["hasAssetChecks"] and assets["weekly_trends"]["hasAssetChecks"]
