"""Schema drift is explicit: files of an older schema version are read with their version's meaning, each
file's version is known, a column whose type changed is an error naming the file, and a file from a newer
costbench stops the refresh untouched."""

from __future__ import annotations

from datetime import date, timedelta

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_warehouse_migrations import v1_requests, v1_runs, write_v1_partition

from warehouse.backends.store import Warehouse
from warehouse.parquet.lake import PART_FILE, SCHEMA_VERSION_KEY, partition_path
from warehouse.schema_migrations import SCHEMA_VERSION, SchemaVersionError
from warehouse_builders import endpoint, request, requests_table, run_info, write_run

W0 = date(2025, 3, 3)
WEEKS = [W0 + timedelta(days=7 * i) for i in range(4)]


def _v2_week(store: Warehouse, week: date, run_id: str) -> None:
    records = [request(run_id, "q1", 100, 1000), request(run_id, "q2", 300, 2000)]
    write_run(store.lake_root, week, "chat", run_info(run_id, 90.0), endpoint(), records)


def test_a_version_1_week_before_fingerprinted_weeks_is_not_a_configuration_change(tmp_path):
    store = Warehouse(tmp_path / "wh")
    for i, week in enumerate(WEEKS[:2]):  # written by costbench at schema version 1: no config_fingerprint
        write_v1_partition(store, "runs", week, "chat", v1_runs(f"v1-{i}", week))
        write_v1_partition(store, "requests", week, "chat", v1_requests(f"v1-{i}"))
    for i, week in enumerate(WEEKS[2:]):
        _v2_week(store, week, f"v2-{i}")
    store.refresh()
    rows = store.weekly_trends()
    assert [(r.week_start, r.config_fingerprint is None) for r in rows] == [
        (WEEKS[0], True),
        (WEEKS[1], True),
        (WEEKS[2], False),
        (WEEKS[3], False),
    ]
    assert [r.config_changed for r in rows] == [False, False, False, False]  # unknown is not a change
    first_v2 = rows[2]
    # Judged against the unrecorded weeks (cost per request $0.20 each), saying why, not claiming a change.
    assert (first_v2.baseline_source, first_v2.baseline_weeks) == ("unrecorded_config", 2)
    assert first_v2.baseline_realised_cost_per_request_usd == pytest.approx(0.20)
    assert first_v2.regression_verdict == "ok" and first_v2.regression_reasons is None
    assert (rows[1].baseline_source, rows[3].baseline_source) == ("same_config", "same_config")
    assert rows[3].baseline_weeks == 1  # the fingerprinted configuration starts its own baseline


def test_each_files_schema_version_is_recorded(tmp_path):
    store = Warehouse(tmp_path / "wh")
    write_v1_partition(store, "runs", WEEKS[0], "chat", v1_runs("v1", WEEKS[0]))
    _v2_week(store, WEEKS[1], "now")
    store.refresh()
    with store.connect() as con:
        found = con.execute(
            "SELECT table_name, week_start, schema_version FROM lake_files ORDER BY table_name, week_start"
        ).fetchall()
    assert found == [
        ("requests", WEEKS[1], SCHEMA_VERSION),
        ("runs", WEEKS[0], None),
        ("runs", WEEKS[1], SCHEMA_VERSION),
    ]


def test_a_column_written_with_another_type_is_quarantined_not_widened(tmp_path):
    store = Warehouse(tmp_path / "wh")
    _v2_week(store, WEEKS[0], "good")
    records = requests_table([request("bad", "q1", 100, 1000)])
    as_text = records.set_column(
        records.schema.get_field_index("input_tokens"), "input_tokens", records.column("input_tokens").cast(pa.string())
    )
    write_run(store.lake_root, WEEKS[1], "chat", run_info("bad", 90.0), endpoint(), records=None)
    folder = partition_path(store.lake_root, "requests", WEEKS[1], "chat")
    folder.mkdir(parents=True)
    pq.write_table(as_text, folder / PART_FILE)  # a writer whose column type drifted

    [quarantined] = store.refresh().quarantined

    assert quarantined.message.startswith(
        "quarantined lake/requests/week=2025-03-10/scenario=chat/part-0.parquet "
        "(table requests, week 2025-03-10, scenario chat): "
        "column input_tokens is string in this file, int32 in the lake schema"
    )
    with store.connect() as con:
        # DuckDB's union_by_name would have made the column VARCHAR for every week.
        types = dict(con.execute("SELECT column_name, column_type FROM (DESCRIBE requests)").fetchall())
        assert types["input_tokens"] == "INTEGER"
        assert con.execute("SELECT run_id, input_tokens FROM requests ORDER BY ALL").fetchall() == [
            ("good", 1000),
            ("good", 1000),
        ]


def test_a_file_from_a_newer_costbench_stops_the_refresh_before_anything_moves(tmp_path):
    store = Warehouse(tmp_path / "wh")
    _v2_week(store, WEEKS[0], "r0")
    store.refresh()
    _v2_week(store, WEEKS[1], "r1")
    newer = partition_path(store.lake_root, "requests", WEEKS[1], "chat") / PART_FILE
    table = pq.read_table(newer)
    pq.write_table(table.replace_schema_metadata({SCHEMA_VERSION_KEY: str(SCHEMA_VERSION + 1).encode()}), newer)
    bad = partition_path(store.lake_root, "requests", WEEKS[0], "chat") / PART_FILE
    bad.write_bytes(b"truncated")  # would be quarantined, but nothing is touched when the code is too old

    with pytest.raises(
        SchemaVersionError, match=rf"week=2025-03-10.*newer than the {SCHEMA_VERSION}.*nothing was changed"
    ):
        store.refresh()

    assert bad.read_bytes() == b"truncated" and newer.is_file()
    assert [r.run_id for r in store.run_summary()] == ["r0"]  # the previous database, as it was
