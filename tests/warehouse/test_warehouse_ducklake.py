"""The DuckLake warehouse on a real PostgreSQL catalog (tests/postgres_cluster.py): the same marts as the local
backend from the same lake, atomic partition replacement under a concurrent reader, two writer processes,
time travel, and what an analyst's plain `duckdb` session sees with only the catalog URL."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
import textwrap
from datetime import date
from pathlib import Path

import pytest

from warehouse.backends.backend import open_warehouse
from warehouse.backends.ducklake_store import ALIAS, DuckLakeWarehouse
from warehouse.backends.store import LAKE_TABLES, Warehouse
from warehouse.marts.mart_rows import as_dict
from warehouse.parquet.crash_point import CRASH_AT_ENV
from warehouse.parquet.lake import list_partitions
from warehouse_builders import (
    endpoint,
    failed_request,
    gpu_sample,
    request,
    requests_table,
    run_info,
    server_sample,
    write_run,
)

REPO = Path(__file__).resolve().parents[2]
DUCKDB_CLI = Path(sys.executable).parent / "duckdb"
WEEKS = (date(2025, 2, 3), date(2025, 2, 10), date(2025, 2, 17))
SCENARIOS = ("chat", "reason")


def ducklake_url(db, data_path: Path | None, password: bool = True) -> str:
    secret = f":{db.password}" if password else ""
    query = f"?data_path={data_path}" if data_path else ""
    return f"ducklake:postgresql://{db.user}{secret}@{db.host}:{db.port}/{db.dbname}{query}"


def _week_lake(lake_root: Path) -> None:
    """Three weeks x two scenarios of one run each, with server and GPU samples, costs moving week to week."""
    for i, week in enumerate(WEEKS):
        for j, scenario in enumerate(SCENARIOS):
            run_id = f"{scenario}-{i}"
            records = [
                request(run_id, f"q{k}", 100 + 40 * k + 30 * i, 900 + 200 * k, cached_tokens=100 * k) for k in range(8)
            ]
            records += [failed_request(run_id, "f1"), request(run_id, "w1", 5000, 6000, is_warmup=True)]
            samples = [server_sample(run_id, t, "sglang:num_running_reqs", 10.0 + t) for t in range(0, 30, 3)]
            samples += [server_sample(run_id, t, "sglang:token_usage", 0.4) for t in range(0, 30, 3)]
            gpus = [gpu_sample(run_id, t, 60.0 + t) for t in range(0, 30, 5)]
            spec = endpoint(usd_per_gpu_hour=2.0 + 0.5 * i + j)
            write_run(
                lake_root,
                week,
                scenario,
                run_info(run_id, 30.0 + 5 * i),
                spec,
                records,
                server_samples=samples,
                gpu_samples=gpus,
            )


@pytest.fixture(scope="module")
def both(postgres_cluster, tmp_path_factory):
    """The same lake in a local warehouse and in a DuckLake, both refreshed."""
    tmp = tmp_path_factory.mktemp("ducklake")
    local = Warehouse(tmp / "local")
    _week_lake(local.lake_root)
    db = postgres_cluster.create_database("ducklake_marts")
    lake = open_warehouse(ducklake_url(db, tmp / "data"), tmp / "scratch")
    assert isinstance(lake, DuckLakeWarehouse)
    for table in LAKE_TABLES:
        for p in list_partitions(local.lake_root, table):
            lake.write_partition(table, p.week_start, p.scenario, local.read_partition(table, p.week_start, p.scenario))
    local.refresh()
    lake.refresh()
    yield local, lake, db, tmp
    lake.close()


def _table(store, name: str, order_by: str) -> list[dict]:
    with store.connect(read_only=True) as con:
        cursor = con.execute(f"SELECT * FROM {name} ORDER BY {order_by}")
        columns = [d[0] for d in cursor.description]
        return [dict(zip(columns, row)) for row in cursor.fetchall()]


def test_the_marts_equal_the_local_backends_on_the_same_lake(both):
    local, lake, _db, _tmp = both
    assert len(lake.run_summary()) == len(WEEKS) * len(SCENARIOS)
    assert lake.run_summary() == local.run_summary()
    assert lake.weekly_trends() == local.weekly_trends()
    assert lake.diagnoses() == local.diagnoses()
    order = "week_start, scenario, endpoint, backend, config_fingerprint"
    assert _table(lake, "cost_intervals", order) == _table(local, "cost_intervals", order)
    # The views too: the derived request columns come from the same schema.sql on both.
    order = "week_start, scenario, run_id, request_id"
    assert _table(lake, "requests", order) == _table(local, "requests", order)
    assert {r.regression_verdict for r in lake.weekly_trends()} >= {"no_baseline"}
    assert lake.lake_quarantine() == []


def test_a_partition_reads_back_as_written_and_a_mistyped_column_is_refused(both):
    local, lake, _db, _tmp = both
    week, scenario = WEEKS[0], "chat"
    back, written = lake.read_partition("requests", week, scenario), local.read_partition("requests", week, scenario)
    assert back.schema.names == written.schema.names and back.to_pylist() == written.to_pylist()
    bad = local.read_partition("requests", week, scenario)
    bad = bad.set_column(bad.schema.get_field_index("input_tokens"), "input_tokens", bad["input_tokens"].cast("string"))
    from warehouse.parquet.lake import LakeError

    with pytest.raises(LakeError, match="input_tokens: string, the lake has int32; nothing was written"):
        lake.write_partition("requests", week, scenario, bad)


def test_time_travel_reads_last_weeks_snapshot_after_the_partition_is_rewritten(both, postgres_cluster):
    _local, lake, _db, _tmp = both
    week, scenario = WEEKS[-1], "reason"
    before = lake.current_snapshot()
    old_summary = [r for r in lake.run_summary() if (r.week_start, r.scenario) == (week, scenario)]
    rewritten = [request("reason-2-again", f"q{k}", 50, 500) for k in range(3)]
    lake.write_partition("requests", week, scenario, requests_table(rewritten))
    with lake.connect() as con:
        now = con.execute("SELECT DISTINCT run_id FROM lake.requests WHERE week = ? AND scenario = ?", [week, scenario])
        assert now.fetchall() == [("reason-2-again",)]
        then = con.execute(
            f"SELECT DISTINCT run_id FROM lake.requests AT (VERSION => {before}) WHERE week = ? AND scenario = ?",
            [week, scenario],
        )
        assert then.fetchall() == [("reason-2",)]
    # The whole warehouse as it was, marts included, attached at that snapshot.
    with lake.connect(snapshot=before) as con:
        cursor = con.execute("SELECT * FROM run_summary WHERE week_start = ? AND scenario = ?", [week, scenario])
        columns = [d[0] for d in cursor.description]
        assert [dict(zip(columns, row)) for row in cursor.fetchall()] == [as_dict(r) for r in old_summary]
    assert [s["snapshot_id"] for s in lake.snapshots()][-1] > before


def test_a_week_at_a_time_refresh_reads_the_lakes_changes_and_equals_the_local_backend(postgres_cluster, tmp_path):
    """DuckLake finds the changed weeks in the catalog's own history (table_changes since the last refresh's snapshot);
    its marts after a refresh of one week equal the local backend's on the same lake, and a full rebuild's."""
    local = Warehouse(tmp_path / "local")
    _week_lake(local.lake_root)
    lake = open_warehouse(ducklake_url(postgres_cluster.create_database("ducklake_weeks"), tmp_path / "data"), tmp_path)
    assert isinstance(lake, DuckLakeWarehouse)
    try:
        for table in LAKE_TABLES:
            for p in list_partitions(local.lake_root, table):
                data = local.read_partition(table, p.week_start, p.scenario)
                lake.write_partition(table, p.week_start, p.scenario, data)
        assert local.refresh().scope.full and lake.refresh().scope.full  # type: ignore[union-attr]
        assert lake.refresh().scope.weeks == ()  # type: ignore[union-attr]

        rewritten = requests_table([request("chat-1", f"q{k}", 400 + 50 * k, 2000) for k in range(5)])
        for store in (local, lake):
            store.write_partition("requests", WEEKS[1], "chat", rewritten)
            refreshed = store.refresh(weeks=[WEEKS[2]])
            assert refreshed.scope is not None and refreshed.scope.weeks == (WEEKS[1], WEEKS[2])
        assert lake.run_summary() == local.run_summary()
        assert lake.weekly_trends() == local.weekly_trends()
        order = "week_start, scenario, endpoint, backend, config_fingerprint"
        assert _table(lake, "cost_intervals", order) == _table(local, "cost_intervals", order)
        kept = (lake.run_summary(), lake.weekly_trends(), _table(lake, "staging.interval_block_rows", "ALL"))
        assert lake.refresh(full=True).scope.full  # type: ignore[union-attr]
        assert (lake.run_summary(), lake.weekly_trends(), _table(lake, "staging.interval_block_rows", "ALL")) == kept
    finally:
        lake.close()


WRITER = textwrap.dedent(
    """
    import sys
    from datetime import date
    from pathlib import Path
    sys.path.insert(0, sys.argv[5])
    from warehouse.backends.backend import open_warehouse
    from warehouse_builders import request, requests_table
    url, week, scenario, times = sys.argv[1], date.fromisoformat(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    store = open_warehouse(url, Path("."))
    store.write_partition("requests", week, scenario, requests_table([request("warm", "q0", 1, 2)]))
    print("ready", flush=True)
    sys.stdin.readline()  # both writers start together
    for generation in range(1, times + 1):
        rows = [request(f"{scenario}-gen{generation}", f"q{k}", 100, 1000) for k in range(50)]
        store.write_partition("requests", week, scenario, requests_table(rows))
    print(store.commit_retries, flush=True)
    """
)


def test_two_writer_processes_on_different_partitions_both_commit_while_a_reader_sees_whole_partitions(
    postgres_cluster, tmp_path
):
    db = postgres_cluster.create_database("ducklake_writers")
    url = ducklake_url(db, tmp_path / "data")
    reader = open_warehouse(url, tmp_path)
    assert isinstance(reader, DuckLakeWarehouse)
    week = WEEKS[0]
    times = 4
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, url, week.isoformat(), scenario, str(times), str(REPO / "tests")],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for scenario in SCENARIOS
    ]
    try:
        for w in writers:
            assert w.stdout.readline().strip() == "ready", w.stderr.read()
        for w in writers:
            w.stdin.write("go\n")
            w.stdin.flush()
        query = (
            "SELECT scenario, count(*), count(DISTINCT run_id), min(run_id) FROM lake.requests "
            "WHERE week = ? GROUP BY scenario ORDER BY scenario"
        )
        while any(w.poll() is None for w in writers):
            with reader.connect() as con:
                rows = con.execute(query, [week]).fetchall()
            # Every read is one snapshot: each partition is one whole generation, never a mix, never missing.
            assert [r[0] for r in rows] == list(SCENARIOS)
            for _scenario, count, runs, run_id in rows:
                assert runs == 1 and count == (1 if run_id == "warm" else 50), rows
        outs = [w.communicate(timeout=60) for w in writers]
    finally:
        for w in writers:
            w.kill()
    assert [w.returncode for w in writers] == [0, 0], [err for _out, err in outs]
    with reader.connect() as con:
        final = con.execute(query, [week]).fetchall()
    assert final == [(s, 50, 1, f"{s}-gen{times}") for s in SCENARIOS]
    # Every generation of both writers is a commit of its own (the 1-row warm-ups are inlined in the catalog).
    committed = [s for s in reader.snapshots() if "tables_inserted_into" in (s["changes"] or {})]
    assert len(committed) == 2 * times
    reader.close()


def _attach_lines(url: str, env: dict) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "warehouse", "attach-sql", "--warehouse", url],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()


def test_an_analysts_plain_duckdb_session_attaches_read_only_with_only_the_url(both):
    _local, lake, db, _tmp = both
    # What the analyst has: the catalog URL without the password (libpq reads PGPASSWORD or ~/.pgpass).
    url = ducklake_url(db, None, password=False)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "COSTBENCH_"))}
    env["PGPASSWORD"] = db.password
    lines = _attach_lines(url, env)
    assert len(lines) == 3 and db.password not in "\n".join(lines)
    query = (REPO / "warehouse" / "sql" / "example_cost_trend.sql").read_text()
    cli = subprocess.run(
        [str(DUCKDB_CLI), "-csv", "-bail"],
        input="\n".join(lines) + "\n" + query + "\nCREATE TABLE analyst_scratch (a INTEGER);\n",
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    rows = list(csv.DictReader(io.StringIO(cli.stdout)))
    expected = sorted((r.scenario, str(r.week_start), r.regression_verdict) for r in lake.weekly_trends())
    assert sorted((r["scenario"], r["week_start"], r["regression_verdict"]) for r in rows) == expected
    # Read-only: the analyst's session cannot write to the shared warehouse.
    assert cli.returncode != 0 and "read-only" in cli.stderr.lower(), cli.stderr


def test_the_refresh_command_runs_on_ducklake_and_names_the_catalog_without_the_password(both):
    _local, _lake, db, _tmp = both
    url = ducklake_url(db, None)
    done = subprocess.run(
        [sys.executable, "-m", "warehouse", "refresh"],
        cwd=REPO,
        env={**os.environ, "COSTBENCH_WAREHOUSE": url},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    refreshed, computed = done.stdout.strip().splitlines()
    assert refreshed == f"refreshed ducklake:postgresql://{db.user}@{db.host}:{db.port}/{db.dbname}"
    assert computed.startswith("computed ") and db.password not in computed


def test_bad_locations_and_an_unreachable_catalog_each_get_one_clear_error(postgres_cluster, tmp_path):
    from warehouse.backends.backend import WarehouseLocationError
    from warehouse.backends.ducklake_store import CatalogError

    scratch = tmp_path / "scratch"
    for url, message in [
        ("ducklake:mysql://u@h/db", "the catalog must be PostgreSQL (postgresql://), got 'mysql'"),
        ("ducklake:postgresql:///db", "no catalog host"),
        ("ducklake:postgresql://u@h:5432/db?data_path=relative/dir", "must be an absolute path or an object-store"),
        ("ducklake:postgresql://u:pw@h:5432/db?colour=red", "unknown option(s) ['colour']"),
        ("ducklake:postgresql://u@h:notaport/db", "bad DuckLake location"),
        ("iceberg://x/y", "no backend for 'iceberg'"),
    ]:
        with pytest.raises(WarehouseLocationError) as caught:
            open_warehouse(url, scratch)
        assert message in str(caught.value) and ":pw@" not in str(caught.value)
    db = postgres_cluster.create_database("ducklake_errors")
    closed_port = postgres_cluster.port + 1 if postgres_cluster.port < 65535 else 1024
    unreachable = open_warehouse(ducklake_url(db, tmp_path / "d").replace(f":{db.port}/", f":{closed_port}/"), scratch)
    with pytest.raises(CatalogError) as caught:
        unreachable.snapshots()
    text = str(caught.value)
    assert f"cannot reach the DuckLake catalog ducklake:postgresql://{db.user}@{db.host}:{closed_port}/" in text
    assert f"(PostgreSQL at {db.host}:{closed_port})" in text and db.password not in text
    wrong = open_warehouse(ducklake_url(db, tmp_path / "d").replace(db.password, "not-the-password"), scratch)
    with pytest.raises(CatalogError, match="password authentication failed") as caught:
        wrong.run_summary()
    assert "not-the-password" not in str(caught.value)
    with pytest.raises(CatalogError, match=r"holds no warehouse yet: add \?data_path="):
        open_warehouse(ducklake_url(db, None), scratch).write_partition(
            "requests", WEEKS[0], "chat", requests_table([request("r", "q", 1, 2)])
        )
    # The command line says the same in one line: 2 for a bad URL, 1 for an unreachable catalog.
    env = {**os.environ}
    for url, status, message in [
        ("ducklake:mysql://u@h/db", 2, "the catalog must be PostgreSQL"),
        (ducklake_url(db, tmp_path / "d").replace(f":{db.port}/", f":{closed_port}/"), 1, "cannot reach"),
    ]:
        done = subprocess.run(
            [sys.executable, "-m", "warehouse", "refresh", "--warehouse", url],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == status and message in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and db.password not in done.stderr


NO_DOWNLOAD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from warehouse.backends.duckdb_extensions import PACKAGES, load_extensions, offline_connection
    con = offline_connection()
    settings = con.execute(
        "SELECT current_setting('autoinstall_known_extensions'), current_setting('autoload_known_extensions')"
    ).fetchone()
    assert settings == (False, False), settings
    load_extensions(con, sorted(PACKAGES))
    folder = Path(sys.argv[1])
    con.execute(f"ATTACH 'ducklake:{folder}/catalog.ducklake' AS lk (DATA_PATH '{folder}/data')")
    con.execute("CREATE TABLE lk.t AS SELECT 42 AS answer")
    print(con.execute("SELECT answer FROM lk.t").fetchone()[0])
    """
)


def test_extensions_load_from_the_packages_with_no_network_and_nothing_is_downloaded(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    command = [sys.executable, "-c", NO_DOWNLOAD, str(tmp_path)]
    # A network namespace of its own (no interface up) where we may make one; an empty HOME either way, so no
    # extension installed under ~/.duckdb can be what loads.
    isolated = subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0
    done = subprocess.run(
        (["unshare", "-n"] if isolated else []) + command,
        cwd=REPO,
        env={**os.environ, "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.strip() == "42", done.stderr
    assert not (home / ".duckdb").exists()


def test_a_missing_extension_package_is_one_clear_error(tmp_path):
    # The interpreter in isolated mode without site-packages cannot see the extension packages.
    code = (
        "import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]\n"
        "from warehouse.backends.duckdb_extensions import ExtensionError, extension_path\n"
        "try:\n    extension_path('ducklake')\nexcept ExtensionError as exc:\n    print(exc)\n"
    )
    duckdb_only = tmp_path / "duckdb_only"
    duckdb_only.mkdir()
    import duckdb

    (duckdb_only / "duckdb").symlink_to(Path(duckdb.__file__).parent)
    native = next(Path(duckdb.__file__).parent.parent.glob("_duckdb.*.so"))
    (duckdb_only / native.name).symlink_to(native)
    for info in native.parent.glob("duckdb-*.dist-info"):  # duckdb reads its own version from it
        (duckdb_only / info.name).symlink_to(info)
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, str(REPO), str(duckdb_only)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "DuckDB extension 'ducklake' is missing: install the Python package duckdb-extension-ducklake==" in (
        done.stdout
    ), done.stdout + done.stderr
    assert "never downloads" in done.stdout


def test_the_analyst_lines_need_only_the_url():
    # Built from the installed packages and the URL alone (no catalog connection); no password in them.
    from warehouse.backends.ducklake_store import analyst_lines
    from warehouse.backends.ducklake_url import parse_ducklake_url

    lines = analyst_lines(parse_ducklake_url("ducklake:postgresql://analyst:pw@db.example:5432/costbench"))
    assert lines[1] == (
        "ATTACH 'ducklake:postgres:host=db.example port=5432 dbname=costbench user=analyst' AS costbench (READ_ONLY);"
    )
    assert lines[2] == "USE costbench;"
    assert lines[0].count("LOAD '") == 2 and "ducklake.duckdb_extension" in lines[0]


def test_one_setting_chooses_the_backend_for_the_pipeline_and_the_tools(monkeypatch, tmp_path):
    from assets.resources import REPO_ROOT, WarehouseResource

    url = "ducklake:postgresql://costbench@127.0.0.1:5432/costbench?data_path=/srv/costbench"
    monkeypatch.setenv("COSTBENCH_WAREHOUSE", url)
    chosen = open_warehouse(None, tmp_path)  # nothing is attached until first use
    assert isinstance(chosen, DuckLakeWarehouse) and chosen.catalog.data_path == "/srv/costbench"
    assert isinstance(WarehouseResource().warehouse(), DuckLakeWarehouse)
    assert WarehouseResource().root_path() == REPO_ROOT / "warehouse"  # run folders stay local
    monkeypatch.setenv("COSTBENCH_WAREHOUSE", str(tmp_path / "wh"))
    assert isinstance(WarehouseResource().warehouse(), Warehouse)
    assert WarehouseResource().root_path() == tmp_path / "wh"
    # The resource's own config wins over the environment, as before.
    resource = WarehouseResource(root=url)
    assert isinstance(resource.warehouse(), DuckLakeWarehouse)


def _view_and_marts(con) -> tuple[int, int, int]:
    """requests in the view, completed requests in run_summary, rows in the lake table itself."""
    view = con.execute("SELECT count(*) FROM requests").fetchone()[0]
    marts = con.execute("SELECT coalesce(sum(completed_requests), 0) FROM run_summary").fetchone()[0]
    lake = con.execute("SELECT count(*) FROM lake.requests").fetchone()[0]
    return view, int(marts), lake


def test_the_views_read_the_snapshot_the_marts_were_built_from_until_the_next_refresh(postgres_cluster, tmp_path):
    db = postgres_cluster.create_database("ducklake_session")
    url = ducklake_url(db, tmp_path / "data")
    lake = open_warehouse(url, tmp_path)
    writer = open_warehouse(url, tmp_path)  # another process's warehouse: its own DuckDB, its own commits
    assert isinstance(lake, DuckLakeWarehouse) and isinstance(writer, DuckLakeWarehouse)
    for week in WEEKS[:2]:
        write_run_to(lake, week, "chat", 3)
    lake.refresh()
    session = lake._instance().cursor()  # a plain session: autocommit, one snapshot per statement
    try:
        session.execute(f"USE {ALIAS}")
        assert _view_and_marts(session) == (6, 6, 6)
        write_run_to(writer, WEEKS[0], "chat", 5)  # re-materialized, and a new week, between refreshes
        write_run_to(writer, WEEKS[2], "chat", 4)
        assert _view_and_marts(session) == (6, 6, 12)  # the lake table moves; the views stay with the marts
        with lake.connect() as con:
            assert _view_and_marts(con) == (6, 6, 12)
        writer.refresh()
        assert _view_and_marts(session) == (12, 12, 12)
    finally:
        session.close()
        lake.close()
        writer.close()


def write_run_to(store: DuckLakeWarehouse, week: date, scenario: str, requests: int) -> None:
    run_id = f"{scenario}-{week.isoformat()}"
    staging = Warehouse(store.root / f"staging-{run_id}-{requests}")
    records = [request(run_id, f"q{k}", 100, 1000) for k in range(requests)]
    write_run(staging.lake_root, week, scenario, run_info(run_id, 30.0), endpoint(), records)
    for table in ("runs", "requests"):
        store.write_partition(table, week, scenario, staging.read_partition(table, week, scenario))


KILLED_WRITER = textwrap.dedent(
    """
    import sys
    from datetime import date
    from pathlib import Path
    sys.path.insert(0, sys.argv[4])
    from warehouse.backends.backend import open_warehouse
    from warehouse_builders import request, requests_table
    url, week, scenario = sys.argv[1], date.fromisoformat(sys.argv[2]), sys.argv[3]
    rows = [request(f"{scenario}-killed", f"q{k}", 100, 1000) for k in range(50)]
    open_warehouse(url, Path(".")).write_partition("requests", week, scenario, requests_table(rows))
    """
)


def test_data_files_of_writers_killed_before_their_commit_are_removed_by_cleanup_which_names_them(
    postgres_cluster, tmp_path
):
    db = postgres_cluster.create_database("ducklake_orphans")
    data = tmp_path / "data"
    url = ducklake_url(db, data)
    lake = open_warehouse(url, tmp_path)
    assert isinstance(lake, DuckLakeWarehouse)
    write_run_to(lake, WEEKS[0], "chat", 60)  # committed: its files must stay
    kept = {p for p in data.rglob("*.parquet")}
    env = {**os.environ, CRASH_AT_ENV: "ducklake-inserted"}
    for scenario in SCENARIOS:  # SIGKILLed after DuckLake wrote the data file, before the commit
        killed = subprocess.run(
            [sys.executable, "-c", KILLED_WRITER, url, WEEKS[1].isoformat(), scenario, str(REPO / "tests")],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert killed.returncode == -9, killed.stderr
    orphans = {p for p in data.rglob("*.parquet")} - kept
    assert len(orphans) == 2
    done = subprocess.run(
        [sys.executable, "-m", "warehouse", "cleanup", "--warehouse", url, "--min-age-s", "0"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.splitlines()) == sorted(f"removed {p}" for p in orphans)
    assert {p for p in data.rglob("*.parquet")} == kept
    assert lake.read_partition("requests", WEEKS[0], "chat").num_rows == 60
    # A young file may be a live writer's, not yet committed: the default minimum age leaves it.
    again = subprocess.run(
        [sys.executable, "-m", "warehouse", "cleanup", "--warehouse", url], cwd=REPO, capture_output=True, text=True
    )
    assert again.returncode == 0 and again.stdout.strip() == "removed nothing", again.stderr
    lake.close()
