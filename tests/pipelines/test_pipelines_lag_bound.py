"""A scenario's max_schedule_lag_p99_ms is the bound the weekly runs_quality check holds its runs to: a run whose
client fell 150 ms behind fails a scenario on the default (100 ms) and passes one that allows 250 ms, from the same
warehouse, through the check build_definitions wires."""

from __future__ import annotations

from datetime import date

import dagster as dg
import pytest
import yaml

from assets.resources import WarehouseResource
from pipelines.definitions import WEEKLY_JOB, build_definitions
from warehouse.backends.backend import open_warehouse
from warehouse_builders import endpoint, request, run_info, server_sample, write_run

WEEK = date(2026, 11, 16)


def _scenario(name: str, **extra) -> dict:
    return {
        "name": name, "trace": "workloads/traces/azure_conv_2023.csv", "format": "azure", "start_s": 2614,
        "duration_s": 6, "speedup": 1, "endpoint": "v3-8xh200-chat", "slo": {"ttft_ms": 1000, "tpot_ms": 100}, **extra,
    }  # fmt: skip


@pytest.fixture(scope="module")
def definitions_and_warehouse(tmp_path_factory):
    root = tmp_path_factory.mktemp("lag_bound")
    scenarios = root / "scenarios.yaml"
    entries = [_scenario("strict"), _scenario("shared-host", max_schedule_lag_p99_ms=250)]
    scenarios.write_text(yaml.safe_dump({"scenarios": entries}))
    warehouse = root / "wh"
    for name in ("strict", "shared-host"):
        info = run_info(f"run-{name}", 30.0, schedule_lag_p99_ms=150.0)
        records = [request(info.run_id, f"{name}-{i}", 200.0, 900.0) for i in range(3)]
        samples = [server_sample(info.run_id, at_s, "sglang:num_running_reqs", 2.0) for at_s in (0.0, 10.0)]
        write_run(warehouse / "lake", WEEK, name, info, endpoint(), records, server_samples=samples)
    open_warehouse(str(warehouse), warehouse).refresh()
    return build_definitions(scenarios_path=scenarios), warehouse


def _runs_quality(defs: dg.Definitions, warehouse, scenario: str) -> dg.AssetCheckEvaluation:
    """The check alone, on the week's stored runs (the job's executor in this process: what is tested is the bound)."""
    key = dg.MultiPartitionKey({"week": WEEK.isoformat(), "scenario": scenario})
    check = dg.AssetCheckKey(dg.AssetKey("weekly_trends"), "runs_quality")
    job = defs.resolve_job_def(WEEKLY_JOB).get_subset(asset_selection=set(), asset_check_selection={check})
    result = job.execute_in_process(
        partition_key=str(key),
        resources={"warehouse": WarehouseResource(root=str(warehouse))},
        raise_on_error=False,
    )
    [evaluation] = result.get_asset_check_evaluations()
    return evaluation


def test_the_scenarios_bound_decides_the_runs_quality_check(definitions_and_warehouse):
    defs, warehouse = definitions_and_warehouse
    strict = _runs_quality(defs, warehouse, "strict")
    assert not strict.passed
    [failure] = strict.metadata["failures"].data
    assert failure["rule"] == "schedule_lag_p99_ms <= 100" and failure["examples"] == [150.0]
    assert _runs_quality(defs, warehouse, "shared-host").passed
