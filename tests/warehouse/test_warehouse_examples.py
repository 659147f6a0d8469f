"""Every example query of docs/warehouse.md ("Five questions, five queries") runs read-only and answers its question."""

from __future__ import annotations

import json
from datetime import date, timedelta
from importlib import resources

import pytest

from warehouse.backends.store import Warehouse
from warehouse.marts.run_rows import RunContext
from warehouse_builders import endpoint, request, run_info, server_sample, write_run

WEEKS = [date(2025, 2, 3) + timedelta(days=7 * i) for i in range(3)]
EXAMPLES = sorted(
    p.name for p in resources.files("warehouse").joinpath("sql").iterdir() if p.name.startswith("example_")
)
V3 = endpoint()
R1 = endpoint(name="r1-8xh200", model="deepseek-ai/DeepSeek-R1")


def _run(store, week, scenario, spec, window_s, cached, reasoning=None):
    run_id = f"{scenario}-{week.isoformat()}"
    records = [
        request(
            run_id,
            f"q{i}",
            100 + i,
            2000 + i,
            cached_tokens=cached,
            sent_mono_s=1.0 + i * window_s / 25,
            reasoning_tokens=reasoning,
            ttfa_ms=None if reasoning is None else 900 + i,
        )
        for i in range(20)
    ]
    info = run_info(run_id, window_s, server_info={"version": "0.5.4", "backend": "sim", "max_running_requests": 16})
    samples = [server_sample(run_id, t, m, v) for t in (0.5, window_s / 2)
               for m, v in (("sglang:num_running_reqs", 4), ("sglang:token_usage", 0.25))]  # fmt: skip
    # Each run at 80% of its capacity: the efficiency cost follows the window's cost per request.
    context = RunContext(capacity_rps_at_slo=20 / window_s / 0.8, capacity_source="twin_sweep")
    write_run(store.lake_root, week, scenario, info, spec, records, context, server_samples=samples)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Warehouse:
    store = Warehouse(tmp_path_factory.mktemp("examples") / "wh")
    for week, window_s, cached in zip(WEEKS, (90.0, 92.0, 130.0), (600, 620, 200)):  # the last week regresses
        _run(store, week, "chat-v3", V3, window_s, cached)
        _run(store, week, "reason-r1", R1, 100.0, 100, reasoning=60)
    store.refresh()
    return store


def _query(store: Warehouse, name: str) -> list[dict]:
    sql = resources.files("warehouse").joinpath("sql", name).read_text()
    with store.connect(read_only=True) as con:  # what an analyst opens
        cursor = con.execute(sql)
        columns = [d[0] for d in cursor.description]
        return [dict(zip(columns, row)) for row in cursor.fetchall()]


def test_there_are_the_five_documented_examples():
    assert EXAMPLES == [
        "example_cache_vs_cost.sql",
        "example_cost_trend.sql",
        "example_reasoning_tax.sql",
        "example_regressed_week.sql",
        "example_self_host_vs_api.sql",
    ]


def test_cost_trend_per_scenario(store):
    rows = [r for r in _query(store, "example_cost_trend.sql") if r["scenario"] == "chat-v3"]
    assert [r["week_start"] for r in rows] == WEEKS
    assert rows[-1]["vs_baseline_pct"] > 10 and rows[-1]["regression_verdict"] == "regression"


def test_what_changed_in_a_regressed_week(store):
    [row] = _query(store, "example_regressed_week.sql")
    assert (row["week_start"], row["scenario"], row["regression_verdict"]) == (WEEKS[2], "chat-v3", "regression")
    assert any("efficiency_cost_per_request_usd" in reason for reason in json.loads(row["regression_reasons"]))
    assert row["prefix_cache_hit_rate"] == pytest.approx(0.2) and row["prev_hit_rate"] == pytest.approx(0.62)
    assert row["batch_occupancy"] == pytest.approx(0.25) and row["diagnosis"] is not None


def test_cache_hit_rate_against_cost(store):
    rows = {r["scenario"]: r for r in _query(store, "example_cache_vs_cost.sql")}
    assert rows["chat-v3"]["runs"] == 3
    assert rows["chat-v3"]["hit_rate_cost_correlation"] < 0  # the cheaper weeks hit the cache more


def test_the_r1_reasoning_tax(store):
    rows = {r["model"]: r for r in _query(store, "example_reasoning_tax.sql")}
    r1 = rows["deepseek-ai/DeepSeek-R1"]
    assert r1["reasoning_token_share"] == pytest.approx(0.6)  # 60 of 100 output tokens
    assert r1["p50_wait_for_answer_ms"] == pytest.approx(800.0)
    assert r1["reasoning_cost_per_request_usd"] == pytest.approx(0.6 * r1["realised_cost_per_request_usd"], rel=1e-3)
    assert rows["deepseek-ai/DeepSeek-V3"]["reasoning_token_share"] is None  # V3 reported no reasoning


def test_self_host_against_the_api(store):
    rows = _query(store, "example_self_host_vs_api.sql")
    assert len(rows) == 6
    for row in rows:
        assert row["api_price"] is not None and row["api_usd_per_request"] > 0
        assert row["self_host_to_api"] == pytest.approx(
            row["self_host_usd_per_request"] / row["api_usd_per_request"], rel=1e-2
        )
