"""The Parquet lake: partition layout, atomic replacement, recovery, name validation."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import date, datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from warehouse.parquet import lake
from warehouse.parquet.crash_point import CRASH_AT_ENV
from warehouse.parquet.lake import LakeError, list_partitions, read_partition, recover_lake, write_partition
from warehouse.schema_migrations import SCHEMA_VERSION

REPO = Path(__file__).resolve().parents[2]

MONDAY = date(2025, 3, 3)
NEXT_MONDAY = date(2025, 3, 10)


def _table(values: list[int]) -> pa.Table:
    return pa.table({"request_id": [f"r{v}" for v in values], "value": pa.array(values, pa.int32())})


def _parquet_files(root: Path) -> list[Path]:
    return sorted(root.rglob("*.parquet"))


def _duckdb_values(lake_root: Path) -> list[int]:
    glob = str(lake_root / "requests" / "*" / "*" / "*.parquet")
    with duckdb.connect() as con:
        rows = con.execute(
            "SELECT value FROM read_parquet(?, hive_partitioning = true) ORDER BY value", [glob]
        ).fetchall()
    return [r[0] for r in rows]


def test_write_puts_the_partition_where_duckdb_reads_it_with_hive_keys(tmp_path):
    path = write_partition(tmp_path, "requests", MONDAY, "chat-v3-h200", _table([1, 2]))
    assert path == tmp_path / "requests" / "week=2025-03-03" / "scenario=chat-v3-h200" / "part-0.parquet"
    with duckdb.connect() as con:
        rows = con.execute(
            "SELECT week, scenario, value FROM read_parquet(?, hive_partitioning = true,"
            " hive_types = {'week': DATE, 'scenario': VARCHAR}) ORDER BY value",
            [str(tmp_path / "requests" / "*" / "*" / "*.parquet")],
        ).fetchall()
    assert rows == [(MONDAY, "chat-v3-h200", 1), (MONDAY, "chat-v3-h200", 2)]
    assert read_partition(tmp_path, "requests", MONDAY, "chat-v3-h200").equals(_table([1, 2]))


def test_rewriting_a_partition_leaves_one_copy_with_the_new_data(tmp_path):
    write_partition(tmp_path, "requests", MONDAY, "a", _table([1, 2, 3]))
    write_partition(tmp_path, "requests", MONDAY, "a", _table([7]))
    assert read_partition(tmp_path, "requests", MONDAY, "a").column("value").to_pylist() == [7]
    assert _duckdb_values(tmp_path) == [7]  # nothing staged where the lake glob can see it
    assert [p for p in _parquet_files(tmp_path) if lake.STAGING_DIR not in p.parts] == [
        tmp_path / "requests" / "week=2025-03-03" / "scenario=a" / "part-0.parquet"
    ]
    assert _parquet_files(tmp_path / lake.STAGING_DIR) == []  # no leftover temp or backup copies


def test_a_table_that_cannot_be_serialized_leaves_the_old_copy(tmp_path):
    write_partition(tmp_path, "requests", MONDAY, "a", _table([1, 2]))
    unwritable = pa.table({"value": pa.array([(1, 2, 3)], pa.month_day_nano_interval())})  # no Parquet type
    with pytest.raises(pa.ArrowNotImplementedError):
        write_partition(tmp_path, "requests", MONDAY, "a", unwritable)
    assert read_partition(tmp_path, "requests", MONDAY, "a").equals(_table([1, 2]))
    assert _duckdb_values(tmp_path) == [1, 2]
    assert _parquet_files(tmp_path / lake.STAGING_DIR) == []


def test_a_column_parquet_cannot_keep_as_written_is_refused_and_the_old_copy_stays(tmp_path):
    write_partition(tmp_path, "requests", MONDAY, "a", _table([1, 2]))
    seconds = pa.table({"sent_wall_s": pa.array([1], pa.timestamp("s"))})  # Parquet stores it in ms
    with pytest.raises(
        LakeError, match=r"reads back with another schema \(sent_wall_s: wrote timestamp\[s\], read timestamp\[ms\]\)"
    ):
        write_partition(tmp_path, "requests", MONDAY, "a", seconds)
    assert read_partition(tmp_path, "requests", MONDAY, "a").equals(_table([1, 2]))
    assert _parquet_files(tmp_path / lake.STAGING_DIR) == []


def test_a_written_file_carries_its_schema_version(tmp_path):
    path = write_partition(tmp_path, "requests", MONDAY, "a", _table([1, 2]))
    with duckdb.connect() as con:
        stamp = con.execute(
            "SELECT value FROM parquet_kv_metadata(?) WHERE key = 'costbench.schema_version'", [str(path)]
        ).fetchall()
    assert stamp == [(str(SCHEMA_VERSION).encode(),)]
    assert lake.file_schema_version(pq.read_schema(path)) == SCHEMA_VERSION


_KILLED_WRITER = """
import sys
from datetime import date
import pyarrow as pa
from warehouse.parquet.lake import write_partition
write_partition(sys.argv[1], "requests", date(2025, 3, 3), sys.argv[2], pa.table({"value": pa.array([9], pa.int32())}))
"""


def _killed_write(root: Path, scenario: str) -> None:
    env = dict(os.environ, **{CRASH_AT_ENV: "lake-staged"})
    done = subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(root), scenario], cwd=REPO, env=env)
    assert done.returncode == -signal.SIGKILL


def test_a_kill_just_before_the_swap_leaves_the_old_copy_visible_and_the_next_write_cleans_up(tmp_path):
    write_partition(tmp_path, "requests", MONDAY, "a", _table([1, 2]))
    _killed_write(tmp_path, "a")  # staged, read back and checked, then SIGKILL before os.replace
    assert read_partition(tmp_path, "requests", MONDAY, "a").equals(_table([1, 2]))
    assert _duckdb_values(tmp_path) == [1, 2]
    [leftover] = _parquet_files(tmp_path / lake.STAGING_DIR)
    assert leftover.name.startswith("requests.week=2025-03-03.scenario=a.")
    write_partition(tmp_path, "requests", MONDAY, "b", _table([5]))  # any write: the dead writer's file goes
    assert _parquet_files(tmp_path / lake.STAGING_DIR) == []
    assert _duckdb_values(tmp_path) == [1, 2, 5]


_LIVE_STAGER = """
import sys, time
from datetime import date
from pathlib import Path
from warehouse.parquet import lake
# A writer of partition a, alive, between writing its staged file and renaming it.
with lake.partition_lock(sys.argv[1], "requests", date(2025, 3, 3), "a"):
    staged = Path(sys.argv[1]) / lake.STAGING_DIR / "tmp" / "requests.week=2025-03-03.scenario=a.0123abcd.parquet"
    staged.parent.mkdir(parents=True, exist_ok=True)
    staged.write_bytes(b"being written")
    print("staged", flush=True)
    time.sleep(60)
"""


def test_a_live_writers_staged_file_is_never_cleaned_up_under_it(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", _LIVE_STAGER, str(tmp_path)], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "staged"
        write_partition(tmp_path, "requests", MONDAY, "b", _table([5]))
        assert [p.name for p in (tmp_path / lake.STAGING_DIR / "tmp").iterdir()] == [
            "requests.week=2025-03-03.scenario=a.0123abcd.parquet"
        ]
    finally:
        holder.kill()
        holder.wait()
    write_partition(tmp_path, "requests", MONDAY, "b", _table([6]))  # its writer is dead now
    assert list((tmp_path / lake.STAGING_DIR / "tmp").iterdir()) == []


def test_a_killed_write_of_the_two_rename_code_is_cleaned_up_too(tmp_path):
    old_tmp = tmp_path / lake.STAGING_DIR / "tmp" / ("ab" * 16)  # its staged folders were named by a uuid
    old_tmp.mkdir(parents=True)
    (old_tmp / "part-0.parquet").write_bytes(b"half")
    write_partition(tmp_path, "requests", MONDAY, "a", _table([1]))
    assert not old_tmp.exists()


def test_a_crash_between_the_renames_of_the_older_code_is_recovered(tmp_path):
    # Lakes written before single-file swaps: a kill between the two renames parked the previous copy.
    write_partition(tmp_path, "requests", MONDAY, "a", _table([1, 2]))
    final = lake.partition_path(tmp_path, "requests", MONDAY, "a")
    backup = lake._backup_path(tmp_path, "requests", MONDAY, "a")
    backup.parent.mkdir(parents=True, exist_ok=True)
    os.replace(final, backup)  # the state a kill -9 after the first rename leaves
    with pytest.raises(LakeError, match="interrupted write"):
        read_partition(tmp_path, "requests", MONDAY, "a")
    assert recover_lake(tmp_path) == [final]
    assert read_partition(tmp_path, "requests", MONDAY, "a").equals(_table([1, 2]))

    os.replace(final, backup)
    write_partition(tmp_path, "requests", MONDAY, "b", _table([5]))  # another partition: untouched
    assert not final.exists()
    write_partition(tmp_path, "requests", MONDAY, "a", _table([3]))  # the next write recovers, then replaces
    assert _duckdb_values(tmp_path) == [3, 5]
    assert not backup.exists()


def test_list_partitions_orders_by_week_then_scenario_and_skips_strays(tmp_path):
    write_partition(tmp_path, "requests", NEXT_MONDAY, "a", _table([1]))
    write_partition(tmp_path, "requests", MONDAY, "b", _table([2]))
    write_partition(tmp_path, "requests", MONDAY, "a", _table([3]))
    write_partition(tmp_path, "runs", MONDAY, "z", _table([4]))
    (tmp_path / "requests" / "week=2025-03-03" / "scenario=empty").mkdir()  # no part file
    (tmp_path / "requests" / "notes").mkdir()
    found = [(p.week_start, p.scenario) for p in list_partitions(tmp_path, "requests")]
    assert found == [(MONDAY, "a"), (MONDAY, "b"), (NEXT_MONDAY, "a")]
    assert list_partitions(tmp_path, "gpu_samples") == []


@pytest.mark.parametrize("scenario", ["", "../etc", "a/b", ".hidden", "week=1", "a b", "_schema"])
def test_scenario_names_that_are_not_safe_folder_names_are_refused(tmp_path, scenario):
    with pytest.raises(LakeError, match="scenario name"):
        write_partition(tmp_path, "requests", MONDAY, scenario, _table([1]))
    assert not any(tmp_path.rglob("*.parquet"))


@pytest.mark.parametrize("table", ["", "Requests", "../x", "_staging", "a-b"])
def test_table_names_that_are_not_safe_folder_names_are_refused(tmp_path, table):
    with pytest.raises(LakeError, match="table name"):
        write_partition(tmp_path, table, MONDAY, "a", _table([1]))


def test_week_must_be_a_monday_date(tmp_path):
    with pytest.raises(LakeError, match="Tuesday"):
        write_partition(tmp_path, "requests", date(2025, 3, 4), "a", _table([1]))
    with pytest.raises(LakeError, match="datetime.date"):
        write_partition(tmp_path, "requests", datetime(2025, 3, 3, 12), "a", _table([1]))


def test_partition_key_columns_must_agree_with_the_partition(tmp_path):
    # DuckDB would silently show the path's value instead of the file's.
    good = pa.table({"scenario": ["a"], "week_start": [MONDAY]})
    write_partition(tmp_path, "runs", MONDAY, "a", good)
    with pytest.raises(LakeError, match="'scenario' holds \\['b'\\]"):
        write_partition(tmp_path, "runs", MONDAY, "a", pa.table({"scenario": ["b"]}))
    with pytest.raises(LakeError, match="'week' column"):
        write_partition(tmp_path, "runs", MONDAY, "a", pa.table({"week": [1]}))
    assert read_partition(tmp_path, "runs", MONDAY, "a").equals(good)


_WRITER = """
import sys, time
from datetime import date
import pyarrow as pa
from warehouse.parquet.lake import write_partition
root = sys.argv[1]
rows = 200_000
v = 0
while True:
    v += 1
    write_partition(root, "requests", date(2025, 3, 3), "a", pa.table({"value": pa.array([v] * rows, pa.int32())}))
    print(v, flush=True)
"""


def test_killing_a_writer_mid_write_leaves_exactly_one_intact_copy(tmp_path):
    for delay_s in (0.05, 0.13, 0.21, 0.34):
        writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
        try:
            assert writer.stdout.readline().strip() == "1"  # a first copy is in place
            time.sleep(delay_s)
        finally:
            writer.send_signal(signal.SIGKILL)
            writer.wait()
        recover_lake(tmp_path)
        table = read_partition(tmp_path, "requests", MONDAY, "a")
        values = set(table.column("value").to_pylist())
        assert table.num_rows == 200_000 and len(values) == 1  # one whole version, never a mix or a torn file
        visible = [p for p in _parquet_files(tmp_path) if lake.STAGING_DIR not in p.parts]
        assert visible == [tmp_path / "requests" / "week=2025-03-03" / "scenario=a" / "part-0.parquet"]
        with duckdb.connect() as con:
            count = con.execute(
                "SELECT count(*) FROM read_parquet(?)", [str(tmp_path / "requests" / "*" / "*" / "*.parquet")]
            ).fetchone()[0]
        assert count == 200_000
    write_partition(tmp_path, "requests", MONDAY, "a", _table([1]))  # the lake is writable again
    assert _duckdb_values(tmp_path) == [1]


_LOCK_HOLDER = """
import sys, time
from datetime import date
from warehouse.parquet import lake
with lake.partition_lock(sys.argv[1], "requests", date(2025, 3, 3), "a"):
    print("locked", flush=True)
    time.sleep(60)
"""


def test_a_second_writer_gets_a_clear_error_and_changes_nothing(tmp_path):

    write_partition(tmp_path, "requests", MONDAY, "a", _table([1, 2]))
    holder = subprocess.Popen([sys.executable, "-c", _LOCK_HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(
            LakeError, match=r"requests\.week=2025-03-03\.scenario=a is being written by another process"
        ):
            write_partition(tmp_path, "requests", MONDAY, "a", _table([9]), lock_wait_s=0.2)
        write_partition(tmp_path, "requests", MONDAY, "b", _table([5]), lock_wait_s=0.2)  # other partitions are free
    finally:
        holder.kill()
        holder.wait()
    assert read_partition(tmp_path, "requests", MONDAY, "a").equals(_table([1, 2]))
    write_partition(tmp_path, "requests", MONDAY, "a", _table([9]), lock_wait_s=0.2)  # the lock died with its holder
    assert _duckdb_values(tmp_path) == [5, 9]
