"""`dagster dev` from the repo root, with the shipped dagster.yaml and workspace.yaml, serves the UI on
loopback with the schedule (running), the sensors, the assets and the checks; and a partition
materialized from the asset graph, as the UI's Materialize button launches it, runs to success through
the instance's queue, launcher and the job's own executor."""

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

import yaml

REPO = Path(__file__).resolve().parents[2]

QUERY = """
{ repositoriesOrError { ... on RepositoryConnection { nodes {
    name location { name }
    schedules { name cronSchedule executionTimezone scheduleState { status } }
    sensors { name sensorState { status } }
    assetNodes { assetKey { path } hasAssetChecks isMaterializable }
} } } }
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# What the UI sends when Materialize is pressed on selected assets for one partition.
LAUNCH = """
mutation Launch($params: ExecutionParams!) { launchPipelineExecution(executionParams: $params) {
    __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }
"""
RUN_STATUS = "query Status($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }"
UI_WEEK, UI_SCENARIO = "2026-11-16", "reasoning-r1-h200-canary"


def _graphql(port: int, query: str = QUERY, variables: dict | None = None) -> dict | None:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query, "variables": variables or {}}).encode(),
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
    # The bundled scenarios under their names, their windows cut to 10 s ($COSTBENCH_SCENARIOS: what the
    # code location loads), so the Materialize run takes seconds.
    raw = yaml.safe_load((REPO / "workloads" / "scenarios.yaml").read_text())
    for entry in raw["scenarios"]:
        entry["duration_s"] = 10
    scenarios = tmp_path / "scenarios.yaml"
    scenarios.write_text(yaml.safe_dump(raw, sort_keys=False))
    env = dict(os.environ, DAGSTER_HOME=str(home), COSTBENCH_WAREHOUSE=str(tmp_path / "warehouse"),
               COSTBENCH_SCENARIOS=str(scenarios))  # fmt: skip
    process = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "dagster"),
            "dev",
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
            "-w",
            "workspace.yaml",
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        start_new_session=True,
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
        status = _materialize_from_the_asset_graph(port, repo)
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
    sensors = {s["name"]: s["sensorState"]["status"] for s in repo["sensors"]}
    assert sensors["failure_notice"] == sensors["endpoint_lease_sensor"] == "RUNNING"
    assets = {"/".join(a["assetKey"]["path"]): a for a in repo["assetNodes"]}
    assert {"workload", "replay_run", "requests_lake", "runs_lake", "weekly_trends"} <= set(assets)
    assert assets["requests_lake"]["hasAssetChecks"] and assets["weekly_trends"]["hasAssetChecks"]
    # Each mart is its own asset (the dbt project's models), its dbt tests its checks; the lake's views are its sources.
    assert {"run_summary", "cost_attribution", "diagnoses", "cost_intervals", "weekly_drift"} <= set(assets)
    assert assets["run_summary"]["hasAssetChecks"] and assets["diagnoses"]["hasAssetChecks"]
    assert status == "SUCCESS"
    lake = tmp_path / "warehouse" / "lake" / "requests" / f"week={UI_WEEK}" / f"scenario={UI_SCENARIO}"
    assert (lake / "part-0.parquet").exists()
    assert (tmp_path / "warehouse" / "reports" / f"week={UI_WEEK}.html").exists()
    focus = (tmp_path / "warehouse" / "reports" / f"focus_week={UI_WEEK}.csv").read_text().splitlines()
    assert (
        focus[0].startswith('"BilledCost","BillingAccountId"') and len(focus) == 2
    )  # a row per endpoint, billing its week: the canary's two runs are one fleet's


def _materialize_from_the_asset_graph(port: int, repo: dict) -> str:
    partition = f"{UI_SCENARIO}|{UI_WEEK}"
    params = {
        "selector": {
            "repositoryLocationName": repo["location"]["name"], "repositoryName": repo["name"],
            "pipelineName": "__ASSET_JOB",
            # Every asset of the (week, scenario) graph that a run makes (not the marts' external sources: the prices,
            # the lake's audit); the twin's calibration is partitioned by week alone.
            "assetSelection": [{"path": a["assetKey"]["path"]} for a in repo["assetNodes"]
                               if a["isMaterializable"] and a["assetKey"]["path"] != ["twin_calibration"]],
        },
        "executionMetadata": {"tags": [
            {"key": "dagster/partition", "value": partition},
            {"key": "dagster/partition/scenario", "value": UI_SCENARIO},
            {"key": "dagster/partition/week", "value": UI_WEEK},
        ]},
        "mode": "default",
    }  # fmt: skip
    launched = _graphql(port, LAUNCH, {"params": params})["data"]["launchPipelineExecution"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    run_id = launched["run"]["runId"]
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        status = _graphql(port, RUN_STATUS, {"id": run_id})["data"]["runOrError"]["status"]
        if status in ("SUCCESS", "FAILURE", "CANCELED"):
            return status
        time.sleep(1)
    return "still running after 300 s"
