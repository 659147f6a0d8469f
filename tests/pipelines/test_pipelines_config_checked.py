"""Configuration is checked before anything starts: a bad scenarios file stops the code location from
loading; a bad endpoints file fails the replay's first step before an endpoint is started."""

from __future__ import annotations

import dagster as dg
import pytest
import yaml

from assets.replay_asset import start_endpoint
from assets.resources import ScenarioCatalog, WarehouseResource
from endpoints.spec import EndpointSpecError
from pipelines.definitions import build_definitions
from workloads.scenarios import ScenarioError, default_endpoints_path, default_scenarios_path


def test_a_bad_scenarios_file_stops_the_definitions_from_loading(tmp_path):
    raw = yaml.safe_load(default_scenarios_path().read_text())
    raw["scenarios"][1]["slo"]["ttft_ms"] = "fast"
    raw["scenarios"][2]["shard"] = 2
    path = tmp_path / "scenarios.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ScenarioError) as error:
        build_definitions(scenarios_path=path, warehouse_root=tmp_path / "wh")
    assert str(error.value).splitlines() == [
        f"{path}: scenarios[1].slo.ttft_ms: must be a number, got 'fast' (scenario 'chat-v3-h200-canary')",
        f"{path}: scenarios[2].shard: unknown key (did you mean 'shards'?) (scenario 'reasoning-r1-h200-canary')",
    ]


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
