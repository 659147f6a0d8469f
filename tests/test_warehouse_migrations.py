"""Schema versions: an older warehouse is upgraded in place with nothing lost; a newer one is refused untouched."""

from __future__ import annotations

from datetime import date

import duckdb
import pytest

from warehouse.lake import write_partition
from warehouse.run_rows import build_run_row
from warehouse.schema_migrations import SCHEMA_VERSION, SchemaVersionError
from warehouse.store import Warehouse
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


def _write_v1_lake(store: Warehouse) -> None:
    runs = build_run_row(run_info("r1", 90.0), endpoint(), "chat", WEEK).drop_columns(list(V2_RUN_COLUMNS))
    records = [request("r1", "q1", 100, 1000), request("r1", "q2", 300, 2000)]
    write_partition(store.lake_root, "runs", WEEK, "chat", runs)
    write_partition(
        store.lake_root, "requests", WEEK, "chat", requests_table(records).drop_columns(list(V2_REQUEST_COLUMNS))
    )


def _write_v1_database(store: Warehouse) -> None:
    store.root.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(str(store.db_path)) as con:
        con.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        con.execute("INSERT INTO schema_version VALUES (1)")
        con.execute("CREATE TABLE run_summary (run_id VARCHAR NOT NULL, cost_per_request_usd DOUBLE)")
        con.execute("INSERT INTO run_summary VALUES ('stale', 9.9)")
        con.execute("CREATE TABLE weekly_trends (week_start DATE NOT NULL, cost_change_pct DOUBLE)")


def test_a_version_1_warehouse_is_upgraded_and_rebuilt_from_the_lake(tmp_path):
    store = Warehouse(tmp_path / "wh", clock_wall_s=lambda: 1_800_000_000.0)
    _write_v1_lake(store)
    _write_v1_database(store)
    with pytest.raises(SchemaVersionError, match="older than 2: upgrade it by refreshing once with write access"):
        with store.connect(read_only=True):
            pass
    notes = store.refresh()
    assert len(notes) == 1 and notes[0].startswith("v1 -> v2")
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
    assert row["run_id"] == "r1" and row["completed_requests"] == 2
    assert row["cost_per_request_usd"] == pytest.approx(0.20)  # 8 x $2/h x 90 s / 3600 / 2
    assert store.refresh() == []  # already current: nothing to upgrade


def test_a_newer_warehouse_is_refused_with_what_to_do_and_left_untouched(tmp_path):
    store = Warehouse(tmp_path / "wh")
    store.root.mkdir(parents=True)
    with duckdb.connect(str(store.db_path)) as con:
        con.execute("CREATE TABLE schema_version (version INTEGER NOT NULL, applied_wall_s DOUBLE, note VARCHAR)")
        con.execute("INSERT INTO schema_version VALUES (3, 0, 'from the future')")
        con.execute("CREATE TABLE run_summary (future_column INTEGER)")
    message = (
        f"{store.db_path} has schema version 3, newer than the {SCHEMA_VERSION} this costbench knows: it was built by "
        "a newer costbench. Upgrade costbench (pip install -U costbench, or pull the repository) and refresh again; "
        "nothing was changed."
    )
    with pytest.raises(SchemaVersionError) as refused:
        store.refresh()
    assert str(refused.value) == message
    with pytest.raises(SchemaVersionError, match="newer than"):
        with store.connect(read_only=True):
            pass
    with duckdb.connect(str(store.db_path), read_only=True) as con:
        assert con.execute("SELECT version FROM schema_version").fetchall() == [(3,)]
        assert [r[0] for r in con.execute("DESCRIBE run_summary").fetchall()] == ["future_column"]
