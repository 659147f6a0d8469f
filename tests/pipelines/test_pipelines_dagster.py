"""The Dagster wiring: definitions load and validate; the shipped instance queues as documented.
Runs of the weekly job are tested as users' runs run, through the instance: test_pipelines_instance.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import date
from pathlib import Path

import dagster as dg

from pipelines.definitions import WEEKLY_JOB, defs

REPO = Path(__file__).resolve().parents[2]


def test_definitions_load_with_week_by_scenario_partitions_and_a_monday_schedule():
    job = defs.resolve_job_def(WEEKLY_JOB)
    partitions = job.partitions_def
    assert isinstance(partitions, dg.MultiPartitionsDefinition)
    assert {d.name for d in partitions.partitions_defs} == {"week", "scenario"}
    week = next(d for d in partitions.partitions_defs if d.name == "week").partitions_def
    assert {date.fromisoformat(k).weekday() for k in week.get_partition_keys()[:10]} == {0}
    schedule = defs.resolve_schedule_def(f"{WEEKLY_JOB}_schedule")
    assert schedule.cron_schedule == "0 6 * * 1"
    assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING
    # Monday 2026-11-23 06:00 UTC replays the week that started 2026-11-16, every scenario, tagged
    # with its endpoint so the run queue holds one replay per endpoint.
    from datetime import datetime, timezone

    context = dg.build_schedule_context(scheduled_execution_time=datetime(2026, 11, 23, 6, tzinfo=timezone.utc))
    requests = list(schedule(context))
    assert {r.partition_key.keys_by_dimension["week"] for r in requests} == {"2026-11-16"}
    assert {r.partition_key.keys_by_dimension["scenario"] for r in requests} == set(
        next(d for d in partitions.partitions_defs if d.name == "scenario").partitions_def.get_partition_keys()
    )
    assert all(r.tags["costbench/endpoint"] for r in requests)
    # The bundled endpoints are twins on a virtual clock: each run serves its own, so none takes a replay slot;
    # they count against the host's cores instead.
    assert not any("costbench/replay-slot" in r.tags for r in requests)
    assert all(r.tags["costbench/virtual-clock"] == r.tags["costbench/endpoint"] for r in requests)
    # Descriptions and column schemas (from warehouse/schema.sql) are what the UI shows for each asset.
    for name in ("requests_lake", "runs_lake", "server_samples_lake", "gpu_samples_lake", "weekly_trends"):
        spec = next(s for s in defs.resolve_all_asset_specs() if s.key.path == [name])
        assert spec.description
        columns = spec.metadata["dagster/column_schema"].columns
        assert len(columns) > 5 and all(c.description for c in columns)
    checks = {key.name for key in defs.resolve_asset_graph().asset_check_keys}
    assert {"requests_quality", "cost_regression"} <= checks


def test_a_run_on_an_endpoint_in_real_time_takes_that_endpoints_replay_slot(tmp_path):
    import yaml

    from pipelines.definitions import build_definitions

    raw = yaml.safe_load((REPO / "workloads" / "endpoints.yaml").read_text())
    for entry in raw["endpoints"]:
        entry.pop("clock", None)  # every twin back in real time, its own process
    endpoints = tmp_path / "endpoints.yaml"
    endpoints.write_text(yaml.safe_dump(raw))
    job = build_definitions(endpoints_path=endpoints, warehouse_root=tmp_path / "wh").resolve_job_def(WEEKLY_JOB)
    key = dg.MultiPartitionKey({"week": "2026-11-16", "scenario": "chat-v3-h200-canary"})
    tags = job.partitioned_config.get_tags_for_partition_key(str(key), job_name=WEEKLY_JOB)
    assert tags["costbench/endpoint"] == tags["costbench/replay-slot"] == "v3-8xh200-chat"
    assert "costbench/virtual-clock" not in tags


# The marts' asset graph as a fresh process loads it: imported as the code server and run workers import it, or
# after dbt-core (as a process that refreshed first). JSON on stdout.
_MARTS_GRAPH = """
import json, sys
if sys.argv[1] == "dbt-core-first":
    import dbt.version
import dagster as dg
from pipelines.definitions import defs
import dagster_dbt.compat

def shown(value):  # the translator is an object: its type, not its address
    return type(value).__name__ if hasattr(value, "__dict__") and not isinstance(value, type) else str(value)

marts = defs.get_repository_def().assets_defs_by_key[dg.AssetKey("weekly_trends")]
print(json.dumps({
    "dbt_core_imported": "dbt" in sys.modules,
    "dagster_dbt_saw_dbt_core": dagster_dbt.compat.DBT_PYTHON_VERSION is not None,
    "assets": sorted(
        [s.key.to_user_string(), sorted(d.asset_key.to_user_string() for d in s.deps), s.group_name, s.description,
         sorted(s.kinds), sorted(s.tags.items()), sorted((k, shown(v)) for k, v in s.metadata.items())]
        for s in marts.specs
    ),
    "checks": sorted(
        [c.key.to_user_string(), c.description, c.blocking, sorted((k, shown(v)) for k, v in c.metadata.items())]
        for c in marts.check_specs
    ),
}))
"""


def test_loading_the_code_imports_no_dbt_core_and_the_marts_graph_is_the_same_with_it():
    """assets/mart_assets.py keeps dbt-core out of view while dagster-dbt imports (the build imports it when it
    runs): the marts' assets, their lineage and their checks must be what dagster-dbt makes with dbt-core."""

    def graph(mode: str) -> dict:
        done = subprocess.run([sys.executable, "-c", _MARTS_GRAPH, mode], cwd=REPO, capture_output=True, text=True,
                              timeout=180)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout)

    plain, after_dbt = graph("plain"), graph("dbt-core-first")
    assert not plain["dbt_core_imported"] and not plain["dagster_dbt_saw_dbt_core"]
    assert after_dbt["dagster_dbt_saw_dbt_core"]
    assert len(plain["assets"]) >= 10 and len(plain["checks"]) >= 8
    assert plain["assets"] == after_dbt["assets"] and plain["checks"] == after_dbt["checks"]


def test_dagster_definitions_validate_passes(tmp_path):
    env = dict(os.environ, DAGSTER_HOME=str(tmp_path))
    (tmp_path / "dagster.yaml").write_text((REPO / "dagster.yaml").read_text())
    done = subprocess.run(
        [str(Path(sys.executable).parent / "dagster"), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_shipped_instance_queues_runs_one_per_endpoint_and_one_warehouse_writer(tmp_path, monkeypatch):
    """dagster.yaml as shipped: queued runs, at most one run per replay slot (an endpoint in real time), pools
    of one (the warehouse_writer pool of weekly_trends)."""
    shutil.copy(REPO / "dagster.yaml", tmp_path / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    with dg.DagsterInstance.get() as instance:
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
        config = instance.get_concurrency_config()
    per_value = {"applyLimitPerUniqueValue": True}
    assert list(config.run_queue_config.tag_concurrency_limits) == [
        {"key": "costbench/replay-slot", "value": per_value, "limit": 1},
        {"key": "dagster/partition/scenario", "value": per_value, "limit": 1},  # asset-graph launches too
        {"key": "costbench/virtual-clock", "limit": 2},  # a core each
    ]
    assert config.pool_config.default_pool_limit == 1
    trends = next(a for a in defs.resolve_asset_graph().assets_defs if dg.AssetKey("weekly_trends") in a.keys)
    assert "warehouse_writer" in {op.pool for op in trends.node_def.iterate_op_defs()}
