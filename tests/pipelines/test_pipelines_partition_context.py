"""Each step of the weekly job resolves its partition (scenario, endpoint as of the week) through
ScenarioCatalog.partition, which reads and validates the scenarios and endpoints files once per process: the
steps of a run in one process read each file once, and a file edited before the next run is read again."""

from __future__ import annotations

from collections import Counter

import dagster as dg
import pytest
import yaml

import assets.resources
from pipelines.definitions import WEEKLY_JOB, build_definitions

pytestmark = pytest.mark.filterwarnings("ignore:Specifying a partitions_def on an AssetCheckSpec")

SCENARIO = {
    "name": "read-once", "trace": "workloads/traces/mooncake_conversation.jsonl", "format": "mooncake",
    "start_s": 0, "duration_s": 4, "speedup": 2.0, "endpoint": "twin", "slo": {"ttft_ms": 2000, "tpot_ms": 100},
}  # fmt: skip
ENDPOINT = {
    "name": "twin", "mode": "sim", "model": "deepseek-ai/DeepSeek-V3",
    "server_args": ["--tp", "8", "--sim-hardware", "h200", "--sim-warmup-s", "0"],
    "gpu_type": "H200", "gpu_count": 8, "usd_per_gpu_hour": 3.5, "clock": "virtual",
}  # fmt: skip
KEY = dg.MultiPartitionKey({"week": "2026-11-16", "scenario": "read-once"})


@pytest.mark.timeout(300)
def test_a_runs_steps_read_the_files_once_and_the_next_run_sees_an_edit(tmp_path, monkeypatch):
    scenarios, endpoints = tmp_path / "scenarios.yaml", tmp_path / "endpoints.yaml"
    scenarios.write_text(yaml.safe_dump({"scenarios": [SCENARIO]}))
    endpoints.write_text(yaml.safe_dump({"endpoints": [ENDPOINT]}))
    job = build_definitions(
        scenarios_path=scenarios, warehouse_root=tmp_path / "warehouse", endpoints_path=endpoints
    ).resolve_job_def(WEEKLY_JOB)
    reads: Counter[str] = Counter()

    def counted(name: str, load):
        def load_counted(path, *args, **kwargs):
            reads[name] += 1
            return load(path, *args, **kwargs)

        return load_counted

    monkeypatch.setattr(
        assets.resources, "load_scenario_file", counted("scenarios", assets.resources.load_scenario_file)
    )
    monkeypatch.setattr(
        assets.resources, "load_endpoint_specs", counted("endpoints", assets.resources.load_endpoint_specs)
    )

    def materialize(*names: str) -> dg.ExecuteInProcessResult:
        selection = [dg.AssetKey(name) for name in names]
        result = job.execute_in_process(
            partition_key=KEY, instance=dg.DagsterInstance.ephemeral(), asset_selection=selection
        )
        assert result.success
        return result

    first = materialize("workload", "replay_run", "runs_lake")
    steps = {e.step_key for e in first.all_events if e.event_type == dg.DagsterEventType.STEP_SUCCESS}
    assert {"workload", "replay_run.start_endpoint", "replay_run.replay_shard[shard_0]",
            "replay_run.measure_capacity", "runs_lake"} <= steps  # fmt: skip
    assert reads == {"scenarios": 1, "endpoints": 1}  # five steps resolved the partition, from one read of each

    def window_requests(result: dg.ExecuteInProcessResult) -> int:
        [materialization] = result.asset_materializations_for_node("workload")
        return materialization.metadata["window_requests"].value

    # An edited scenarios file is read again by the next run; the endpoints file, unchanged, is not.
    scenarios.write_text(yaml.safe_dump({"scenarios": [{**SCENARIO, "duration_s": 1}]}))
    second = materialize("workload")
    assert reads == {"scenarios": 2, "endpoints": 1}
    assert 0 < window_requests(second) < window_requests(first)
