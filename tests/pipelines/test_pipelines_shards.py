"""Replay shards run in parallel under the job's own (multiprocess) executor: two shard steps in two
processes meet at a rendezvous and share one t0 on one endpoint, and the merged run holds exactly the
unsharded request set."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import dagster as dg
import pyarrow.parquet as pq

from pipelines.definitions import WEEKLY_JOB, build_definitions
from replay.recording.run_json import read_run_json
from workloads.readers.reader_registry import read_trace

REPO = Path(__file__).resolve().parents[2]
SCENARIOS_ENV = "COSTBENCH_TEST_SHARD_SCENARIOS"
WAREHOUSE_ENV = "COSTBENCH_TEST_SHARD_WAREHOUSE"


def sharded_job() -> dg.JobDefinition:
    """Rebuilt in every step process (reconstructable), from paths the test puts in the environment."""
    defs = build_definitions(
        scenarios_path=Path(os.environ[SCENARIOS_ENV]), warehouse_root=Path(os.environ[WAREHOUSE_ENV])
    )
    return defs.resolve_job_def(WEEKLY_JOB)


def test_two_shards_replay_in_parallel_processes_and_merge_to_the_whole_window(tmp_path, monkeypatch):
    scenarios = tmp_path / "scenarios.yaml"
    scenarios.write_text(
        "scenarios:\n  - name: sharded\n    trace: workloads/traces/azure_conv_2023.csv\n    format: azure\n"
        "    start_s: 2614\n    duration_s: 4\n    speedup: 1\n    endpoint: v3-8xh200\n    shards: 2\n"
        "    slo: {ttft_ms: 2000, tpot_ms: 100}\n"
    )
    warehouse = tmp_path / "warehouse"
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "dagster.yaml", home / "dagster.yaml")
    monkeypatch.setenv(SCENARIOS_ENV, str(scenarios))
    monkeypatch.setenv(WAREHOUSE_ENV, str(warehouse))
    monkeypatch.setenv("DAGSTER_HOME", str(home))

    key = dg.MultiPartitionKey({"week": "2026-11-16", "scenario": "sharded"})
    with dg.DagsterInstance.get() as instance:
        result = dg.execute_job(
            # Step processes import sharded_job from this file, found from the tests folder.
            dg.build_reconstructable_job(
                Path(__file__).stem, sharded_job.__name__, reconstructor_working_directory=str(Path(__file__).parent)
            ),
            instance,
            tags={
                "dagster/partition": str(key),
                "dagster/partition/week": "2026-11-16",
                "dagster/partition/scenario": "sharded",
            },
        )
        assert result.success
        starts = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_START]
    shard_pids = {e.pid for e in starts if e.step_key.startswith("replay_run.replay_shard")}
    assert len(shard_pids) == 2  # each shard in its own process

    [run_dir] = [p for p in (warehouse / "runs" / "week=2026-11-16" / "scenario=sharded").iterdir() if p.is_dir()]
    shard_infos = [read_run_json(run_dir / f"shard-{k}") for k in (0, 1)]
    assert {i.shard_index for i in shard_infos} == {0, 1}
    assert shard_infos[0].t0_wall_s == shard_infos[1].t0_wall_s  # one shared t0
    assert sorted(p.name for p in (run_dir / "rendezvous").iterdir()) == ["shard-0.ready", "shard-1.ready"]
    assert all(i.requests_total > 0 for i in shard_infos)

    expected = read_trace(REPO / "workloads/traces/azure_conv_2023.csv", "azure").window(2614, 4)
    lake = pq.read_table(warehouse / "lake" / "requests" / "week=2026-11-16" / "scenario=sharded" / "part-0.parquet")
    ids = lake.column("request_id").to_pylist()
    assert sorted(ids) == sorted(expected.table.column("request_id").to_pylist())  # the union, nothing twice
    assert set(lake.column("status").to_pylist()) == {"ok"}
    merged = read_run_json(run_dir)
    assert (merged.shard_count, merged.requests_total, merged.requests_ok) == (1, len(ids), len(ids))
    assert merged.config_fingerprint  # the endpoint's configuration, from its server facts
