"""The Parquet lake: `<lake_root>/<table>/week=YYYY-MM-DD/scenario=<name>/part-0.parquet`.

The lake is the warehouse's source of truth (docs/warehouse.md). Re-writing a (week, scenario)
partition replaces its one file: the new file is written in a staging area, read back whole (every
page, its checksum verified) and compared with what was written, then renamed over the old one with a
single `os.replace`, which is atomic. So a reader, or a kill at any point, sees the old file or the new
one, never none and never half of one. Lakes written before that (the folder was swapped in with two
renames) may hold a previous copy parked in the staging area by a kill between the renames: the next
write of that partition, or `recover_lake`, puts it back.

One writer per partition at a time: a second writer waits `lock_wait_s` for the partition's flock,
then gets a LakeError naming the partition; it never writes over the first. A staged file is named
after its partition, and its writer holds that partition's lock until it is renamed away, so a staged
file whose partition lock is free was left by a killed writer: every write removes those. Staging
lives in `<lake_root>/_staging`, outside every table's folder, because DuckDB's glob matches hidden
names too. Every file is stamped with the schema version that wrote it (Parquet key-value metadata
`costbench.schema_version`, warehouse/schema_migrations.py), and its sha256, taken after the
read-back, is recorded beside it (`part-0.parquet.sha256`, warehouse/parquet/lake_checksum.py) and, with its rows
and size, in the lake's manifest of what was written (`_manifest.jsonl`, warehouse/parquet/lake_manifest.py), so a
refresh notices a partition that was written and is gone.
"""

from __future__ import annotations

import errno
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
from typing import TextIO

import pyarrow as pa
import pyarrow.parquet as pq

from warehouse.parquet.crash_point import crash_point
from warehouse.parquet.file_lock import flock_within
from warehouse.parquet.lake_checksum import read_checksums, sha256_of, write_checksums
from warehouse.parquet.lake_manifest import FORGOTTEN, WRITTEN, ManifestEntry, latest_entries, record
from warehouse.schema_migrations import SCHEMA_VERSION

PART_FILE = "part-0.parquet"
STAGING_DIR = "_staging"  # table names start with a letter, so no table can be called this
QUARANTINE_DIR = "_quarantine"  # warehouse/parquet/lake_quarantine.py
PARTITION_KEYS = ("week", "scenario")
SCHEMA_VERSION_KEY = b"costbench.schema_version"
DEFAULT_LOCK_WAIT_S = 30.0

_TABLE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
# Becomes a folder name and a hive partition value: no '/', '=', leading dot, or spaces.
_SCENARIO_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_OLD_TMP_DIR = re.compile(r"^[0-9a-f]{32}$")  # a staged folder of the two-rename writes


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


def parse_partition(table_dir_name: str, week_dir_name: str, scenario_dir_name: str) -> tuple[date, str] | None:
    """(week_start, scenario) of a partition folder's names, or None when they are not a partition's."""
    if not (week_dir_name.startswith("week=") and scenario_dir_name.startswith("scenario=")):
        return None
    scenario = scenario_dir_name.removeprefix("scenario=")
    if not (_TABLE_NAME.match(table_dir_name) and _SCENARIO_NAME.match(scenario)):
        return None
    try:
        return validate_week_start(date.fromisoformat(week_dir_name.removeprefix("week="))), scenario
    except (ValueError, LakeError):
        return None


def partition_name(table: str, week_start: date, scenario: str) -> str:
    """How messages, lock files and staged files name a partition."""
    return f"{table}.week={week_start.isoformat()}.scenario={scenario}"


def file_schema_version(schema: pa.Schema) -> int | None:
    """The schema version stamped in a lake file's metadata; None for files written before stamping."""
    raw = (schema.metadata or {}).get(SCHEMA_VERSION_KEY)
    try:
        return None if raw is None else int(raw)
    except ValueError:
        return None


def same_type(a: pa.DataType, b: pa.DataType) -> bool:
    """Equal types, but a list's item name does not count: Parquet stores it as 'element', Arrow calls it 'item'."""
    if pa.types.is_list(a) and pa.types.is_list(b):
        return same_type(a.value_type, b.value_type)
    return a == b


def write_partition(
    lake_root: Path,
    table: str,
    week_start: date,
    scenario: str,
    data: pa.Table,
    lock_wait_s: float = DEFAULT_LOCK_WAIT_S,
) -> Path:
    """Write `data` as the whole (week, scenario) partition of `table`, replacing any previous copy.

    Returns the path of the Parquet file. Raises LakeError for bad names, data whose own
    partition-key columns disagree with the partition (they would be silently shadowed on read), or a
    staged file that does not read back as written (the previous copy is then untouched).
    """
    final = partition_path(lake_root, table, week_start, scenario)
    name = partition_name(table, week_start, scenario)
    if not isinstance(data, pa.Table):
        raise LakeError(f"{name}: expected a pyarrow.Table, got {type(data).__name__}")
    check_partition_columns(data, table, week_start, scenario)
    metadata = {**(data.schema.metadata or {}), SCHEMA_VERSION_KEY: str(SCHEMA_VERSION).encode()}
    stamped = data.replace_schema_metadata(metadata)
    with partition_lock(lake_root, table, week_start, scenario, wait_s=lock_wait_s):
        _recover_partition(final, _backup_path(lake_root, table, week_start, scenario))
        clean_staging(lake_root, held=name)
        staged = Path(lake_root) / STAGING_DIR / "tmp" / f"{name}.{uuid.uuid4().hex}.parquet"
        staged.parent.mkdir(parents=True, exist_ok=True)
        try:
            try:
                _write_durably(stamped, staged)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                # pyarrow's own message names neither the file nor the partition.
                full = (
                    f"No space left on device: the disk under {lake_root} is full; lake partition {name} was not "
                    "written, any previous copy is untouched"
                )
                raise OSError(errno.ENOSPC, full, str(final / PART_FILE)) from exc
            _check_staged(staged, stamped, name)
            checksum = sha256_of(staged)  # of the bytes just read back whole
            crash_point("lake-staged")
            final.mkdir(parents=True, exist_ok=True)
            write_checksums(final / PART_FILE, (checksum, *read_checksums(final / PART_FILE)))
            # What was written, before it is swapped in (as the sidecar): a refresh misses it if it goes.
            written = ManifestEntry(table, week_start, scenario, WRITTEN, time.time(), stamped.num_rows,
                                    staged.stat().st_size, checksum)  # fmt: skip
            record(lake_root, (written,))
            os.replace(staged, final / PART_FILE)
            try:
                write_checksums(final / PART_FILE, (checksum,))
            except OSError:
                pass  # the sidecar still lists the new checksum (beside the old one): the file passes as written
            fsync_path(final)
        finally:
            staged.unlink(missing_ok=True)
    return final / PART_FILE


def read_partition(lake_root: Path, table: str, week_start: date, scenario: str) -> pa.Table:
    """The rows of one partition (without the partition keys, which live in the path)."""
    final = partition_path(lake_root, table, week_start, scenario)
    with partition_lock(lake_root, table, week_start, scenario, shared=True):
        if not (final / PART_FILE).is_file():
            hint = ""
            if _backup_path(lake_root, table, week_start, scenario).exists():
                hint = " (an interrupted write parked the previous copy; the next write or recover_lake() restores it)"
            quarantined = Path(lake_root) / QUARANTINE_DIR / final.relative_to(lake_root)
            if quarantined.is_dir():
                hint = f" (a refresh quarantined it as unreadable: {quarantined}; write the partition again)"
            raise LakeError(f"lake partition not found: {final / PART_FILE}{hint}")
        return pq.read_table(final / PART_FILE)


def forget_partition(lake_root: Path, table: str, week_start: date, scenario: str) -> str:
    """Record in the manifest that a partition written and gone was removed on purpose, so refreshes stop naming it
    missing (writing it again brings it back). Returns what was forgotten, in words; a LakeError when its file is
    still there, or the manifest never had it."""
    final = partition_path(lake_root, table, week_start, scenario)
    name = partition_name(table, week_start, scenario)
    with partition_lock(lake_root, table, week_start, scenario):
        if (final / PART_FILE).exists():
            raise LakeError(f"{name}: its file is still there ({final / PART_FILE}): nothing to forget")
        entry = latest_entries(lake_root).get((table, week_start, scenario))
        if entry is None or not entry.live:
            raise LakeError(f"{name}: the lake's manifest has no live record of it: nothing to forget")
        record(lake_root, (ManifestEntry(table, week_start, scenario, FORGOTTEN, time.time()),))
    return f"forgot {name} ({entry.described()})"


def list_partitions(lake_root: Path, table: str) -> list[LakePartition]:
    """The table's partitions, ordered by week then scenario. Folders that are not partitions are ignored."""
    table_dir = Path(lake_root) / validate_table_name(table)
    found: list[LakePartition] = []
    for week_dir in _children(table_dir, "week="):
        for scenario_dir in _children(week_dir, "scenario="):
            parsed = parse_partition(table, week_dir.name, scenario_dir.name)
            if parsed and (scenario_dir / PART_FILE).is_file():
                found.append(LakePartition(table, parsed[0], parsed[1], scenario_dir))
    return sorted(found, key=lambda p: (p.week_start, p.scenario))


def recover_lake(lake_root: Path) -> list[Path]:
    """Put back every previous copy an interrupted two-rename write parked, and drop stale ones.

    Returns the restored partition folders. Only lakes written before single-file swaps can need it.
    """
    restored: list[Path] = []
    backups = Path(lake_root) / STAGING_DIR / "backup"
    for table_dir in _children(backups, ""):
        for p in list_partitions(backups, table_dir.name):
            final = partition_path(lake_root, p.table, p.week_start, p.scenario)
            with partition_lock(lake_root, p.table, p.week_start, p.scenario):
                if _recover_partition(final, p.path):
                    restored.append(final)
    return restored


def clean_staging(lake_root: Path, held: str | None = None) -> list[Path]:
    """Remove the staged files of killed writers: those whose partition lock is free (or is `held`, by the
    caller). A live writer holds its partition's lock while its staged file exists, so it is never touched.
    Returns what was removed."""
    removed: list[Path] = []
    tmp = Path(lake_root) / STAGING_DIR / "tmp"
    if not tmp.is_dir():
        return removed
    for entry in sorted(tmp.iterdir()):
        if entry.is_dir() and _OLD_TMP_DIR.match(entry.name):
            shutil.rmtree(entry, ignore_errors=True)  # a killed write of the two-rename code
            removed.append(entry)
            continue
        parts = entry.name.rsplit(".", 2)  # <partition name>.<uuid>.parquet
        if len(parts) != 3 or parts[2] != "parquet":
            continue
        owner = parts[0]
        if owner == held:
            entry.unlink(missing_ok=True)
            removed.append(entry)
            continue
        with _lock_if_free(lake_root, owner) as free:
            if free:
                entry.unlink(missing_ok=True)  # gone already when its writer just finished
                removed.append(entry)
    return removed


@contextmanager
def partition_lock(
    lake_root: Path,
    table: str,
    week_start: date,
    scenario: str,
    shared: bool = False,
    wait_s: float = DEFAULT_LOCK_WAIT_S,
) -> Iterator[None]:
    """The partition's flock: exclusive for writers (and the refresh's quarantine), shared for readers."""
    with _named_lock(lake_root, partition_name(table, week_start, scenario), shared, wait_s):
        yield


def check_partition_columns(data: pa.Table, table: str, week_start: date, scenario: str) -> None:
    where = f"{table} week={week_start.isoformat()} scenario={scenario}"
    if "week" in data.column_names:
        raise LakeError(f"{where}: the data has a 'week' column, which the partition key would shadow on read")
    expected = {"scenario": scenario, "week_start": week_start}
    for column, value in expected.items():
        if column in data.column_names:
            wrong = {v for v in data.column(column).to_pylist() if v != value}
            if wrong:
                raise LakeError(f"{where}: column {column!r} holds {sorted(map(str, wrong))}, not {value}")


def _check_staged(staged: Path, written: pa.Table, name: str) -> None:
    """Read the staged file back whole, page checksums verified, one row group at a time (bounded memory)."""
    try:
        with pq.ParquetFile(staged, page_checksum_verification=True) as parquet:
            rows = sum(batch.num_rows for batch in parquet.iter_batches())
            schema = parquet.schema_arrow
    except (OSError, pa.ArrowException) as exc:
        raise LakeError(f"{name}: the staged file does not read back ({exc}); the previous copy is untouched") from exc
    differ = [
        f"{f.name}: wrote {f.type}, read {schema.field(f.name).type if f.name in schema.names else 'nothing'}"
        for f in written.schema
        if f.name not in schema.names or not same_type(schema.field(f.name).type, f.type)
    ]
    if differ or schema.names != written.schema.names or schema.metadata != written.schema.metadata:
        what = "; ".join(differ) or "names or metadata differ"
        raise LakeError(f"{name}: the staged file reads back with another schema ({what}); the old copy is untouched")
    if rows != written.num_rows:
        raise LakeError(
            f"{name}: the staged file reads back {rows} rows, {written.num_rows} were written; "
            "the previous copy is untouched"
        )


def _backup_path(lake_root: Path, table: str, week_start: date, scenario: str) -> Path:
    return partition_path(Path(lake_root) / STAGING_DIR / "backup", table, week_start, scenario)


def _recover_partition(final: Path, backup: Path) -> bool:
    """Caller holds the partition lock. True when the parked previous copy was put back."""
    if not backup.exists():
        return False
    if (final / PART_FILE).exists():  # the crash came after the swap: the parked copy is stale
        shutil.rmtree(backup)
        return False
    final.parent.mkdir(parents=True, exist_ok=True)
    if final.exists():
        final.rmdir()  # an empty folder (nothing else is ever written there)
    os.replace(backup, final)
    return True


@contextmanager
def _lock_file(lake_root: Path, name: str) -> Iterator[tuple[Path, TextIO]]:
    # flock is released by the OS when the process dies, so a crash never leaves a partition locked.
    locks = Path(lake_root) / STAGING_DIR / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    path = locks / f"{name}.lock"
    with open(path, "a") as handle:
        yield path, handle


@contextmanager
def _named_lock(lake_root: Path, name: str, shared: bool, wait_s: float) -> Iterator[None]:
    with _lock_file(lake_root, name) as (path, handle):
        busy = lambda: LakeError(  # noqa: E731
            f"lake partition {name} is being written by another process (lock held for more than "
            f"{wait_s:g} s: {path}); nothing was changed, retry when it finishes"
        )
        with flock_within(handle, shared, wait_s, busy):
            yield


@contextmanager
def _lock_if_free(lake_root: Path, name: str) -> Iterator[bool]:
    """The partition's exclusive lock when nobody holds it, without waiting: yields whether it was free."""
    with _lock_file(lake_root, name) as (_path, handle):
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _write_durably(data: pa.Table, path: Path) -> None:
    with open(path, "wb") as handle:
        # Page checksums let a refresh tell a flipped bit from data (DuckDB does not check them).
        pq.write_table(data, handle, write_page_checksum=True)
        handle.flush()
        os.fsync(handle.fileno())


def fsync_path(path: Path) -> None:
    """fsync a file or a folder by path (a folder: so a rename in it is on disk)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _children(folder: Path, prefix: str) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_dir() and p.name.startswith(prefix))
