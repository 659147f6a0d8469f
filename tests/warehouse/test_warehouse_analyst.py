"""An analyst never blocks the weekly refresh, and the refresh never breaks the analyst.

Real analyst sessions in other processes (python with duckdb.connect(read_only=True)) stay open across
full refreshes, idle or querying; refreshes run in other processes too, killed at chosen points. A plain session
reads the views from any working directory, and a copied warehouse reads its own lake (through connect() at once,
plainly after its next refresh)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from datetime import date, timedelta
from pathlib import Path

import duckdb
import pytest

from warehouse.backends.store import BUILD_PREFIX, REFRESH_LOCK, Warehouse, WarehouseError
from warehouse.parquet.crash_point import CRASH_AT_ENV
from warehouse_builders import endpoint, request, run_info, write_run

REPO = Path(__file__).resolve().parents[2]
W0 = date(2025, 3, 3)
SPEC = endpoint()
LOCK_WAIT_S = 30.0  # a refresh that waited for the analyst's lock would fail after this; none should wait

# The analyst: one read-only connection held open; answers on each line of stdin ("idle" mode) or in a
# loop until the stop file appears ("loop" mode), querying a mart and a lake view.
ANALYST = """
import sys, time, duckdb
from pathlib import Path
db, root, mode, stop = sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])
con = duckdb.connect(db, read_only=True, config={"file_search_path": root})
def answer():
    runs = con.execute("SELECT count(*) FROM run_summary").fetchone()[0]
    requests = con.execute("SELECT count(*) FROM requests").fetchone()[0]
    return f"{runs} {requests}"
print("ready", answer(), flush=True)
if mode == "idle":
    for line in sys.stdin:
        print("answer", answer(), flush=True)
else:
    answers = 0
    while not stop.exists():
        answer()
        answers += 1
    print("answers", answers, flush=True)
"""

# A dashboard: a new connection for every query, so it always reads the current file. Prints each new
# count as it first sees it.
RECONNECTING = """
import sys, duckdb
from pathlib import Path
db, root, stop = sys.argv[1], sys.argv[2], Path(sys.argv[3])
seen = []
while not stop.exists():
    with duckdb.connect(db, read_only=True, config={"file_search_path": root}) as con:
        seen.append(con.execute("SELECT count(*) FROM run_summary").fetchone()[0])
    if len(seen) == 1 or seen[-1] != seen[-2]:
        print("seen", seen[-1], flush=True)
print("monotonic", seen == sorted(seen), flush=True)
"""

REFRESH = """
import sys
from warehouse.backends.store import Warehouse
Warehouse(sys.argv[1]).refresh()
print("refreshed", flush=True)
"""


def _week(store: Warehouse, i: int) -> None:
    week = W0 + timedelta(days=7 * i)
    run_id = f"run-{i}"
    write_run(store.lake_root, week, "chat", run_info(run_id, 90.0), SPEC, [request(run_id, "q1", 100, 1000)])


def _python(code: str, *args: str, env: dict | None = None, **popen) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args], cwd=REPO, env=env, stdout=subprocess.PIPE, text=True, **popen
    )


def _runs(store: Warehouse) -> int:
    with store.connect() as con:
        return con.execute("SELECT count(*) FROM run_summary").fetchone()[0]


@pytest.fixture
def store(tmp_path) -> Warehouse:
    store = Warehouse(tmp_path / "wh", lock_wait_s=LOCK_WAIT_S)
    _week(store, 0)
    store.refresh()
    return store


def test_an_idle_analyst_session_does_not_block_a_refresh_and_keeps_answering(store, tmp_path):
    analyst = _python(
        ANALYST, str(store.db_path), str(store.root), "idle", str(tmp_path / "stop"), stdin=subprocess.PIPE
    )
    try:
        assert analyst.stdout.readline().split() == ["ready", "1", "1"]
        _week(store, 1)
        started = time.monotonic()
        store.refresh()  # the analyst holds its connection, idle, all along
        assert time.monotonic() - started < LOCK_WAIT_S  # it never waited on the analyst's lock
        assert _runs(store) == 2  # a connection opened afterwards reads the new database
        analyst.stdin.write("\n")
        analyst.stdin.flush()
        # The open session still reads the database it opened: its marts, and the lake they were built from.
        assert analyst.stdout.readline().split() == ["answer", "1", "1"]
    finally:
        analyst.stdin.close()
        assert analyst.wait(timeout=60) == 0


def test_analysts_querying_in_a_loop_keep_getting_answers_across_refreshes(store, tmp_path):
    stop = tmp_path / "stop"
    analyst = _python(ANALYST, str(store.db_path), str(store.root), "loop", str(stop))
    dashboard = _python(RECONNECTING, str(store.db_path), str(store.root), str(stop))
    try:
        assert analyst.stdout.readline().split() == ["ready", "1", "1"]
        assert dashboard.stdout.readline().split() == ["seen", "1"]
        for i in (1, 2, 3):
            _week(store, i)
            store.refresh()
        line: list[str] = []
        while line != ["seen", "4"]:  # until its new connections read the last refresh
            line = dashboard.stdout.readline().split()
            assert line and line[0] == "seen", line
    finally:
        stop.touch()
    assert analyst.wait(timeout=60) == 0 and dashboard.wait(timeout=60) == 0  # no query ever failed
    answers = analyst.stdout.readline().split()
    assert answers[0] == "answers" and int(answers[1]) > 0
    assert dashboard.stdout.readline().split() == ["monotonic", "True"]
    assert _runs(store) == 4


@pytest.mark.parametrize("point", ["refresh-building", "refresh-built"])
def test_a_refresh_killed_mid_build_leaves_the_previous_database_and_its_leftovers_go_next_time(store, point):
    _week(store, 1)
    env = dict(os.environ, **{CRASH_AT_ENV: point})
    killed = _python(REFRESH, str(store.root), env=env)
    assert killed.wait(timeout=120) == -9
    assert list(store.root.glob(f"{BUILD_PREFIX}*"))  # the half-built (or built, not swapped) file
    assert _runs(store) == 1  # readers still get the previous database, whole
    store.refresh()
    assert list(store.root.glob(f"{BUILD_PREFIX}*")) == []
    assert _runs(store) == 2


def test_concurrent_refreshes_take_turns(store):
    _week(store, 1)
    refreshes = [_python(REFRESH, str(store.root)) for _ in range(3)]
    assert [p.wait(timeout=300) for p in refreshes] == [0, 0, 0]
    assert [p.stdout.read().strip() for p in refreshes] == ["refreshed"] * 3
    assert _runs(store) == 2
    assert list(store.root.glob(f"{BUILD_PREFIX}*")) == []


HOLD_REFRESH_LOCK = """
import fcntl, sys, time
with open(sys.argv[1], "a") as handle:
    fcntl.flock(handle, fcntl.LOCK_EX)
    print("locked", flush=True)
    time.sleep(120)
"""


def test_a_refresh_waits_for_the_one_running_then_says_so(store):
    holder = _python(HOLD_REFRESH_LOCK, str(store.root / REFRESH_LOCK))
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(WarehouseError, match="another refresh of .* has held .*; nothing was changed"):
            Warehouse(store.root, lock_wait_s=0.3).refresh()
    finally:
        holder.kill()
        holder.wait()
    _week(store, 1)
    store.refresh()  # the lock died with its holder
    assert _runs(store) == 2


def test_lake_files_name_paths_inside_the_warehouse_folder(store):
    with store.connect() as con:
        paths = con.execute("SELECT path, frozen_path FROM lake_files").fetchall()
    assert paths and all(not p.startswith("/") and (store.root / p).is_file() for row in paths for p in row)


def test_a_copied_warehouse_reads_its_own_lake(store, tmp_path):
    _week(store, 1)
    store.refresh()
    copy = tmp_path / "elsewhere" / "wh"
    shutil.copytree(store.root, copy)
    shutil.rmtree(store.root)  # the original is gone
    copied = Warehouse(copy)
    with copied.connect() as con:  # connect() names its folder: the views read the copy's lake
        assert con.execute("SELECT count(*) FROM requests").fetchone() == (2,)
    # A plain session reads the folder the last refresh ran in, gone here: DuckDB names it.
    with duckdb.connect(str(copied.db_path), read_only=True) as con:
        with pytest.raises(
            duckdb.IOException, match=re.escape(f'No files found that match the pattern "{store.root}/lake/')
        ):
            con.execute("SELECT count(*) FROM requests")
    _week(copied, 2)  # and it refreshes in place, after which a plain session reads the copy's lake too
    copied.refresh()
    assert _runs(copied) == 3
    assert _plain_session(copied.db_path, cwd=tmp_path) == "3 3"


# What an analyst types: DuckDB's own Python API on the file, read-only, nothing else set.
PLAIN = """
import sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
print(*con.execute("SELECT (SELECT count(*) FROM requests), (SELECT count(*) FROM run_summary)").fetchone())
"""


def _plain_session(db: Path | str, cwd: Path) -> str:
    done = subprocess.run([sys.executable, "-c", PLAIN, str(db)], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_plain_duckdb_session_reads_the_views_from_any_working_directory(store, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert _plain_session(store.db_path, cwd=elsewhere) == "1 1"
    assert _plain_session("costbench.duckdb", cwd=store.root) == "1 1"
    # From the folder above, as `duckdb -readonly warehouse/costbench.duckdb` from the repository.
    assert _plain_session(Path(store.root.name) / "costbench.duckdb", cwd=store.root.parent) == "1 1"
    # From another warehouse's folder, whose lake differs: the views still read their own.
    other = Warehouse(tmp_path / "other")
    for i in range(3):
        _week(other, i)
    other.refresh()
    assert _plain_session(store.db_path, cwd=other.root) == "1 1"
