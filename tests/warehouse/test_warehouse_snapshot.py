"""A session reads one lake: the files the last refresh checked and built its marts from, frozen (hard links
under lake/_snapshots/), so lake writes between refreshes never mix new request rows with old marts. Old
snapshots go once they have been superseded for `snapshot_keep_s`."""

from __future__ import annotations

import subprocess
import sys
from datetime import date
from pathlib import Path

from warehouse.backends.store import SNAPSHOTS_DIR, Warehouse
from warehouse.parquet.lake import partition_path
from warehouse_builders import endpoint, request, run_info, write_run

REPO = Path(__file__).resolve().parents[2]
WEEKS = [date(2025, 3, 3), date(2025, 3, 10), date(2025, 3, 17)]
SPEC = endpoint()
# Per week: the requests the view serves and the completed requests run_summary counted, side by side.
PER_WEEK = """
SELECT s.week_start, v.requests, s.completed_requests
FROM run_summary s LEFT JOIN (SELECT week_start, count(*) AS requests FROM requests GROUP BY ALL) v USING (week_start)
ORDER BY 1
"""
OTHER_SESSION = """
import sys, duckdb
con = duckdb.connect(sys.argv[1] + "/costbench.duckdb", read_only=True, config={"file_search_path": sys.argv[1]})
for week, requests, completed in con.execute(sys.argv[2]).fetchall():
    print(week, requests, completed)
"""


def _write_week(store: Warehouse, week: date, requests: int) -> None:
    run_id = f"run-{week.isoformat()}"
    records = [request(run_id, f"q{i}", 100, 1000) for i in range(requests)]
    write_run(store.lake_root, week, "chat", run_info(run_id, 90.0), SPEC, records)


def _new_session(store: Warehouse) -> list[tuple[str, int, int]]:
    """What a session opened now, in another process, reads."""
    done = subprocess.run(
        [sys.executable, "-c", OTHER_SESSION, str(store.root), PER_WEEK], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return [
        (week, int(requests), int(completed)) for week, requests, completed in map(str.split, done.stdout.splitlines())
    ]


def test_a_session_reads_the_lake_the_marts_were_built_from_until_the_next_refresh(tmp_path):
    store = Warehouse(tmp_path / "wh")
    _write_week(store, WEEKS[0], 3)
    _write_week(store, WEEKS[1], 3)
    store.refresh()
    built = [("2025-03-03", 3, 3), ("2025-03-10", 3, 3)]
    with store.connect() as con:
        # Between refreshes: a week re-materialized with other rows, and a new week.
        _write_week(store, WEEKS[0], 5)
        _write_week(store, WEEKS[2], 4)
        # The open session: its requests are still those its marts counted.
        assert [(str(w), r, c) for w, r, c in con.execute(PER_WEEK).fetchall()] == built
        assert con.execute("SELECT count(*) FROM requests").fetchone() == (6,)
    assert _new_session(store) == built  # a session opened before the refresh reads the same lake
    store.refresh()
    assert _new_session(store) == [("2025-03-03", 5, 5), ("2025-03-10", 3, 3), ("2025-03-17", 4, 4)]


def test_the_files_a_session_reads_are_listed_with_their_checksums(tmp_path):
    store = Warehouse(tmp_path / "wh")
    _write_week(store, WEEKS[0], 3)
    store.refresh()
    with store.connect() as con:
        rows = con.execute("SELECT table_name, path, frozen_path, sha256 FROM lake_files ORDER BY 1").fetchall()
        views = dict(con.execute("SELECT view_name, sql FROM duckdb_views() WHERE NOT internal").fetchall())
    assert [r[0] for r in rows] == ["requests", "runs"]
    for table, path, frozen, sha256 in rows:
        assert path == f"lake/{table}/week=2025-03-03/scenario=chat/part-0.parquet"
        assert frozen.startswith(f"lake/{SNAPSHOTS_DIR}/") and frozen.endswith(path.removeprefix("lake/"))
        assert (store.root / frozen).samefile(store.root / path)  # a hard link: no copy
        assert len(sha256) == 64
        assert frozen.split("/")[2] in views[table]


def test_a_superseded_snapshot_stays_a_day_then_goes(tmp_path):
    now = [1_800_000_000.0]
    store = Warehouse(tmp_path / "wh", clock_wall_s=lambda: now[0])
    _write_week(store, WEEKS[0], 3)
    snapshots = store.lake_root / SNAPSHOTS_DIR

    def frozen() -> set[str]:
        return {p.name for p in snapshots.iterdir() if p.is_dir()}

    store.refresh()
    first = frozen()
    (snapshots / "killed-refresh").mkdir()  # what a refresh killed before its swap leaves
    now[0] += 60
    store.refresh()  # the first is superseded now; a session opened before may still read it
    assert first < frozen() and "killed-refresh" not in frozen()
    second = frozen() - first
    now[0] += store.snapshot_keep_s - 1
    store.refresh()
    assert first <= frozen()
    now[0] += 2
    store.refresh()  # more than snapshot_keep_s since the first was superseded
    assert not first & frozen() and second <= frozen()  # the one superseded a moment ago stays
    assert partition_path(store.lake_root, "requests", WEEKS[0], "chat").is_dir()  # the lake itself untouched
    assert len(frozen()) == 3
