"""The diagnoses model: the four-numbers verdict, one test per branch, on run_summary rows set by hand (the model
built by `dbt build --select diagnoses` over a run_summary typed by its own contract)."""

from __future__ import annotations

import json
import tempfile
from datetime import date
from pathlib import Path

import duckdb
import pytest

from warehouse.column_docs import column_docs
from warehouse.marts.dbt_build import DB_FILE, MartBuildError, build_marts, connect_build


def _create_table(con: duckdb.DuckDBPyConnection, name: str) -> None:
    # The model's own contract (its YAML), so a column renamed there breaks this test too.
    columns = ", ".join(f"{doc.name} {doc.sql_type}" for doc in column_docs(name))
    con.execute(f"CREATE TABLE {name} ({columns})")


def _diagnose(**numbers) -> dict:
    [result] = _diagnose_runs([numbers])
    return result


def _diagnose_runs(runs: list[dict]) -> list[dict]:
    row = dict(
        run_id="r1",
        week_start=date(2025, 3, 3),
        scenario="chat",
        endpoint="v3",
        backend="sglang",
        model="deepseek-ai/DeepSeek-V3",
        gpu_type="H200",
        gpu_count=8,
        usd_per_gpu_hour=2.0,
        hours_per_week=168.0,
        week_spend_usd=8 * 2.0 * 168.0,
        completed_requests=100,
        failed_requests=0,
        cancelled_requests=0,
        server_sample_count=10,
        gpu_sample_count=10,
        client_degraded=False,
        partial=False,
        prefix_cache_hit_rate=0.6,
        prefix_reuse_share=0.7,
        batch_occupancy=0.8,
        p95_queue_share=0.1,
        gpu_utilisation_pct=80.0,
        realised_cost_per_request_usd=0.02,
        api_cost_per_request_usd=0.01,
        budget_usd_per_request=None,
    )
    with tempfile.TemporaryDirectory() as folder, connect_build(Path(folder) / DB_FILE) as con:
        work = Path(folder)
        _create_table(con, "run_summary")
        for numbers in runs:
            values = {**row, **numbers}
            columns, marks = ", ".join(values), ", ".join("?" * len(values))
            con.execute(f"INSERT INTO run_summary ({columns}) VALUES ({marks})", list(values.values()))
        build_marts(con, work / DB_FILE, work / "dbt", select="diagnoses")
        cursor = con.execute("SELECT * FROM diagnoses ORDER BY run_id")
        names = [d[0] for d in cursor.description]
        results = [dict(zip(names, r)) for r in cursor.fetchall()]
    for result in results:
        result["reasons"] = json.loads(result["reasons"])
    return results


def test_the_marts_dbt_tests_fail_the_build_by_name():
    """diagnoses' own test (one row for each run_summary row): two runs under one id are a broken run_summary, and
    the build fails naming the test, as a refresh's would (keeping the previous database)."""
    with pytest.raises(MartBuildError, match=r"test one_row_each_diagnoses_run_id__ref_run_summary_: fail"):
        _diagnose_runs([{}, {"scenario": "agent"}])
    assert len(_diagnose_runs([{}, {"run_id": "r2"}])) == 2


def test_all_four_numbers_high_and_cost_above_the_api_price_is_a_model_candidate():
    found = _diagnose()
    assert found["verdict"] == "model_candidate"
    assert found["budget_usd_per_request"] == pytest.approx(0.01)  # no scenario budget: the API's cost
    assert found["reasons"][0] == (
        "realised cost per request (no capacity known) 0.02 USD is above the API-equivalent cost of 0.01 USD"
    )
    assert "occupancy 0.800" in found["reasons"][1] and "GPU utilisation 80.0%" in found["reasons"][2]


def test_the_model_is_judged_on_the_efficiency_cost_where_a_capacity_is_known():
    # Realised 0.02 (the idle part is the fleet's size, not the model's); at the SLO capacity 0.008: below the API.
    found = _diagnose(efficiency_cost_per_request_usd=0.008)
    assert found["verdict"] == "healthy"
    assert found["reasons"] == [
        "efficiency cost per request (at the SLO capacity) 0.008 USD is within the API-equivalent cost of 0.01 USD"
    ]
    above = _diagnose(efficiency_cost_per_request_usd=0.015)
    assert above["verdict"] == "model_candidate" and above["reasons"][0].startswith("efficiency cost per request")


@pytest.mark.parametrize(
    ("numbers", "reason"),
    [
        (
            dict(prefix_cache_hit_rate=0.3),
            "prefix-cache hit rate 0.300 trails the 0.700 the traffic could reuse by 40.0 points",
        ),
        (dict(p95_queue_share=0.75), "queueing is 75.0% of the p95 tail's latency"),
    ],
)
def test_each_lever_makes_a_runtime_lever_verdict_with_its_number(numbers, reason):
    found = _diagnose(**numbers)
    assert found["verdict"] == "runtime_lever"
    [text] = found["reasons"]
    assert text.startswith(reason)


def test_a_modelled_queueing_share_is_labelled_as_such():
    [modelled] = _diagnose(p95_queue_share=0.75, queue_share_source="modelled")["reasons"]
    [measured] = _diagnose(p95_queue_share=0.75, queue_share_source="server")["reasons"]
    assert modelled.endswith("a modelled estimate: the server reported no queue_time")
    assert measured == "queueing is 75.0% of the p95 tail's latency (lever at 50%)"


def test_levers_are_all_listed():
    found = _diagnose(prefix_cache_hit_rate=0.1, batch_occupancy=0.1, p95_queue_share=0.9)
    assert found["verdict"] == "runtime_lever" and len(found["reasons"]) == 2
    assert json.loads(found["levers"]) == ["prefix_cache", "queueing"]  # a runtime lever comes before the size


def test_half_empty_batches_with_no_runtime_lever_say_the_fleet_is_too_big():
    found = _diagnose(batch_occupancy=0.3, batch_occupancy_basis="slo_batch")
    assert found["verdict"] == "oversized" and json.loads(found["levers"]) == []
    assert found["reasons"] == [
        "batch occupancy 0.300 is below 0.5: the batch ran at 30% of the batch the endpoint runs at its SLO "
        "capacity; fewer GPUs would carry this traffic"
    ]
    found = _diagnose(batch_occupancy=0.3, batch_occupancy_basis="kv_pool")
    assert found["reasons"][0].endswith("the KV pool (no capacity sweep); fewer GPUs would carry this traffic")
    assert _diagnose(batch_occupancy=0.5)["verdict"] == "model_candidate"  # at the threshold: not oversized


def test_within_budget_is_healthy_and_the_scenario_budget_wins_over_the_api_price():
    found = _diagnose(budget_usd_per_request=0.05)
    assert found["verdict"] == "healthy"
    assert found["reasons"] == [
        "realised cost per request (no capacity known) 0.02 USD is within the scenario budget of 0.05 USD"
    ]


def test_missing_numbers_make_the_verdict_inconclusive_not_a_guess():
    found = _diagnose(batch_occupancy=None)
    assert found["verdict"] == "inconclusive"
    assert "batch occupancy unknown (no server samples)" in found["reasons"]
    found = _diagnose(api_cost_per_request_usd=None)
    assert found["verdict"] == "inconclusive"
    assert found["reasons"] == ["no scenario budget and no API price for this model"]
    found = _diagnose(gpu_utilisation_pct=20.0)  # expensive, no lever showing, idle GPUs: look closer
    assert found["verdict"] == "inconclusive"
    # An unknown reusable share is no cache lever, and the hit rate alone decides nothing.
    assert _diagnose(prefix_reuse_share=None, prefix_cache_hit_rate=0.0)["verdict"] == "model_candidate"


def test_a_twins_gpu_utilisation_is_labelled_modelled():
    twin = _diagnose(backend="sim", gpu_utilisation_pct=63.2, gpu_metrics_source="twin")
    assert twin["verdict"] == "model_candidate" and twin["reasons"][2] == "GPU utilisation 63.2% (modelled)"
    idle = _diagnose(backend="sim", gpu_utilisation_pct=20.0, gpu_metrics_source="twin")
    assert "GPU utilisation 20.0% (modelled) is below 50% with no runtime lever showing" in idle["reasons"]
    assert _diagnose(gpu_metrics_source="nvml")["reasons"][2] == "GPU utilisation 80.0%"  # measured: as it was


def test_decode_steps_past_the_cuda_graphs_are_a_lever_and_a_twin_says_it_does_not_price_them():
    [real] = _diagnose(eager_decode_share=0.25)["reasons"]
    assert real == (
        "25.0% of the decode steps ran without a CUDA graph (lever at 10%): their batch per rank was past "
        "--cuda-graph-max-bs; a cap at the largest batch a rank runs keeps them on graphs"
    )
    twin = _diagnose(eager_decode_share=0.25, backend="sim")
    assert twin["verdict"] == "runtime_lever" and json.loads(twin["levers"]) == ["cuda_graphs"]
    assert twin["reasons"][0].endswith("; the twin counts these steps but prices them as graph replays")
    assert _diagnose(eager_decode_share=0.05)["verdict"] == "model_candidate"  # under the lever: the usual verdict
