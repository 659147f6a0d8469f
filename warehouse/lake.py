"""The Parquet lake: `<lake_root>/<table>/week=YYYY-MM-DD/scenario=<name>/part-0.parquet`.

The lake is the warehouse's source of truth (docs/warehouse.md). Re-writing a (week, scenario)
partition replaces it: the new folder is written in a staging area, then swapped in with two renames.
A failure before the swap leaves the previous copy untouched; a crash between the two renames leaves
the previous copy parked in the staging area, and the next write of that partition (or `recover_lake`)
puts it back. One writer per partition at a time: a second writer waits `lock_wait_s` for the
partition's lock, then gets a LakeError naming the partition; it never writes over the first. There
are never two copies visible, because DuckDB's glob matches hidden names too, so staging lives in
`<lake_root>/_staging`, outside every table's folder.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

PART_FILE = "part-0.parquet"
STAGING_DIR = "_staging"  # table names start with a letter, so no table can be called this
PARTITION_KEYS = ("week", "scenario")
DEFAULT_LOCK_WAIT_S = 30.0
_LOCK_POLL_S = 0.05

_TABLE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
# Becomes a folder name and a hive partition value: no '/', '=', leading dot, or spaces.
_SCENARIO_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class LakeError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class LakePartition:
    table: str
    week_start: date
    scenario: str
    path: Path  # the partition folder


def validate_table_name(table: str) -> str:
    if not isinstance(table, str) or not _TABLE_NAME.match(table):
        raise LakeError(f"lake table name {table!r} must match {_TABLE_NAME.pattern} (it becomes a folder name)")
    return table


def validate_scenario_name(scenario: str) -> str:
    if not isinstance(scenario, str) or not _SCENARIO_NAME.match(scenario):
        raise LakeError(f"scenario name {scenario!r} must match {_SCENARIO_NAME.pattern} (it becomes a folder name)")
    return scenario


def validate_week_start(week_start: date) -> date:
    # datetime is a date subclass; a time of day in a partition key is a bug upstream.
    if not isinstance(week_start, date) or isinstance(week_start, datetime):
        raise LakeError(f"week_start must be a datetime.date, got {type(week_start).__name__} {week_start!r}")
    if week_start.weekday() != 0:
        raise LakeError(f"week_start {week_start.isoformat()} is a {week_start:%A}; partitions start on Monday")
    return week_start


def partition_path(lake_root: Path, table: str, week_start: date, scenario: str) -> Path:
    validate_table_name(table)
    validate_week_start(week_start)
    validate_scenario_name(scenario)
    return Path(lake_root) / table / f"week={week_start.isoformat()}" / f"scenario={scenario}"


def write_partition(
    lake_root: Path,
    table: str,
    week_start: date,
    scenario: str,
    data: pa.Table,
    lock_wait_s: float = DEFAULT_LOCK_WAIT_S,
) -> Path:
    """Write `data` as the whole (week, scenario) partition of `table`, replacing any previous copy.

    Returns the path of the Parquet file. Raises LakeError for bad names or data whose own
    partition-key columns disagree with the partition (they would be silently shadowed on read).
    """
    final = partition_path(lake_root, table, week_start, scenario)
    if not isinstance(data, pa.Table):
        raise LakeError(
            f"{table} {final.parent.name}/{final.name}: expected a pyarrow.Table, got {type(data).__name__}"
        )
    _check_partition_columns(data, table, week_start, scenario)
    staging = Path(lake_root) / STAGING_DIR
    backup = _backup_path(lake_root, table, week_start, scenario)
    with _partition_lock(lake_root, table, week_start, scenario, wait_s=lock_wait_s):
        _recover_partition(final, backup)
        tmp = staging / "tmp" / uuid.uuid4().hex
        tmp.mkdir(parents=True)
        try:
            _write_durably(data, tmp / PART_FILE)
            final.parent.mkdir(parents=True, exist_ok=True)
            backup.parent.mkdir(parents=True, exist_ok=True)
            had_previous = final.exists()
            if had_previous:
                os.replace(final, backup)
            try:
                os.replace(tmp, final)
            except BaseException:
                if had_previous:
                    os.replace(backup, final)
                raise
            _fsync_dir(final.parent)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(backup, ignore_errors=True)
    return final / PART_FILE


def read_partition(lake_root: Path, table: str, week_start: date, scenario: str) -> pa.Table:
    """The rows of one partition (without the partition keys, which live in the path)."""
    final = partition_path(lake_root, table, week_start, scenario)
    with _partition_lock(lake_root, table, week_start, scenario, shared=True):
        if not (final / PART_FILE).is_file():
            hint = ""
            if _backup_path(lake_root, table, week_start, scenario).exists():
                hint = " (an interrupted write parked the previous copy; the next write or recover_lake() restores it)"
            raise LakeError(f"lake partition not found: {final / PART_FILE}{hint}")
        return pq.read_table(final / PART_FILE)


def list_partitions(lake_root: Path, table: str) -> list[LakePartition]:
    """The table's partitions, ordered by week then scenario. Folders that are not partitions are ignored."""
    table_dir = Path(lake_root) / validate_table_name(table)
    found: list[LakePartition] = []
    for week_dir in _children(table_dir, "week="):
        try:
            week_start = validate_week_start(date.fromisoformat(week_dir.name.removeprefix("week=")))
        except (ValueError, LakeError):
            continue
        for scenario_dir in _children(week_dir, "scenario="):
            scenario = scenario_dir.name.removeprefix("scenario=")
            if _SCENARIO_NAME.match(scenario) and (scenario_dir / PART_FILE).is_file():
                found.append(LakePartition(table, week_start, scenario, scenario_dir))
    return sorted(found, key=lambda p: (p.week_start, p.scenario))


def recover_lake(lake_root: Path) -> list[Path]:
    """Put back every previous copy an interrupted write parked, and drop stale ones. Returns restored paths."""
    restored: list[Path] = []
    backups = Path(lake_root) / STAGING_DIR / "backup"
    for table_dir in _children(backups, ""):
        for p in list_partitions(backups, table_dir.name):
            final = partition_path(lake_root, p.table, p.week_start, p.scenario)
            with _partition_lock(lake_root, p.table, p.week_start, p.scenario):
                if _recover_partition(final, p.path):
                    restored.append(final)
    return restored


def _check_partition_columns(data: pa.Table, table: str, week_start: date, scenario: str) -> None:
    where = f"{table} week={week_start.isoformat()} scenario={scenario}"
    if "week" in data.column_names:
        raise LakeError(f"{where}: the data has a 'week' column, which the partition key would shadow on read")
    expected = {"scenario": scenario, "week_start": week_start}
    for column, value in expected.items():
        if column in data.column_names:
            wrong = {v for v in data.column(column).to_pylist() if v != value}
            if wrong:
                raise LakeError(f"{where}: column {column!r} holds {sorted(map(str, wrong))}, not {value}")


def _backup_path(lake_root: Path, table: str, week_start: date, scenario: str) -> Path:
    return partition_path(Path(lake_root) / STAGING_DIR / "backup", table, week_start, scenario)


def _recover_partition(final: Path, backup: Path) -> bool:
    """Caller holds the partition lock. True when the parked previous copy was put back."""
    if not backup.exists():
        return False
    if final.exists():  # the crash came after the swap: the parked copy is stale
        shutil.rmtree(backup)
        return False
    final.parent.mkdir(parents=True, exist_ok=True)
    os.replace(backup, final)
    return True


@contextmanager
def _partition_lock(
    lake_root: Path,
    table: str,
    week_start: date,
    scenario: str,
    shared: bool = False,
    wait_s: float = DEFAULT_LOCK_WAIT_S,
) -> Iterator[None]:
    # flock is released by the OS when the process dies, so a crash never leaves a partition locked.
    locks = Path(lake_root) / STAGING_DIR / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    name = f"{table}.week={week_start.isoformat()}.scenario={scenario}"
    with open(locks / f"{name}.lock", "a") as handle:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(handle, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LakeError(
                        f"lake partition {name} is being written by another process (lock held for more than "
                        f"{wait_s:g} s: {locks / (name + '.lock')}); nothing was changed, retry when it finishes"
                    ) from None
                time.sleep(_LOCK_POLL_S)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _write_durably(data: pa.Table, path: Path) -> None:
    with open(path, "wb") as handle:
        pq.write_table(data, handle)
        handle.flush()
        os.fsync(handle.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _children(folder: Path, prefix: str) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_dir() and p.name.startswith(prefix))
