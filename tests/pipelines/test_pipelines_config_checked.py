"""Configuration is checked before anything starts: a bad scenario is set aside and named while the other
scenarios and every sensor load; a bad endpoints file fails the replay's first step before an endpoint is started."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import orjson
import pytest
import yaml

from assets.replay_asset import start_endpoint
from assets.resources import ScenarioCatalog, WarehouseResource
from endpoints.spec import EndpointSpecError
from pipelines.definitions import WEEKLY_JOB, build_definitions
from pipelines.failure_notice import NOTICE_FILE_ENV
from workloads.scenarios import ScenarioError, default_endpoints_path, default_scenarios_path, load_scenarios

REPO = Path(__file__).resolve().parents[2]


def test_a_bad_scenario_is_set_aside_and_named_while_the_others_and_every_sensor_load(tmp_path, monkeypatch):
    raw = yaml.safe_load(default_scenarios_path().read_text())
    raw["scenarios"][1]["slo"]["ttft_ms"] = "fast"
    raw["scenarios"][2]["shard"] = 2
    path = tmp_path / "scenarios.yaml"
    path.write_text(yaml.safe_dump(raw))
    defs = build_definitions(scenarios_path=path, warehouse_root=tmp_path / "wh")
    partitions = defs.resolve_job_def(WEEKLY_JOB).partitions_def
    assert sorted(partitions.get_partitions_def_for_dimension("scenario").get_partition_keys()) == [
        "chat-v3-h200", "reasoning-r1-h200-prompt-json",
    ]  # fmt: skip
    names = {s.name for s in defs.sensors}
    assert {"failure_notice", "endpoint_lease_sensor", "regression_notice", "scenarios_file"} <= names
    assert defs.resolve_schedule_def("weekly_benchmark_schedule") is not None
    # The sensor names each one with the loader's own lines, on every tick, and tells it once.
    notices = tmp_path / "notices.jsonl"
    monkeypatch.setenv(NOTICE_FILE_ENV, str(notices))
    sensor = defs.resolve_sensor_def("scenarios_file")
    with dg.instance_for_test() as instance:
        context = dg.build_sensor_context(
            instance=instance, resources={"warehouse": WarehouseResource(root=str(tmp_path / "wh"))}
        )
        skipped = sensor(context)
        assert "2 scenario(s) set aside" in skipped.skip_message and "chat-v3-h200-canary" in skipped.skip_message
        told = [orjson.loads(line) for line in notices.read_bytes().splitlines()]
        assert {(n["kind"], n["scenario"]) for n in told} == {
            ("scenario_config", "chat-v3-h200-canary"), ("scenario_config", "reasoning-r1-h200-canary"),
        }  # fmt: skip
        assert any("scenarios[1].slo.ttft_ms: must be a number, got 'fast'" in n["problem"] for n in told)
        assert any("scenarios[2].shard: unknown key (did you mean 'shards'?)" in n["problem"] for n in told)
        sensor(dg.build_sensor_context(instance=instance, cursor=context.cursor,
                                       resources={"warehouse": WarehouseResource(root=str(tmp_path / "wh"))}))  # fmt: skip
        assert len(notices.read_bytes().splitlines()) == 2  # the same problems: not told again
    # Strict loading (make validate, costbench run) still refuses the file, naming both problems.
    with pytest.raises(ScenarioError) as error:
        load_scenarios(path, REPO)
    assert str(error.value).splitlines() == [
        f"{path}: scenarios[1].slo.ttft_ms: must be a number, got 'fast' (scenario 'chat-v3-h200-canary')",
        f"{path}: scenarios[2].shard: unknown key (did you mean 'shards'?) (scenario 'reasoning-r1-h200-canary')",
    ]


def test_a_file_that_is_not_yaml_leaves_no_scenario_but_every_sensor(tmp_path):
    path = tmp_path / "scenarios.yaml"
    path.write_text("scenarios: [\n")
    defs = build_definitions(scenarios_path=path, warehouse_root=tmp_path / "wh")
    assert {"failure_notice", "endpoint_lease_sensor", "scenarios_file"} <= {s.name for s in defs.sensors}


def test_a_bad_endpoints_file_fails_the_first_step_before_any_endpoint_starts(tmp_path):
    raw = yaml.safe_load(default_endpoints_path().read_text())
    raw["endpoints"][0]["name"] = "../../../outside"  # once, its server log would have been written there
    raw["endpoints"][1]["gpu_count"] = "8"
    path = tmp_path / "endpoints.yaml"
    path.write_text(yaml.safe_dump(raw))
    root = tmp_path / "wh"
    context = dg.build_op_context(
        partition_key=dg.MultiPartitionKey({"week": "2026-11-16", "scenario": "chat-v3-h200-canary"}),
        resources={
            "catalog": ScenarioCatalog(endpoints_path=str(path)),
            "warehouse": WarehouseResource(root=str(root)),
        },
    )
    with pytest.raises(EndpointSpecError) as error:
        list(start_endpoint(context))
    assert str(error.value).splitlines() == [
        f"{path}: endpoints[0].name: must match ^[A-Za-z0-9][A-Za-z0-9._-]{{0,127}}$ (it becomes a folder and a "
        "file name), got '../../../outside'",
        f"{path}: endpoints[1].gpu_count: must be a whole number, got '8' (endpoint 'v3-8xh200-chat')",
    ]
    assert not root.exists()  # no run folder, no lease, no server
    assert not (tmp_path.parent / "outside.server.log").exists()
