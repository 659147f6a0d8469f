"""What the marts define once stays defined once: each typed mart row is its mart's columns, every spelling of the
grain and series keys in the marts' SQL is the same, and the judged metrics of warehouse/marts/judged_metrics.py
are the ones weekly_trends.sql judges."""

from __future__ import annotations

import re
import typing
from dataclasses import fields
from datetime import date

import pytest

from endpoints.capacity.fleet_plan import FleetPlan, ShapeProbe, fleet_plan_text
from warehouse.backends.store import Warehouse, WarehouseError
from warehouse.column_docs import column_doc
from warehouse.marts.dbt_build import model_sql
from warehouse.marts.judged_metrics import JUDGED_METRICS, judged_metric
from warehouse.marts.mart_readers import MartNotBuiltError, MartReaders
from warehouse.marts.mart_rows import MART_ROWS, WeeklyTrendRow, as_dict
from warehouse.marts.run_rows import RunContext
from warehouse_builders import endpoint, request, run_info, write_run

GRAIN = ("week_start", "scenario", "endpoint", "backend", "config_fingerprint")
SERIES = ("scenario", "endpoint", "backend")
# DuckDB's type of a mart column -> the Python type its record field holds.
PYTHON_TYPES = {"DATE": date, "VARCHAR": str, "DOUBLE": float, "BIGINT": int, "INTEGER": int, "BOOLEAN": bool}


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Warehouse:
    store = Warehouse(tmp_path_factory.mktemp("drift") / "wh")
    shape = ShapeProbe(2, "cache_aware", 16, 0.99, True, 0.6, 300.0, 0.5, 12.0, True)
    plan = FleetPlan(10.0, 1000.0, 100.0, 600, 1.0, (shape,), 2, 1.0)  # every mart gets a row: fleet_plans too
    context = RunContext(target_rps=10.0, fleet_plan_json=fleet_plan_text(plan))
    write_run(
        store.lake_root, date(2026, 3, 2), "chat", run_info("r1", 90.0), endpoint(), [request("r1", "q1", 100, 900)],
        context,
    )  # fmt: skip
    store.refresh()
    return store


def _mart_columns(store: Warehouse, table: str) -> list[tuple[str, str, bool]]:
    """(name, DuckDB type, nullable) of each column of a built mart, in order."""
    with store.connect() as con:
        return con.execute(
            "SELECT column_name, data_type, is_nullable FROM duckdb_columns() "
            "WHERE schema_name = 'main' AND table_name = ? ORDER BY column_index",
            [table],
        ).fetchall()


def _field_types(record: type) -> list[tuple[str, type, bool]]:
    """(name, Python type, may be None) of each field of a record, in order."""
    hints = typing.get_type_hints(record)
    out = []
    for f in fields(record):
        args = typing.get_args(hints[f.name])
        optional = type(None) in args
        base = next((a for a in args if a is not type(None)), hints[f.name]) if optional else hints[f.name]
        out.append((f.name, base, optional))
    return out


@pytest.mark.parametrize("table", sorted(MART_ROWS))
def test_each_mart_row_has_its_marts_columns_in_order_with_their_types_and_nullability(store, table):
    expected = [(name, PYTHON_TYPES[kind], nullable) for name, kind, nullable in _mart_columns(store, table)]
    assert expected, f"{table} is not a table of the built warehouse"
    assert _field_types(MART_ROWS[table]) == expected


@pytest.mark.parametrize("table", sorted(MART_ROWS))
def test_each_marts_reader_is_named_after_it_and_returns_its_rows(store, table):
    reader = getattr(MartReaders, table)
    assert typing.get_type_hints(reader)["return"] == list[MART_ROWS[table]]
    rows = getattr(store, table)()
    assert all(type(row) is MART_ROWS[table] for row in rows)
    assert all(list(as_dict(row)) == [c for c, *_ in _mart_columns(store, table)] for row in rows)
    if table not in ("lake_quarantine", "lake_missing"):  # nothing was quarantined, nothing is missing
        assert rows


def test_a_mart_missing_or_with_other_columns_than_its_row_is_refused_until_refreshed(tmp_path):
    store = Warehouse(tmp_path / "wh")
    store.refresh()
    with store.connect(read_only=False) as con:  # as a database built before the one mart and after the other
        con.execute("DROP TABLE cost_attribution")
        con.execute("ALTER TABLE diagnoses ADD COLUMN from_another_costbench INTEGER")
    with pytest.raises(MartNotBuiltError, match="no cost_attribution table yet: refresh the warehouse first"):
        store.cost_attribution()
    with pytest.raises(WarehouseError, match=r"diagnoses has columns .*from_another_costbench.*refresh the warehouse"):
        store.diagnoses()
    store.refresh()
    assert store.cost_attribution() == [] and store.diagnoses() == []


def _struct_keys(sql: str, name: str) -> list[tuple[str, ...]]:
    """The fields of every `struct_pack(...) AS <name>` in the SQL, table aliases dropped."""
    found = re.findall(rf"struct_pack\(([^)]*)\) AS {name}\b", sql)
    return [tuple(part.strip().split(".")[-1] for part in fields_.split(",")) for fields_ in found]


@pytest.mark.parametrize("mart", ["weekly_trends", "cost_attribution"])
def test_every_spelling_of_the_grain_and_series_keys_is_the_same(mart):
    sql = model_sql(f"{mart}_undrifted" if mart == "weekly_trends" else mart)
    grains, series = _struct_keys(sql, "grain"), _struct_keys(sql, "series")
    assert grains and set(grains) == {GRAIN}
    assert series and set(series) == {SERIES}
    # No join, window or group spells the five keys out again.
    assert not re.search(r"PARTITION BY [\w.]*week_start", sql)
    assert not re.search(r"GROUP BY [\w.]*week_start, [\w.]*scenario, [\w.]*endpoint", sql)
    assert not re.search(r"\.endpoint = \w+\.endpoint", sql)


def test_the_grain_leads_the_marts_and_tables_kept_at_it(store):
    for table in ("weekly_trends", "cost_attribution", "cost_intervals"):
        assert tuple(c for c, *_ in _mart_columns(store, table))[: len(GRAIN)] == GRAIN, table


def _sql_metric_lists() -> dict[str, list[str]]:
    sql = model_sql("weekly_trends_undrifted")
    regressed = sql[sql.index("THEN to_json(list_filter(") : sql.index("AS regressed_metrics")]
    reasons = sql[sql.index("list_filter(") : sql.index("AS threshold_reasons")]
    schema = re.search(
        r"JSON list of the metrics that regressed \(([^;]*);", column_doc("weekly_trends", "regressed_metrics")
    )
    assert schema, "the model's YAML no longer lists the regressed metrics where this test reads them"
    return {
        "regressed_metrics": re.findall(r"THEN '(\w+)' END", regressed),
        "regression_reasons": re.findall(r"format\(\s*'(\w+) ", reasons),
        "model YAML": [name.strip() for name in schema.group(1).split(",")],
    }


@pytest.mark.parametrize("where", ["regressed_metrics", "regression_reasons", "model YAML"])
def test_the_sql_judges_exactly_the_declared_metrics(where):
    assert _sql_metric_lists()[where] == [m.name for m in JUDGED_METRICS]


def test_every_judged_metric_is_read_from_weekly_trends_columns_in_its_unit():
    columns = {f.name for f in fields(WeeklyTrendRow)}
    for metric in JUDGED_METRICS:
        assert set(metric.columns) <= columns, metric.name
        suffix = "_pct" if metric.change_unit == "%" else "_pts"
        assert metric.change_column.endswith(suffix) and metric.threshold_column.endswith(suffix), metric.name
    assert judged_metric("p95_ttft_ms").baseline_column == "baseline_p95_ttft_ms"
    with pytest.raises(KeyError, match="not a metric the regression rule judges"):
        judged_metric("goodput")
