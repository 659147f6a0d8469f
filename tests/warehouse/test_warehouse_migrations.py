"""Schema versions: an older warehouse is upgraded (rebuilt beside it, its history carried) with nothing lost; a
newer one is refused untouched."""

from __future__ import annotations

from datetime import date

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from warehouse.backends.store import Warehouse
from warehouse.marts.run_rows import build_run_row
from warehouse.parquet.lake import PART_FILE, SCHEMA_VERSION_KEY, partition_path
from warehouse.schema_migrations import SCHEMA_VERSION, SchemaVersionError
from warehouse_builders import endpoint, request, requests_table, run_info

WEEK = date(2025, 3, 3)
# Columns that did not exist when schema version 1 was written.
V2_RUN_COLUMNS = (
    "max_concurrency",
    "warmup_s",
    "shard_index",
    "shard_count",
    "arrival_process",
    "config_fingerprint",
    "config_facts_json",
    "max_running_requests",
    "slo_ttft_ms",
    "slo_tpot_ms",
    "target_rps",
    "budget_usd_per_request",
    "prefix_reuse_share",
)
V2_REQUEST_COLUMNS = ("held_s", "held_by")
# Columns that did not exist when schema version 4 was written.
V5_RUN_COLUMNS = ("revision_note", "hours_per_week")


def write_v1_partition(store: Warehouse, table: str, week: date, scenario: str, data: pa.Table) -> None:
    """A partition as costbench wrote it at schema version 1: plain Parquet, no version stamp."""
    folder = partition_path(store.lake_root, table, week, scenario)
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(data, folder / PART_FILE)


def v1_runs(run_id: str, week: date, scenario: str = "chat") -> pa.Table:
    return build_run_row(run_info(run_id, 90.0), endpoint(), scenario, week).drop_columns(list(V2_RUN_COLUMNS))


def v1_requests(run_id: str) -> pa.Table:
    records = [request(run_id, "q1", 100, 1000), request(run_id, "q2", 300, 2000)]
    return requests_table(records).drop_columns(list(V2_REQUEST_COLUMNS))


def _write_v1_lake(store: Warehouse) -> None:
    write_v1_partition(store, "runs", WEEK, "chat", v1_runs("r1", WEEK))
    write_v1_partition(store, "requests", WEEK, "chat", v1_requests("r1"))


def _write_v1_database(store: Warehouse) -> None:
    store.root.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(str(store.db_path)) as con:
        con.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        con.execute("INSERT INTO schema_version VALUES (1)")
        con.execute("CREATE TABLE run_summary (run_id VARCHAR NOT NULL, realised_cost_per_request_usd DOUBLE)")
        con.execute("INSERT INTO run_summary VALUES ('stale', 9.9)")
        con.execute("CREATE TABLE weekly_trends (week_start DATE NOT NULL, realised_cost_change_pct DOUBLE)")


def test_a_version_1_warehouse_is_upgraded_and_rebuilt_from_the_lake(tmp_path):
    store = Warehouse(tmp_path / "wh", clock_wall_s=lambda: 1_800_000_000.0)
    _write_v1_lake(store)
    _write_v1_database(store)
    with pytest.raises(
        SchemaVersionError, match=f"older than {SCHEMA_VERSION}: upgrade it by refreshing once with write access"
    ):
        with store.connect(read_only=True):
            pass
    notes = store.refresh().upgrade_notes
    assert [n[:8] for n in notes] == ["v1 -> v2", "v2 -> v3", "v3 -> v4", "v4 -> v5", "v5 -> v6"]
    with store.connect(read_only=True) as con:
        assert con.execute("SELECT version, applied_wall_s FROM schema_version").fetchall() == [
            (SCHEMA_VERSION, 1_800_000_000.0)
        ]
        # Old lake files read the newer columns as null (or their documented default), not as an error.
        assert con.execute("SELECT config_fingerprint, warmup_s, slo_ttft_ms FROM runs").fetchall() == [
            (None, 0.0, None)
        ]
        assert con.execute("SELECT sum(held_s), count(held_by) FROM requests").fetchone() == (0.0, 0)
    [row] = store.run_summary()  # the stale v1 row is gone, the lake's run is there
    assert row.run_id == "r1" and row.completed_requests == 2
    assert row.realised_cost_per_request_usd == pytest.approx(0.20)  # 8 x $2/h x 90 s / 3600 / 2
    assert store.refresh().upgrade_notes == ()  # already current: nothing to upgrade
    with store.connect(read_only=True) as con:  # the lake files were read as they are, never rewritten
        assert con.execute("SELECT path, schema_version FROM lake_files ORDER BY path").fetchall() == [
            ("lake/requests/week=2025-03-03/scenario=chat/part-0.parquet", None),
            ("lake/runs/week=2025-03-03/scenario=chat/part-0.parquet", None),
        ]


def test_a_version_2_warehouse_keeps_its_history_and_gains_a_row_for_the_upgrade(tmp_path):
    store = Warehouse(tmp_path / "wh", clock_wall_s=lambda: 1_800_000_000.0)
    _write_v1_lake(store)
    store.root.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(str(store.db_path)) as con:  # what costbench at v2 left: its history, stale marts
        con.execute("CREATE TABLE schema_version (version INTEGER NOT NULL, applied_wall_s DOUBLE, note VARCHAR)")
        con.execute("INSERT INTO schema_version VALUES (2, 1700000000.0, 'created')")
        con.execute("CREATE TABLE run_summary (run_id VARCHAR NOT NULL)")
        con.execute("INSERT INTO run_summary VALUES ('stale')")
    notes = store.refresh().upgrade_notes
    assert [n[:8] for n in notes] == ["v2 -> v3", "v3 -> v4", "v4 -> v5", "v5 -> v6"]
    with store.connect(read_only=True) as con:
        assert con.execute("SELECT * FROM schema_version ORDER BY version").fetchall() == [
            (2, 1_700_000_000.0, "created"),
            (SCHEMA_VERSION, 1_800_000_000.0, "; ".join(notes)),
        ]
    assert [r.run_id for r in store.run_summary()] == ["r1"]


def test_a_version_4_warehouse_upgrades_and_its_runs_get_the_week_s_spend(tmp_path):
    store = Warehouse(tmp_path / "wh", clock_wall_s=lambda: 1_800_000_000.0)
    # A runs file as costbench wrote it at v4: stamped 4, without the revision's note or the hours a week.
    v4 = build_run_row(run_info("r4", 90.0), endpoint(), "chat", WEEK).drop_columns(list(V5_RUN_COLUMNS))
    v4 = v4.replace_schema_metadata({**(v4.schema.metadata or {}), SCHEMA_VERSION_KEY: b"4"})
    write_v1_partition(store, "runs", WEEK, "chat", v4)
    write_v1_partition(store, "requests", WEEK, "chat", requests_table([request("r4", "q1", 100, 1000)]))
    store.root.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(str(store.db_path)) as con:  # what costbench at v4 left: its history, a mart of its columns
        con.execute("CREATE TABLE schema_version (version INTEGER NOT NULL, applied_wall_s DOUBLE, note VARCHAR)")
        con.execute("INSERT INTO schema_version VALUES (4, 1700000000.0, 'created')")
        con.execute("CREATE TABLE weekly_trends (week_start DATE NOT NULL, cost_usd DOUBLE)")
    with pytest.raises(SchemaVersionError, match=f"older than {SCHEMA_VERSION}"):
        with store.connect(read_only=True):
            pass
    notes = store.refresh().upgrade_notes
    assert [n[:8] for n in notes] == ["v4 -> v5", "v5 -> v6"]
    assert "weekly_trends.cost_usd is renamed replay_cost_usd" in notes[0] and "eager_decode_share" in notes[1]
    with store.connect(read_only=True) as con:
        assert con.execute("SELECT version FROM schema_version ORDER BY version").fetchall() == [
            (4,),
            (SCHEMA_VERSION,),
        ]
        # The v4 file reads the new columns as null, or the documented default: the fleet held all week.
        assert con.execute("SELECT revision_note, hours_per_week FROM runs").fetchall() == [(None, 168.0)]
        assert con.execute("SELECT schema_version FROM lake_files WHERE table_name = 'runs'").fetchall() == [(4,)]
    [run] = store.run_summary()
    assert (run.hours_per_week, run.week_spend_usd) == (168.0, 8 * 2.0 * 168)  # 8 GPUs x $2 x 168 h
    [week] = store.weekly_trends()
    assert week.replay_cost_usd == pytest.approx(8 * 2.0 * 90 / 3600) and week.week_spend_usd == 2688.0


def test_a_newer_warehouse_is_refused_with_what_to_do_and_left_untouched(tmp_path):
    store = Warehouse(tmp_path / "wh")
    store.root.mkdir(parents=True)
    with duckdb.connect(str(store.db_path)) as con:
        con.execute("CREATE TABLE schema_version (version INTEGER NOT NULL, applied_wall_s DOUBLE, note VARCHAR)")
        con.execute("INSERT INTO schema_version VALUES (?, 0, 'from the future')", [SCHEMA_VERSION + 1])
        con.execute("CREATE TABLE run_summary (future_column INTEGER)")
    message = (
        f"{store.db_path} has schema version {SCHEMA_VERSION + 1}, newer than the {SCHEMA_VERSION} this costbench knows: "
        "it was built by a newer costbench. Upgrade costbench (pip install -U costbench, or pull the repository) and "
        "refresh again; nothing was changed."
    )
    with pytest.raises(SchemaVersionError) as refused:
        store.refresh()
    assert str(refused.value) == message
    with pytest.raises(SchemaVersionError, match="newer than"):
        with store.connect(read_only=True):
            pass
    with duckdb.connect(str(store.db_path), read_only=True) as con:
        assert con.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION + 1,)]
        assert [r[0] for r in con.execute("DESCRIBE run_summary").fetchall()] == ["future_column"]
    assert list(store.root.glob(".costbench.duckdb.build-*")) == []  # nothing was built beside it either
