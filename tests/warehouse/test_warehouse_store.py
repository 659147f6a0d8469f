"""DuckDB views and marts over a tiny hand-made lake; every expected number is worked out by hand."""

from __future__ import annotations

import re
from datetime import date
from importlib import resources

import pytest

from warehouse.backends.store import Warehouse, WarehouseError, sql_path_literal
from warehouse_builders import endpoint, failed_request, request, run_info, write_run

W0 = date(2025, 1, 27)
W1 = date(2025, 2, 3)
W2 = date(2025, 2, 10)
W3 = date(2025, 2, 17)
W4 = date(2025, 2, 24)
W5 = date(2025, 3, 3)
SPEC = endpoint()  # 8 GPUs at $2 per GPU-hour: a run costs window_s / 225 USD


def _main_run_records(run_id: str) -> list:
    return [
        # Four completed requests: TTFT 100..400 ms, e2e 1000..4000 ms, cached 0/500/1000/500 of 1000.
        request(run_id, "q1", 100, 1000, cached_tokens=0),
        request(run_id, "q2", 200, 2000, cached_tokens=500),
        request(run_id, "q3", 300, 3000, cached_tokens=1000),
        request(run_id, "q4", 400, 4000, cached_tokens=500),
        # A failure and a warm-up: neither is a completed request, neither enters latency or hit rate.
        failed_request(run_id, "q5"),
        request(run_id, "w1", 9000, 9900, cached_tokens=1000, is_warmup=True),
    ]


@pytest.fixture
def store(tmp_path) -> Warehouse:
    return Warehouse(tmp_path / "wh")


def test_refresh_on_an_empty_lake_builds_empty_views_and_marts(store):
    store.refresh()
    assert store.weekly_trends() == [] and store.run_summary() == []
    with store.connect(read_only=True) as con:
        for view in ("runs", "requests"):
            assert con.execute(f"SELECT count(*) FROM {view}").fetchone() == (0,)
        columns = [r[0] for r in con.execute("DESCRIBE requests").fetchall()]
    assert {"week_start", "scenario", "run_id", "ttft_ms", "e2e_ms", "e2e_from_schedule_ms", "schedule_lag_ms"} <= set(
        columns
    )


def test_refresh_with_runs_but_no_requests_yet(store):
    write_run(store.lake_root, W5, "chat", run_info("r1", 90.0), SPEC, records=None)
    store.refresh()
    [row] = store.run_summary()
    assert row.completed_requests == 0 and row.realised_cost_per_request_usd is None
    assert row.run_cost_usd == pytest.approx(0.4)


def test_run_summary_by_hand(store):
    write_run(store.lake_root, W5, "chat", run_info("r1", 90.0), SPEC, _main_run_records("r1"))
    store.refresh()
    [row] = store.run_summary()
    assert (row.completed_requests, row.failed_requests, row.cancelled_requests) == (4, 1, 0)
    # 8 GPUs x $2/h x 90 s / 3600 = $0.40 for the run; / 4 completed = $0.10 per request.
    assert row.run_cost_usd == pytest.approx(0.40)
    assert row.realised_cost_per_request_usd == pytest.approx(0.10)
    # 4 x 100 output tokens = 400 tokens: $0.40 / 0.0004 Mtok = $1000 per million output tokens; 400 / 90 s.
    assert row.cost_per_mtok_output_usd == pytest.approx(1000.0)
    assert row.sustained_output_tokens_per_s == pytest.approx(400 / 90)
    # Linear interpolation over [100, 200, 300, 400]: p50 at rank 1.5 = 250; p95 at rank 0.95 x 3 = 2.85
    # = 300 + 0.85 x 100 = 385 ms. The warm-up's 9000 ms must not show.
    assert row.p50_ttft_ms == pytest.approx(250.0)
    assert row.p95_ttft_ms == pytest.approx(385.0)
    assert row.p50_e2e_ms == pytest.approx(2500.0)
    assert row.p95_e2e_ms == pytest.approx(3850.0)
    # (0 + 500 + 1000 + 500) cached / 4000 prompt tokens = 0.5 (the warm-up's full hit excluded).
    assert row.prefix_cache_hit_rate == pytest.approx(0.5)
    assert (row.backend, row.schedule_lag_p99_ms, row.client_degraded) == ("sim", 2.5, False)

    with store.connect(read_only=True) as con:
        lag, ttft, e2e_sched = con.execute(
            "SELECT schedule_lag_ms, ttft_ms, e2e_from_schedule_ms FROM requests WHERE request_id = 'q2'"
        ).fetchone()
    # Scheduled 10 ms before the send: latency from the schedule is 10 ms longer than from the send.
    assert (lag, ttft, e2e_sched) == (pytest.approx(10.0), pytest.approx(200.0), pytest.approx(2010.0))


def test_hit_rate_is_null_when_the_server_reports_no_cached_tokens(store):
    records = [request("r1", "q1", 100, 1000, cached_tokens=None), request("r1", "q2", 100, 1000, cached_tokens=None)]
    write_run(store.lake_root, W5, "chat", run_info("r1", 90.0), SPEC, records)
    store.refresh()
    [row] = store.run_summary()
    assert row.prefix_cache_hit_rate is None
    [trend] = store.weekly_trends()
    assert trend.prefix_cache_hit_rate is None


def _one_request_week(
    store: Warehouse, week: date, realised_cost_per_request_usd: float, scenario: str = "chat"
) -> None:
    # One completed request, so the run's cost is the cost per request: window_s = cost x 225.
    run_id = f"run-{week.isoformat()}-{scenario}"
    write_run(
        store.lake_root,
        week,
        scenario,
        run_info(run_id, realised_cost_per_request_usd * 225),
        SPEC,
        [request(run_id, "q1", 100, 1000)],
    )


def test_weekly_trends_by_hand_with_baseline_and_cost_change(store):
    for week, cost in ((W0, 1.00), (W1, 0.10), (W2, 0.12), (W3, 0.08), (W4, 0.11)):
        _one_request_week(store, week, cost)
    write_run(store.lake_root, W5, "chat", run_info("r1", 90.0), SPEC, _main_run_records("r1"))
    _one_request_week(store, W5, 0.50, scenario="chat-fcfs")  # another scenario: its own baseline (none)
    store.refresh()
    rows = {(r.week_start, r.scenario): r for r in store.weekly_trends()}
    assert list(rows) == [
        (W0, "chat"),
        (W1, "chat"),
        (W2, "chat"),
        (W3, "chat"),
        (W4, "chat"),
        (W5, "chat"),
        (W5, "chat-fcfs"),
    ]

    this_week = rows[(W5, "chat")]
    assert (this_week.endpoint, this_week.backend, this_week.runs) == ("v3-8xh200", "sim", 1)
    assert (this_week.completed_requests, this_week.failed_requests) == (4, 1)
    assert this_week.realised_cost_per_request_usd == pytest.approx(0.10)
    assert (this_week.p50_ttft_ms, this_week.p95_ttft_ms) == (pytest.approx(250.0), pytest.approx(385.0))
    assert (this_week.p50_e2e_ms, this_week.p95_e2e_ms) == (pytest.approx(2500.0), pytest.approx(3850.0))
    assert this_week.prefix_cache_hit_rate == pytest.approx(0.5)
    # Baseline: W1..W4 (W0 is 35 days back, outside the 4 weeks) = median(0.10, 0.12, 0.08, 0.11) = 0.105;
    # change = (0.10 - 0.105) / 0.105 = -4.76 %.
    assert this_week.baseline_weeks == 4
    assert this_week.baseline_realised_cost_per_request_usd == pytest.approx(0.105)
    assert this_week.realised_cost_change_pct == pytest.approx(-100 * 0.005 / 0.105)

    # W4: baseline W0..W3 (W0 exactly 28 days back counts) = median(1.00, 0.10, 0.12, 0.08) = 0.11; change 0 %.
    assert rows[(W4, "chat")].baseline_realised_cost_per_request_usd == pytest.approx(0.11)
    assert rows[(W4, "chat")].realised_cost_change_pct == pytest.approx(0.0)
    # W1: only W0 = 1.00 -> 0.10 is -90 %.
    assert rows[(W1, "chat")].realised_cost_change_pct == pytest.approx(-90.0)
    for first in (rows[(W0, "chat")], rows[(W5, "chat-fcfs")]):
        assert first.baseline_weeks == 0
        assert first.baseline_realised_cost_per_request_usd is None and first.realised_cost_change_pct is None


def test_rematerializing_a_partition_replaces_it_in_the_marts(store):
    write_run(store.lake_root, W5, "chat", run_info("r1", 90.0), SPEC, _main_run_records("r1"))
    store.refresh()
    # The same week replayed again: a new run id and only two completed requests, same 90 s window.
    write_run(
        store.lake_root,
        W5,
        "chat",
        run_info("r2", 90.0),
        SPEC,
        [request("r2", "a", 100, 1000), request("r2", "b", 300, 1000)],
    )
    store.refresh()
    [row] = store.weekly_trends()
    assert (row.runs, row.completed_requests, row.failed_requests) == (1, 2, 0)
    assert row.realised_cost_per_request_usd == pytest.approx(0.20)  # $0.40 / 2
    assert [r.run_id for r in store.run_summary()] == ["r2"]


def test_weekly_trends_before_any_refresh_is_a_clear_error(store):
    with pytest.raises(WarehouseError, match="refresh the warehouse first"):
        store.weekly_trends()


def test_paths_that_would_be_read_as_globs_are_refused(tmp_path):
    assert sql_path_literal("/data/o'brien/lake") == "'/data/o''brien/lake'"
    with pytest.raises(WarehouseError, match="glob"):
        sql_path_literal("/data/[weekly]/lake")
    with pytest.raises(WarehouseError, match="glob"):
        Warehouse(tmp_path / "star*").refresh()


def test_schema_sql_documents_every_column_of_every_table_and_view(store):
    store.refresh()
    schema_sql = resources.files("warehouse").joinpath("schema.sql").read_text()
    statements = {}
    for statement in re.split(r";\s*$", schema_sql, flags=re.MULTILINE):
        found = re.search(r"CREATE (?:OR REPLACE )?(?:TABLE|VIEW) (?:IF NOT EXISTS )?(\w+)", statement)
        if found:
            statements[found.group(1)] = statement
    assert {"runs", "requests", "lake_files"} <= set(statements)  # the marts' columns: the dbt models' YAML
    with store.connect(read_only=True) as con:
        for name, statement in statements.items():
            for (column,) in con.execute(f"SELECT column_name FROM (DESCRIBE {name})").fetchall():
                documented = re.search(rf"\b{column}\b[^\n]*--\s*\S", statement)
                assert documented, f"schema.sql: {name}.{column} has no -- comment on its line"


def test_column_docs_name_every_column_duckdb_has(tmp_path):
    """The column schemas Dagster shows come from schema.sql's comments: they must match the real tables."""
    from warehouse.column_docs import column_docs

    store = Warehouse(tmp_path / "wh")
    store.refresh()
    with store.connect(read_only=True) as con:
        marts = [
            row[0]
            for row in con.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'").fetchall()
        ]
        assert {"run_summary", "weekly_trends", "cost_attribution", "diagnoses", "cost_intervals"} <= set(marts)
        for table in ("runs", "requests", "server_samples", "gpu_samples", *marts):
            actual = [row[:2] for row in con.execute(f"DESCRIBE {table}").fetchall()]
            docs = column_docs(table)
            assert [d.name for d in docs] == [name for name, _ in actual], table
            assert all(d.description for d in docs)
            # A mart's types are its YAML's (the contract dbt enforces); a view's, where it stores them, the lake's.
            assert all(d.sql_type in ("", sql_type) for d, (_, sql_type) in zip(docs, actual, strict=True)), table
