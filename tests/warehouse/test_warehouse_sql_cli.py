"""The DuckDB CLI analysts are told to run comes with the install (duckdb-cli, the pinned DuckDB's own) and
answers the documented example queries on a warehouse built by a real refresh: through `make sql` (which
attaches whatever COSTBENCH_WAREHOUSE names, read-only: a local folder, or a DuckLake whose catalog is in a
real PostgreSQL) and the way docs/warehouse.md opens a local warehouse, `duckdb -readonly
warehouse/costbench.duckdb` from the repository (the views read the lake under the folder it was refreshed in,
from any working directory)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date, timedelta
from importlib import resources
from pathlib import Path

import pytest

from warehouse.backends.backend import WAREHOUSE_ENV, open_warehouse
from warehouse.backends.store import LAKE_TABLES, Warehouse
from warehouse.parquet.lake import list_partitions
from warehouse_builders import endpoint, request, run_info, write_run

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DUCKDB = BIN / "duckdb"
WEEKS = [date(2025, 2, 3) + timedelta(days=7 * i) for i in range(3)]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Warehouse:
    store = Warehouse(tmp_path_factory.mktemp("sql_cli") / "wh")
    for week, window_s, cached in zip(WEEKS, (90.0, 92.0, 130.0), (600, 620, 200)):  # the last week regresses
        run_id = f"chat-v3-{week.isoformat()}"
        records = [request(run_id, f"q{i}", 100 + i, 2000 + i, cached_tokens=cached) for i in range(20)]
        write_run(store.lake_root, week, "chat-v3", run_info(run_id, window_s), endpoint(), records)
    store.refresh()
    return store


def _example(name: str) -> str:
    return resources.files("warehouse").joinpath("sql", name).read_text()


def _in_python(store: Warehouse, sql: str) -> list[dict]:
    with store.connect(read_only=True) as con:
        cursor = con.execute(sql)
        columns = [d[0] for d in cursor.description]
        return [
            {c: v.isoformat() if isinstance(v, date) else v for c, v in zip(columns, row)} for row in cursor.fetchall()
        ]


def _make_sql(location: str, stdin: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    # -o: the environment is the one running these tests; make must not try to rebuild it.
    return subprocess.run(
        ["make", "-s", "-C", str(REPO), "-o", ".venv/.installed-stamp", f"BIN={BIN}", "sql"],
        input=stdin, capture_output=True, text=True, timeout=120, cwd=cwd,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("PG")}, **env, WAREHOUSE_ENV: location},
    )  # fmt: skip


def test_the_duckdb_command_is_the_pinned_duckdb():
    import duckdb

    done = subprocess.run([str(DUCKDB), "--version"], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split()[0] == f"v{duckdb.__version__}"


def test_make_sql_answers_an_example_query_read_only(store, tmp_path):
    sql = _example("example_cost_trend.sql")
    done = _make_sql(
        str(store.root), ".mode json\n" + sql, cwd=tmp_path
    )  # from anywhere: the lines say where the lake is
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert rows == _in_python(store, sql)
    assert [r["regression_verdict"] for r in rows] == ["no_baseline", "ok", "regression"]
    refused = _make_sql(str(store.root), "CREATE TABLE scribble AS SELECT 1;\n", cwd=tmp_path)
    assert refused.returncode != 0 and "read-only" in (refused.stdout + refused.stderr)


def test_make_sql_reads_a_moved_warehouse_before_its_next_refresh(tmp_path):
    original = Warehouse(tmp_path / "wh")
    records = [request("moved", "q0", 100, 2000)]
    write_run(original.lake_root, WEEKS[0], "chat-v3", run_info("moved", 90.0), endpoint(), records)
    original.refresh()
    moved = original.root.rename(tmp_path / "moved")  # the database still names the old folder
    done = _make_sql(str(moved), ".mode json\nSELECT count(*) AS requests FROM requests;\n", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [{"requests": 1}]


def test_the_documented_cli_line_reads_the_lake_views_from_the_folder_above(store):
    sql = "SELECT week_start, count(*) AS requests FROM requests GROUP BY ALL ORDER BY ALL;"
    db = f"{store.root.name}/costbench.duckdb"  # as warehouse/costbench.duckdb from the repository
    opened = subprocess.run(
        [str(DUCKDB), "-readonly", db, "-json", "-c", sql],
        capture_output=True, text=True, timeout=60, cwd=store.root.parent,
    )  # fmt: skip
    assert opened.returncode == 0, opened.stderr
    assert json.loads(opened.stdout) == [{"week_start": w.isoformat(), "requests": 20} for w in WEEKS]


def test_make_sql_attaches_a_ducklake_warehouse_read_only_with_only_its_url(store, postgres_database, tmp_path):
    db = postgres_database()
    lake = open_warehouse(
        f"ducklake:postgresql://{db.user}:{db.password}@{db.host}:{db.port}/{db.dbname}?data_path={tmp_path / 'data'}",
        tmp_path / "scratch",
    )
    try:  # the same lake as the local warehouse, written as DuckLake transactions, then refreshed
        for table in LAKE_TABLES:
            for p in list_partitions(store.lake_root, table):
                lake.write_partition(
                    table, p.week_start, p.scenario, store.read_partition(table, p.week_start, p.scenario)
                )
        lake.refresh()
    finally:
        lake.close()
    sql = _example("example_cost_trend.sql")
    url = f"ducklake:postgresql://{db.user}@{db.host}:{db.port}/{db.dbname}"  # the password from libpq's PGPASSWORD
    done = _make_sql(url, ".mode json\n" + sql, cwd=tmp_path, PGPASSWORD=db.password)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == _in_python(store, sql)
    refused = _make_sql(url, "CREATE TABLE scribble AS SELECT 1;\n", cwd=tmp_path, PGPASSWORD=db.password)
    assert refused.returncode != 0 and "read-only" in (refused.stdout + refused.stderr).lower()
