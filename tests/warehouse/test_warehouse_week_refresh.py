"""A refresh a week at a time (warehouse/marts/week_scope.py, dbt's week_table): the weeks whose lake changed and the
asked ones are computed, the others kept, and every table comes out as a full rebuild of the same lake would make it;
anything the kept rows depend on besides the lake (the prices, the project) makes the refresh build every week."""

from __future__ import annotations

import math
import shutil
from datetime import date, timedelta
from pathlib import Path

import duckdb
import yaml

from warehouse.backends.store import Warehouse
from warehouse.marts.dbt_build import project_dir
from warehouse.marts.price_table import default_prices_path
from warehouse.marts.week_scope import WeekScope
from warehouse_builders import capacity_context, endpoint, request, run_info, write_runs

W1 = date(2025, 2, 3)
WEEKS = [W1 + timedelta(days=7 * i) for i in range(4)]
SPEC = endpoint(usd_per_gpu_hour=200.0)
# Rows that say which build made them (paths into the refresh's own snapshot, its time), not what the lake holds.
_OWN_ROWS = {"mart_build", "lake_files", "schema_version"}


def _week(store: Warehouse, week: date, scenario: str, ttft_ms: float, runs: int = 1) -> None:
    """`runs` replays of 30 requests with a capacity sweep each; several runs make a pooled weekly_trends row."""
    replays = []
    for r in range(runs):
        run_id = f"{scenario}-{week}-{r}"
        records = [
            request(run_id, f"q{i}", ttft_ms + 7 * i + 3 * r, ttft_ms + 120 + 5 * i, cached_tokens=40 * i,
                    sent_mono_s=0.3 * i + 0.01)
            for i in range(30)
        ]  # fmt: skip
        info = run_info(run_id, 9.0, duration_s=9.0, speedup=1.0, requests_total=30, requests_recorded=30)
        replays.append((info, records))
    contexts = [capacity_context(0.10 + ttft_ms / 10_000 + 0.01 * r) for r in range(runs)]
    write_runs(store.lake_root, week, scenario, replays, SPEC, contexts)


def _lake(store: Warehouse) -> None:
    for i, week in enumerate(WEEKS):
        _week(store, week, "chat", 100.0 + 10 * i)
        _week(store, week, "reason", 300.0 + 20 * i, runs=2)


def _tables(db_path: Path) -> dict[str, list[tuple]]:
    """Every table of the database (main and staging), its rows sorted."""
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        names = con.execute(
            "SELECT table_schema, table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE' "
            "AND table_catalog = current_database() ORDER BY ALL"
        ).fetchall()
        return {
            f"{schema}.{name}": sorted(
                (_comparable(row) for row in con.execute(f"FROM {schema}.{name}").fetchall()), key=repr
            )
            for schema, name in names
            if name not in _OWN_ROWS
        }
    finally:
        con.close()


def _comparable(row: tuple) -> tuple:
    """NaN as a value equal to itself (a pooled ratio of 0 / 0 in both builds), so rows compare by what they hold."""
    return tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in row)


def _full_rebuild_of(store: Warehouse, tmp_path: Path) -> dict[str, list[tuple]]:
    """The tables a full build of the same lake makes, in a copy of the warehouse folder."""
    copy = tmp_path / "full"
    shutil.copytree(store.root, copy, symlinks=True)
    full = Warehouse(copy, prices_path=store.prices_path)
    assert full.refresh(full=True).scope.weeks is None  # type: ignore[union-attr]
    return _tables(full.db_path)


def test_a_refresh_computes_the_changed_and_asked_weeks_and_equals_a_full_rebuild(tmp_path):
    store = Warehouse(tmp_path / "wh")
    _lake(store)
    first = store.refresh()
    assert first.scope is not None and first.scope.full and "no earlier build" in first.scope.reason
    before = _tables(store.db_path)

    _week(store, WEEKS[2], "reason", 900.0, runs=2)  # week 3 slower: the job's partition
    _week(store, WEEKS[0], "chat", 50.0)  # week 1 written again meanwhile (a backfill), not asked for
    refreshed = store.refresh(weeks=[WEEKS[2], WEEKS[3]])

    assert refreshed.scope is not None
    assert refreshed.scope.weeks == (WEEKS[0], WEEKS[2], WEEKS[3])
    assert refreshed.scope.reason == (f"lake changed in {WEEKS[0]}, {WEEKS[2]}; asked for {WEEKS[3]}")
    after = _tables(store.db_path)
    assert after == _full_rebuild_of(store, tmp_path)
    # The change reached the marts: the rewritten weeks' rows moved, the week tables' other weeks are the same rows.
    assert after["main.weekly_trends"] != before["main.weekly_trends"]
    assert after["staging.pooled_percentiles"] != before["staging.pooled_percentiles"]
    kept = [row for row in before["main.run_summary"] if row[0].endswith(f"{WEEKS[1]}-0")]
    assert kept and all(row in after["main.run_summary"] for row in kept)
    with duckdb.connect(str(store.db_path), read_only=True) as con:
        assert con.execute("SELECT rebuilt_weeks, reason FROM mart_build").fetchall() == [
            ([WEEKS[0], WEEKS[2], WEEKS[3]], refreshed.scope.reason)
        ]


def test_a_refresh_of_an_unchanged_lake_computes_no_week_and_keeps_every_row(tmp_path):
    store = Warehouse(tmp_path / "wh")
    _lake(store)
    store.refresh()
    before = _tables(store.db_path)
    again = store.refresh()
    assert again.scope is not None and again.scope.weeks == ()
    assert again.scope.reason == "nothing changed since the last build"
    assert _tables(store.db_path) == before


def test_a_removed_partition_drops_its_weeks_rows_as_a_full_rebuild_would(tmp_path):
    store = Warehouse(tmp_path / "wh")
    _lake(store)
    store.refresh()
    shutil.rmtree(store.lake_root / "requests" / f"week={WEEKS[1]}" / "scenario=chat")
    refreshed = store.refresh()
    assert refreshed.scope is not None and refreshed.scope.weeks == (WEEKS[1],)
    assert _tables(store.db_path) == _full_rebuild_of(store, tmp_path)


def test_new_prices_or_a_full_refresh_compute_every_week(tmp_path):
    prices = yaml.safe_load(default_prices_path().read_text())
    path = tmp_path / "prices.yaml"
    path.write_text(yaml.safe_dump(prices))
    store = Warehouse(tmp_path / "wh", prices_path=path)
    _lake(store)
    store.refresh()
    assert store.refresh(full=True).scope.weeks is None  # type: ignore[union-attr]

    prices["gpu"][0]["usd_per_gpu_hour"] *= 2
    path.write_text(yaml.safe_dump(prices))
    repriced = store.refresh()
    assert repriced.scope is not None and repriced.scope.full
    assert (
        repriced.scope.reason
        == "DuckDB, the dbt project, the views, the lake's columns or the prices changed since the last build"
    )
    assert _tables(store.db_path) == _full_rebuild_of(store, tmp_path)


def test_a_last_build_that_cannot_be_read_makes_the_refresh_compute_every_week(tmp_path):
    """The kept weeks are read from the live file; one DuckDB cannot open (here: not a database) costs a full build,
    not a failed refresh."""
    (tmp_path / "costbench.duckdb").write_bytes(b"not a database")
    con = duckdb.connect()
    try:
        scope = Warehouse._attach_previous(con, tmp_path, WeekScope((WEEKS[0],), "lake changed in 2025-02-03"))
    finally:
        con.close()
    assert scope.full and scope.reason.startswith("the last build could not be read for the weeks it keeps: ")


def test_every_model_that_reads_the_lakes_requests_or_samples_is_a_week_table():
    """What keeps a weekly refresh from reading every week's requests again: a model that reads them is computed a
    week at a time (docs/warehouse.md, "A week at a time")."""
    readers = {}
    for path in sorted((project_dir() / "models").rglob("*")):
        if path.suffix not in (".sql", ".py"):  # the SQL and the Python models
            continue
        text = path.read_text().replace('"', "'")
        if any(f"source('warehouse', '{table}')" in text for table in ("requests", "server_samples", "gpu_samples")):
            readers[path.stem] = "config(materialized='week_table')" in text
    assert len(readers) >= 8 and all(readers.values()), readers
