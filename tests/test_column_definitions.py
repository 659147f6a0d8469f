"""One definition per column: every copy of a record's columns agrees with its ColumnList.

The lists (REQUEST_COLUMNS, RUN_INFO_COLUMNS, SERVER_/GPU_SAMPLE_COLUMNS, RUNS_COLUMNS) are the source;
these tests fail when a record dataclass, an Arrow schema, a lake view, a schema.sql comment or the
column schema Dagster shows says something else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, make_dataclass
from datetime import date

import pyarrow as pa
import pytest

from assets.column_schemas import column_schema
from common.record_columns import Column, ColumnList, field_drift
from endpoints.probes.probe_records import (
    GPU_SAMPLE_COLUMNS,
    GPU_SAMPLE_SCHEMA,
    SERVER_SAMPLE_COLUMNS,
    SERVER_SAMPLE_SCHEMA,
    GpuSample,
    ServerSample,
)
from endpoints.sim.calibration.calibration_tables import CalibrationFigure
from replay.recording.records import (
    REQUEST_COLUMNS,
    REQUEST_RECORD_SCHEMA,
    RUN_INFO_COLUMNS,
    RUN_INFO_JSON_FIELDS,
    RequestRecord,
    RunInfo,
)
from tests import warehouse_builders as wb
from warehouse.backends.store import LAKE_TABLES, Warehouse, read_sql
from warehouse.column_docs import schema_sql_docs
from warehouse.marts.run_rows import RUNS_SCHEMA, RunContext, build_run_row
from warehouse.parquet.calibration_columns import TWIN_CALIBRATION_COLUMNS
from warehouse.parquet.lake_columns import LAKE_COLUMNS, PATH_COLUMNS, duckdb_type
from warehouse.parquet.run_columns import RUN_CONTEXT_COLUMNS, RUNS_COLUMNS

MONDAY = date(2026, 3, 2)
LAKE_VIEWS = sorted(LAKE_COLUMNS)


@pytest.mark.parametrize(
    "record, column_list, json_fields",
    [
        (RequestRecord, REQUEST_COLUMNS, ()),
        (RunInfo, RUN_INFO_COLUMNS, RUN_INFO_JSON_FIELDS),
        (ServerSample, SERVER_SAMPLE_COLUMNS, ()),
        (GpuSample, GPU_SAMPLE_COLUMNS, ()),
        (RunContext, RUN_CONTEXT_COLUMNS, ()),
        (CalibrationFigure, TWIN_CALIBRATION_COLUMNS, ()),
    ],
    ids=lambda v: getattr(v, "__name__", None),
)
def test_record_fields_are_their_columns(record, column_list, json_fields):
    assert field_drift(record, column_list, json_fields) == []


def test_field_drift_sees_a_renamed_a_retyped_and_a_wrongly_optional_field():
    column_list = ColumnList(
        (Column("a_s", pa.float64(), "s", "a", nullable=False), Column("n", pa.int32(), "count", "n", nullable=False))
    )
    assert field_drift(make_dataclass("Ok", [("a_s", float), ("n", int)]), column_list) == []
    assert field_drift(make_dataclass("Renamed", [("a_ms", float), ("n", int)]), column_list)
    assert field_drift(make_dataclass("Retyped", [("a_s", str), ("n", int)]), column_list)
    assert field_drift(make_dataclass("Optional", [("a_s", float), ("n", int | None)]), column_list)


def test_arrow_schemas_are_derived_from_the_column_lists():
    assert REQUEST_RECORD_SCHEMA.equals(REQUEST_COLUMNS.schema(), check_metadata=True)
    assert SERVER_SAMPLE_SCHEMA.equals(SERVER_SAMPLE_COLUMNS.schema(), check_metadata=True)
    assert GPU_SAMPLE_SCHEMA.equals(GPU_SAMPLE_COLUMNS.schema(), check_metadata=True)
    assert RUNS_SCHEMA.equals(RUNS_COLUMNS.schema(), check_metadata=True)
    for table, column_list in LAKE_COLUMNS.items():
        assert LAKE_TABLES[table].equals(column_list.schema(), check_metadata=True), table
    row = build_run_row(wb.run_info("r1", 10.0), wb.endpoint(), "s1", MONDAY)
    assert row.schema.equals(RUNS_SCHEMA, check_metadata=True)


def test_runs_reuses_the_run_info_definitions():
    """A runs column copied from RunInfo keeps RunInfo's meaning and unit, under its own name where renamed."""
    renamed = {"window_start_s": "start_s", "window_duration_s": "duration_s"}
    for column in RUNS_COLUMNS:
        source = renamed.get(column.name, column.name)
        if source in RUN_INFO_COLUMNS and column.name not in {"url", "backend"}:
            original = RUN_INFO_COLUMNS[source]
            assert (column.arrow_type, column.unit, column.meaning) == (
                original.arrow_type,
                original.unit,
                original.meaning,
            ), column.name


@dataclass(frozen=True)
class _View:
    types: dict[str, str]  # DuckDB's DESCRIBE: column -> type


@pytest.fixture(scope="module", params=["empty lake", "filled lake"])
def lake_views(request, tmp_path_factory) -> dict[str, _View]:
    root = tmp_path_factory.mktemp("wh")
    store = Warehouse(root)
    if request.param == "filled lake":
        records = [wb.request("r1", "q1", 100.0, 900.0), wb.request("r1", "q2", None, None)]
        wb.write_run(
            store.lake_root,
            MONDAY,
            "s1",
            wb.run_info("r1", 10.0),
            wb.endpoint(),
            records,
            RunContext(slo_ttft_ms=500.0),
            server_samples=[wb.server_sample("r1", 1.0, "sglang:num_running_reqs", 3.0)],
            gpu_samples=[wb.gpu_sample("r1", 1.0, 55.0)],
        )
    store.refresh()
    with store.connect(read_only=True) as con:
        return {
            table: _View({name: kind for name, kind, *_ in con.execute(f"DESCRIBE {table}").fetchall()})
            for table in LAKE_VIEWS
        }


@pytest.mark.parametrize("table", LAKE_VIEWS)
def test_lake_views_have_every_column_with_its_type(lake_views, table):
    view = lake_views[table]
    for column in LAKE_COLUMNS[table]:
        assert column.name in view.types, f"view {table} lacks column {column.name}"
        assert view.types[column.name] == duckdb_type(column.arrow_type), f"{table}.{column.name}"
    # Whatever else the view has comes from the partition path or is computed in the view.
    computed = _computed_view_columns(table)
    extra = [name for name in view.types if name not in LAKE_COLUMNS[table] and name not in PATH_COLUMNS]
    assert set(extra) <= computed, f"view {table} has columns no record defines: {sorted(set(extra) - computed)}"


@pytest.mark.parametrize("table", LAKE_VIEWS)
def test_schema_sql_comments_restate_the_definitions(table):
    documented = {doc.name: doc.description for doc in schema_sql_docs(table)}
    for column in LAKE_COLUMNS[table]:
        if column.name in PATH_COLUMNS:
            continue  # the view takes these from the partition folder and says so
        assert documented.get(column.name) == column.doc, f"schema.sql {table}.{column.name}"


@pytest.mark.parametrize("table", LAKE_VIEWS)
def test_ui_column_schema_shows_the_definitions(lake_views, table):
    shown = column_schema(table)["dagster/column_schema"].columns
    assert [c.name for c in shown] == list(lake_views[table].types), table
    for ui in shown:
        if ui.name in LAKE_COLUMNS[table]:
            column = LAKE_COLUMNS[table][ui.name]
            assert ui.type == duckdb_type(column.arrow_type), f"{table}.{ui.name}"
            if ui.name not in PATH_COLUMNS:
                assert ui.description == column.doc, f"{table}.{ui.name}"
        assert ui.description, f"{table}.{ui.name}"


def _computed_view_columns(table: str) -> set[str]:
    """Names the view's SELECT defines with `<expression> AS name` (not plain renames of stored columns)."""
    sql = read_sql("schema.sql")
    body = sql[sql.index(f"CREATE OR REPLACE VIEW {table} AS") :]
    body = body[: body.index(f"FROM @{table}_source@")]
    return set(re.findall(r"\bAS\s+(\w+)", body)) - {table}
