"""Every example query of docs/warehouse.md ("Five questions, five queries") runs read-only and answers its question.

The warehouse is the demo's story in small: a canary replayed twice a week (its repeats), its radix cache turned off
the second week (a new configuration: the server then reports no cache counters) and on again the third, a little
dearer than the first; beside it one R1 run a week."""

from __future__ import annotations

from datetime import date, timedelta
from importlib import resources

import pytest

from warehouse.backends.store import Warehouse
from warehouse.marts.run_rows import RunContext
from warehouse_builders import endpoint, request, run_info, server_sample, write_run, write_runs

WEEKS = [date(2025, 2, 3) + timedelta(days=7 * i) for i in range(3)]
EXAMPLES = sorted(
    p.name for p in resources.files("warehouse").joinpath("sql").iterdir() if p.name.startswith("example_")
)
V3 = endpoint()
R1 = endpoint(name="r1-8xh200", model="deepseek-ai/DeepSeek-R1")
CACHE_ON = {"version": "0.5.4", "backend": "sim", "max_running_requests": 16, "disable_radix_cache": False}
CACHE_OFF = {**CACHE_ON, "disable_radix_cache": True}
# The canary's weeks: window (s; its efficiency cost follows it), cached tokens of 1,000, configuration. The third
# week is +11% on the first, the baseline of its configuration; the second is the cache-off week.
CANARY_WEEKS = [(90.0, 600, CACHE_ON), (130.0, 0, CACHE_OFF), (100.0, 600, CACHE_ON)]
SERVER_HIT_RATE = 0.61  # what the server's counters say while its cache is on (the client's usage: 0.6)


def _records(run_id, window_s, cached, reasoning=None):
    return [
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


def _samples(run_id, window_s, cache_counters):
    gauges = [server_sample(run_id, t, m, v) for t in (0.5, window_s / 2)
              for m, v in (("sglang:num_running_reqs", 4), ("sglang:token_usage", 0.25))]  # fmt: skip
    # Counters: 20 requests of 1,000 prompt tokens between the two scrapes; a server with its cache off has no
    # cached-token counter.
    counters = [server_sample(run_id, 0.5, "sglang:prompt_tokens_total", 0.0),
                server_sample(run_id, window_s / 2, "sglang:prompt_tokens_total", 20_000.0)]  # fmt: skip
    if cache_counters:
        counters += [server_sample(run_id, 0.5, "sglang:cached_tokens_total", 0.0),
                     server_sample(run_id, window_s / 2, "sglang:cached_tokens_total", 20_000.0 * SERVER_HIT_RATE)]  # fmt: skip
    return gauges + counters


def _context(window_s):
    # Each run at 80% of its capacity: the efficiency cost follows the window's cost per request.
    return RunContext(capacity_rps_at_slo=20 / window_s / 0.8, capacity_source="twin_sweep")


def _canary_week(store, week, window_s, cached, server_info):
    """Two runs (repeats) whose own sweeps differ by 0.2%."""
    runs, contexts, samples = [], [], []
    for i, run_window_s in enumerate((window_s, window_s * 1.002)):
        run_id = f"chat-v3-{week.isoformat()}-{i}"
        info = run_info(run_id, run_window_s, server_info=server_info)
        runs.append((info, _records(run_id, run_window_s, cached)))
        contexts.append(_context(run_window_s))
        samples += _samples(run_id, run_window_s, cache_counters=not server_info["disable_radix_cache"])
    write_runs(store.lake_root, week, "chat-v3", runs, V3, contexts, server_samples=samples)


def _r1_week(store, week):
    run_id = f"reason-r1-{week.isoformat()}"
    info = run_info(run_id, 100.0, server_info=CACHE_ON)
    records = _records(run_id, 100.0, 100, reasoning=60)
    samples = _samples(run_id, 100.0, cache_counters=False)
    write_run(store.lake_root, week, "reason-r1", info, R1, records, _context(100.0), server_samples=samples)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Warehouse:
    store = Warehouse(tmp_path_factory.mktemp("examples") / "wh")
    for week, (window_s, cached, server_info) in zip(WEEKS, CANARY_WEEKS):
        _canary_week(store, week, window_s, cached, server_info)
        _r1_week(store, week)
    store.refresh()
    return store


def _query(store: Warehouse, name: str) -> list[dict]:
    sql = resources.files("warehouse").joinpath("sql", name).read_text()
    with store.connect(read_only=True) as con:  # what an analyst opens
        cursor = con.execute(sql)
        columns = [d[0] for d in cursor.description]
        return [dict(zip(columns, row)) for row in cursor.fetchall()]


def _efficiency_costs(store: Warehouse) -> list[float]:
    with store.connect() as con:
        rows = con.execute(
            "SELECT efficiency_cost_per_request_usd FROM weekly_trends WHERE scenario = 'chat-v3' ORDER BY week_start"
        ).fetchall()
    return [cost for (cost,) in rows]


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
    assert rows[-1]["vs_baseline_pct"] > 10 and rows[-1]["regression_verdict"] == "sustained"


def test_week_over_week_is_a_number_across_a_configuration_change_said_beside_it(store):
    rows = [r for r in _query(store, "example_cost_trend.sql") if r["scenario"] == "chat-v3"]
    costs = _efficiency_costs(store)
    # The first week has no week before it; each later one compares with the week before, whatever it ran.
    assert [r["vs_last_week_pct"] for r in rows] == [
        None,
        pytest.approx(100 * (costs[1] / costs[0] - 1), abs=0.05),
        pytest.approx(100 * (costs[2] / costs[1] - 1), abs=0.05),
    ]
    assert rows[1]["vs_last_week_pct"] == pytest.approx(44.4, abs=0.1)  # the cache went off: 130 s against 90 s
    assert [r["config_changed"] for r in rows] == [False, True, True]


def test_what_changed_in_a_regressed_week_is_one_short_row_per_regressed_week(store):
    rows = _query(store, "example_regressed_week.sql")
    # Two runs a week, and two the week before: one row per regressed week, scenario and endpoint all the same.
    assert [(r["week_start"], r["scenario"], r["endpoint"]) for r in rows] == [
        (WEEKS[2], "chat-v3", V3.name),
        (WEEKS[1], "chat-v3", V3.name),
    ]
    for row in rows:  # short columns: no JSON blob of reasons or server facts
        assert max(len(str(value)) for value in row.values()) <= 80, row
    back_on, cache_off = rows
    assert cache_off["regression_verdict"] == "regression"
    assert cache_off["moved"] == "efficiency_cost_per_request_usd, prefix_cache_hit_rate"
    assert cache_off["cost_vs_baseline_pct"] == pytest.approx(44.4, abs=0.1)
    assert cache_off["changed_vs_baseline"] == "disable_radix_cache: false -> true"
    assert cache_off["config_changed_since_last_week"] is True
    assert (cache_off["hit_rate"], cache_off["prev_hit_rate"]) == (0.0, 0.6)
    assert cache_off["batch_occupancy"] == pytest.approx(0.25) and cache_off["diagnosis"] is not None
    # The cache is back: the same configuration as the baseline week, still dearer than it, and sustained.
    assert back_on["regression_verdict"] == "sustained" and back_on["moved"] == "efficiency_cost_per_request_usd"
    assert back_on["changed_vs_baseline"] == "" and back_on["config_changed_since_last_week"] is True
    assert (back_on["hit_rate"], back_on["prev_hit_rate"]) == (0.6, 0.0)


def test_cache_hit_rate_against_cost_over_the_same_runs(store):
    rows = {r["scenario"]: r for r in _query(store, "example_cache_vs_cost.sql")}
    chat = rows["chat-v3"]
    assert chat["runs"] == 6
    assert chat["hit_rate_cost_correlation"] < 0  # the cheaper weeks hit the cache more
    assert chat["mean_hit_rate"] == pytest.approx(0.4)  # (4 runs x 0.6 + 2 x 0) / 6
    # The server reported no hit rate in the cache-off week: beside it, the client's over the same 4 runs.
    assert chat["server_reported_runs"] == 4
    assert chat["mean_client_hit_rate_where_server_reported"] == pytest.approx(0.6)
    assert chat["mean_server_hit_rate"] == pytest.approx(SERVER_HIT_RATE)
    r1 = rows["reason-r1"]  # no server counters at all: nothing to set beside the client's
    assert (r1["runs"], r1["mean_hit_rate"], r1["server_reported_runs"]) == (3, pytest.approx(0.1), 0)
    assert r1["mean_client_hit_rate_where_server_reported"] is None and r1["mean_server_hit_rate"] is None


def test_the_r1_reasoning_tax(store):
    rows = {r["model"]: r for r in _query(store, "example_reasoning_tax.sql")}
    r1 = rows["deepseek-ai/DeepSeek-R1"]
    assert r1["reasoning_token_share"] == pytest.approx(0.6)  # 60 of 100 output tokens
    assert r1["p50_wait_for_answer_ms"] == pytest.approx(800.0)
    assert r1["reasoning_cost_per_request_usd"] == pytest.approx(0.6 * r1["realised_cost_per_request_usd"], rel=1e-3)
    assert rows["deepseek-ai/DeepSeek-V3"]["reasoning_token_share"] is None  # V3 reported no reasoning


def test_self_host_against_the_api(store):
    rows = _query(store, "example_self_host_vs_api.sql")
    assert len(rows) == 9  # every run: two canary runs a week, one R1 run
    for row in rows:
        assert row["api_price"] is not None and row["api_usd_per_request"] > 0
        assert row["self_host_to_api"] == pytest.approx(
            row["self_host_usd_per_request"] / row["api_usd_per_request"], rel=1e-2
        )
