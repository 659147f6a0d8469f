"""The DuckDB side of the warehouse: views over the lake, marts rebuilt from them, one connection per unit of work.

Layout under `root`: `lake/` (the Parquet lake, warehouse/parquet/lake.py) and `costbench.duckdb`. All SQL lives in
warehouse/schema.sql (the views), the dbt project warehouse/dbt/ (the marts, warehouse/marts/dbt_build.py) and
warehouse/sql/*.sql (the analysts' examples and the readers' queries). Schema versions and upgrades:
warehouse/schema_migrations.py.

Readers and the refresh never contend for DuckDB's file lock. A refresh builds a whole new database in a
hidden file beside costbench.duckdb, checkpoints and closes it (no WAL left), and renames it over
costbench.duckdb: a session already open keeps reading the old file (its inode lives until the session
closes it), a connection opened afterwards reads the new one. Refreshes are serialized by an flock on
`.refresh.lock` in the warehouse folder, which the OS releases if the refresher dies; the next refresh
removes what a killed one left. Before building, every lake file is frozen into a snapshot (hard links,
warehouse/parquet/lake_snapshot.py) and checked (warehouse/parquet/lake_audit.py), and the unfit ones are
quarantined, so one bad file costs its own week, not the warehouse; a partition the lake's manifest says was written
and is gone is named in lake_missing (warehouse/parquet/lake_manifest.py). The views read only the snapshot, so a
session reads the lake its marts were built from, whatever is written meanwhile. They read it under the folder the
session names in the DuckDB variable costbench_root (connect() and `attach-sql` set it), else under the folder the
refresh ran in, written absolute: so a plain `duckdb -readonly <folder>/costbench.duckdb` reads the lake from any
working directory, a copied warehouse opened through connect() reads its own lake, and a moved one opened plainly
reads its new folder from its next refresh.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from warehouse import schema_migrations
from warehouse.errors import WarehouseError
from warehouse.marts.dbt_build import DB_FILE, DataTest, DbtBuild, MartBuildError, build_marts, connect_build
from warehouse.marts.mart_readers import MartReaders
from warehouse.marts.price_table import PriceTable, load_price_table
from warehouse.marts.week_scope import (
    BuildRecord,
    LakeFile,
    WeekScope,
    changed_weeks,
    choose,
    inputs_sha256,
    read_record,
    write_record,
)
from warehouse.parquet.crash_point import crash_point
from warehouse.parquet.file_lock import flock_within
from warehouse.parquet.lake import (
    PART_FILE,
    clean_staging,
    fsync_path,
    read_partition,
    recover_lake,
    write_partition,
)
from warehouse.parquet.lake_audit import VIEW_GLOB, LakeAudit, MissingPartition, audit_lake
from warehouse.parquet.lake_columns import LAKE_COLUMNS
from warehouse.parquet.lake_quarantine import QuarantinedFile, list_quarantine
from warehouse.parquet.lake_snapshot import SNAPSHOTS_DIR, mark_superseded, prune_snapshots
from warehouse.schema_migrations import StoredHistory
from warehouse.sql_files import read_sql, render_sql

# Lake tables the views read, with the columns and types they must have even while the lake is empty.
LAKE_TABLES: dict[str, pa.Schema] = {table: columns.schema() for table, columns in LAKE_COLUMNS.items()}
SCHEMA_DIR = "_schema"  # zero-row stand-ins, inside the lake root but outside every table's folder
# + pid-random: a folder holding the new DB_FILE (dbt names relations by the file), dbt's profile and target, and
# DuckDB's .wal and .tmp/ while it builds.
BUILD_PREFIX = f".{DB_FILE}.build-"
REFRESH_LOCK = ".refresh.lock"
_UNSAFE_PATH_CHARS = set("*?[]{}\0\n\r")  # glob syntax or characters that cannot be in an SQL literal
_UNSAFE_ROOT_CHARS = _UNSAFE_PATH_CHARS | {","}  # file_search_path is a comma-separated list
# The DuckDB variable naming the warehouse folder whose lake the views read (unset: the folder of the last refresh).
ROOT_VARIABLE = "costbench_root"
_PREVIOUS = "costbench_previous"  # the live file, attached while dbt builds a refresh that keeps some weeks
_LOCK_POLL_S = 0.2
# How long a snapshot stays after a newer refresh superseded it: a session opened before reads it until then.
DEFAULT_SNAPSHOT_KEEP_S = 24 * 3600.0
# How the views read the hive-partitioned lake: the partition keys come from the folder names.
_HIVE_OPTIONS = "hive_partitioning = true, union_by_name = true, hive_types = {'week': DATE, 'scenario': VARCHAR}"
logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RefreshResult:
    db_path: Path | None  # the local backend's DuckDB file; None on DuckLake
    upgrade_notes: tuple[str, ...]  # the schema upgrades applied (usually none)
    quarantined: tuple[QuarantinedFile, ...]  # lake files this refresh moved out, each with its message
    lake_files: int  # files the views read
    decoded_files: int  # of those, fully decoded this time (no recorded checksum; the others' sha256 matched)
    location: str = ""  # the warehouse as messages name it (a path, or a DuckLake catalog without password)
    missing: tuple[MissingPartition, ...] = ()  # partitions the manifest says were written, now gone (lake_missing)
    lake_gaps: int = 0  # partitions the views lack: missing, or quarantined and not written again since
    dbt_seconds: tuple[tuple[str, float], ...] = ()  # (model or test, seconds) of the marts' dbt build
    dbt_tests: tuple[DataTest, ...] = ()  # the marts' dbt data tests, each passed or a warning
    scope: WeekScope | None = None  # the weeks the marts were computed for, or every week; and why


@dataclass(frozen=True, slots=True)
class _Asked:
    weeks: tuple[date, ...]  # refresh()'s
    full: bool


@dataclass(frozen=True, slots=True)
class _Built:
    dbt: DbtBuild
    scope: WeekScope


@dataclass(frozen=True, slots=True)
class _Previous:
    history: StoredHistory
    snapshot: str | None  # the folder under lake/_snapshots its views read (None: none, or an empty lake)
    record: BuildRecord | None = None  # its marts' build (mart_build), if it recorded one
    files: frozenset[LakeFile] = frozenset()  # the lake files its views read


def sql_path_literal(path: Path | str, glob: str = "") -> str:
    """A single-quoted SQL string for a path we control, plus an optional glob pattern of our own.

    Refuses paths with characters DuckDB would read as glob syntax or that cannot sit in a literal.
    """
    text = str(path)
    bad = sorted(_UNSAFE_PATH_CHARS & set(text))
    if bad:
        raise WarehouseError(
            f"warehouse path {text!r} contains {bad!r}, which DuckDB would read as a glob or cannot quote"
        )
    return "'" + (text + glob).replace("'", "''") + "'"


def load_prices(con: duckdb.DuckDBPyConnection, prices: PriceTable) -> None:
    """The price table into gpu_prices, api_prices and price_books (both backends)."""
    if prices.gpu_rows:
        con.executemany("INSERT INTO gpu_prices VALUES (?, ?, ?, ?)", list(prices.gpu_rows))
    if prices.api_rows:
        con.executemany("INSERT INTO api_prices VALUES (?, ?, ?, ?, ?, ?, ?)", list(prices.api_rows))
    if prices.book_rows:
        con.executemany("INSERT INTO price_books VALUES (?, ?, ?, ?, ?, ?, ?)", list(prices.book_rows))


class Warehouse(MartReaders):
    def __init__(
        self,
        root: Path,
        lock_wait_s: float = 120.0,
        prices_path: Path | None = None,
        memory_limit: str | None = None,
        clock_wall_s: Callable[[], float] = time.time,
        snapshot_keep_s: float = DEFAULT_SNAPSHOT_KEEP_S,
    ) -> None:
        self.root = Path(root)
        # How long a refresh waits for another refresh to finish (and any open for a legacy writer's lock).
        self.lock_wait_s = lock_wait_s
        self.prices_path = prices_path  # None: warehouse/prices.yaml
        self.memory_limit = memory_limit  # DuckDB memory_limit, e.g. "3GB"; None: DuckDB's default
        self.clock_wall_s = clock_wall_s
        self.snapshot_keep_s = snapshot_keep_s

    @property
    def db_path(self) -> Path:
        return self.root / DB_FILE

    @property
    def lake_root(self) -> Path:
        return self.root / "lake"

    @property
    def location(self) -> str:
        return str(self.root)

    def write_partition(self, table: str, week_start: date, scenario: str, data: pa.Table) -> str:
        """Replace one (week, scenario) partition of a lake table (warehouse/parquet/lake.py); returns its file."""
        return str(write_partition(self.lake_root, table, week_start, scenario, data))

    def read_partition(self, table: str, week_start: date, scenario: str) -> pa.Table:
        return read_partition(self.lake_root, table, week_start, scenario)

    @contextmanager
    def connect(self, read_only: bool = True) -> Iterator[duckdb.DuckDBPyConnection]:
        """One DuckDB connection for one unit of work, pointed at this folder's lake (costbench_root) so the views
        read it wherever the folder was refreshed.

        Read-only is what everything in costbench uses, and never waits for a refresh. `read_only=False`
        opens the live file for writing: it waits for every reader and blocks new ones, so it is only for
        tools that own a warehouse alone (bench/warehouse_scale.py); refresh() never does it.
        """
        root = self._root_dir()
        if read_only and not self.db_path.exists():
            raise WarehouseError(f"{self.db_path} does not exist yet: refresh the warehouse first")
        if not read_only:
            root.mkdir(parents=True, exist_ok=True)
        con = self._open(self.db_path, read_only)
        try:
            self._configure(con, root)
            if read_only:
                schema_migrations.check_readable(schema_migrations.stored_version(con), str(self.db_path))
            yield con
        finally:
            con.close()

    def cleanup(self, min_age_s: float = 0.0) -> list[str]:
        """Remove the staged files of killed lake writers (their partition locks are free, so age does not
        matter here; `min_age_s` is for the DuckLake backend). Returns what was removed."""
        return [str(p) for p in clean_staging(self.lake_root)]

    def refresh(self, weeks: Iterable[date] = (), full: bool = False) -> RefreshResult:
        """Check the lake, quarantine unfit files, build views and marts in a new file and swap it in.

        The week tables are computed for the weeks whose lake files changed since the last refresh and for `weeks`,
        and kept from the last refresh for the others, when it was built from the same project, schema and prices;
        else, or with `full`, for every week (warehouse/marts/week_scope.py). RefreshResult.scope says which.

        Works on an empty or partly filled lake: a table with no files yet gets an empty view with its
        full set of columns. A failure (or a database newer than this code) leaves the previous database
        as it was. An older database's version history is carried into the new file with a note of each
        upgrade (RefreshResult.upgrade_notes). Each quarantined file is also logged as an error.
        """
        prices = load_price_table(self.prices_path)  # a bad price file fails before anything is touched
        root = self._root_dir()
        root.mkdir(parents=True, exist_ok=True)
        with self._refresh_lock(root):
            for leftover in self._remove_leftover_builds(root):
                logger.warning("removed %s, left by a refresh that was killed", leftover)
            recover_lake(self.lake_root)
            previous = self._previous()
            now_wall_s = self.clock_wall_s()
            notes = schema_migrations.upgrade_notes(previous.history.version)
            snapshots = self.lake_root / SNAPSHOTS_DIR
            snapshot = snapshots / f"{int(now_wall_s * 1000)}-{uuid.uuid4().hex[:12]}"
            try:
                audit = audit_lake(self.lake_root, LAKE_TABLES, snapshot, now_wall_s)
                quarantined = list(audit.quarantined)
                asked = _Asked(tuple(weeks), full)
                try:
                    built = self._build_and_swap(root, prices, previous, notes, audit, snapshot, now_wall_s, asked)
                except (duckdb.Error, MartBuildError):
                    if audit.trusted == 0:
                        raise
                    # DuckDB failed on a file that passed: decode every file, then build once more.
                    shutil.rmtree(snapshot, ignore_errors=True)
                    audit = audit_lake(self.lake_root, LAKE_TABLES, snapshot, now_wall_s, decode_all=True)
                    if not audit.quarantined:
                        raise
                    quarantined += audit.quarantined
                    built = self._build_and_swap(root, prices, previous, notes, audit, snapshot, now_wall_s, asked)
            except BaseException:
                shutil.rmtree(snapshot, ignore_errors=True)  # not swapped in: no database reads it
                raise
            fsync_path(root)
            keep_s = self.snapshot_keep_s
            for old in prune_snapshots(snapshots, {snapshot.name}, now_wall_s, keep_s):
                logger.info("removed the lake snapshot %s: superseded over %g s ago, or never used", old, keep_s)
        for q in quarantined:
            logger.error("%s", q.message)
        for gone in audit.missing:
            logger.error("%s", gone.message)
        kept = {(f.table, f.week_start, f.scenario) for f in audit.files}
        unreplaced = {(q.table, q.week_start, q.scenario) for q in list_quarantine(self.lake_root)} - kept
        return RefreshResult(
            self.db_path, tuple(notes), tuple(quarantined), len(audit.files), audit.decoded, location=self.location,
            missing=audit.missing, lake_gaps=len(audit.missing) + len(unreplaced), dbt_seconds=built.dbt.seconds,
            dbt_tests=built.dbt.tests, scope=built.scope,
        )  # fmt: skip

    # --- building ------------------------------------------------------------------------------

    def _build_and_swap(
        self,
        root: Path,
        prices: PriceTable,
        previous: _Previous,
        notes: list[str],
        audit: LakeAudit,
        snapshot: Path,
        now_wall_s: float,
        asked: _Asked,
    ) -> _Built:
        history = previous.history
        inputs = inputs_sha256(prices)
        files = {(f.table, f.week_start, f.scenario, f.sha256) for f in audit.files}
        changed = changed_weeks(previous.files, files)
        scope = choose(previous.record, inputs, changed, asked.weeks, asked.full)
        sources = {
            f"{table}_source": self._source_files(root, table, snapshot if audit.has_files(table) else None)
            for table in LAKE_TABLES
        }
        schema_sql = render_sql(read_sql("schema.sql"), sources, "warehouse/schema.sql")
        build_dir = root / f"{BUILD_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"
        build = build_dir / DB_FILE
        try:
            build_dir.mkdir()
            con = connect_build(build)
            try:
                self._configure(con, root)
                # Marts are read with ORDER BY; not keeping insertion order lets DuckDB stream large scans.
                con.execute("SET preserve_insertion_order = false")
                scope = self._attach_previous(con, root, scope)
                con.execute("BEGIN TRANSACTION")
                con.execute(schema_sql)
                schema_migrations.record_version(con, history, notes, now_wall_s)
                load_prices(con, prices)
                self._load_lake_tables(con, audit)
                write_record(con, scope, inputs, None, now_wall_s)
                con.execute("COMMIT")
                # dbt shares this connection's database instance
                built = build_marts(con, build, build_dir / "dbt", variables=scope.dbt_vars(_PREVIOUS))
                if not scope.full:
                    con.execute(f"DETACH {_PREVIOUS}")
                crash_point("refresh-building")
                con.execute("CHECKPOINT")
            finally:
                con.close()
            if _wal_of(build).exists():
                raise WarehouseError(f"{build}: DuckDB left a WAL after CHECKPOINT and close; not swapping it in")
            fsync_path(build)
            crash_point("refresh-built")
            # A WAL beside the live file belongs to the old database (a writer of it died, or costbench before
            # v3): DuckDB would refuse to open the new file with it ("WAL does not match database file").
            _wal_of(self.db_path).unlink(missing_ok=True)
            if previous.snapshot is not None:
                mark_superseded(self.lake_root / SNAPSHOTS_DIR / previous.snapshot, now_wall_s)
            os.replace(build, self.db_path)  # the last step: an exception before it leaves the old database live
        except BaseException:
            _remove(build_dir)
            raise
        _remove(build_dir)
        return _Built(built, scope)

    @staticmethod
    def _attach_previous(con: duckdb.DuckDBPyConnection, root: Path, scope: WeekScope) -> WeekScope:
        """Attach the live file, whose week tables hold the kept weeks' rows; a scope of every week if it cannot be
        read (a writer holds it, or a dead writer's WAL is beside it)."""
        if scope.full:
            return scope
        try:
            con.execute(f"ATTACH {sql_path_literal(root / DB_FILE)} AS {_PREVIOUS} (READ_ONLY)")
        except duckdb.Error as exc:
            return WeekScope(None, f"the last build could not be read for the weeks it keeps: {exc}")
        return scope

    def _load_lake_tables(self, con: duckdb.DuckDBPyConnection, audit: LakeAudit) -> None:
        kept = {(f.table, f.week_start, f.scenario) for f in audit.files}
        files = pa.Table.from_pylist(
            [
                {
                    "table_name": f.table,
                    "week_start": f.week_start,
                    "scenario": f.scenario,
                    "path": f.path,
                    "frozen_path": f.frozen_path,
                    "sha256": f.sha256,
                    "schema_version": f.schema_version,
                    "row_count": f.rows,
                    "size_bytes": f.size_bytes,
                    "modified_ns": f.modified_ns,
                    "decoded_wall_s": f.decoded_wall_s,
                }
                for f in audit.files
            ]
        )
        quarantine = pa.Table.from_pylist(
            [
                {
                    "table_name": q.table,
                    "week_start": q.week_start,
                    "scenario": q.scenario,
                    "source_path": q.source_path,
                    "quarantined_path": q.quarantined_path,
                    "reason": q.reason,
                    "quarantined_wall_s": q.quarantined_wall_s,
                    "replaced": (q.table, q.week_start, q.scenario) in kept,
                }
                for q in list_quarantine(self.lake_root)
            ]
        )
        missing = pa.Table.from_pylist(
            [
                {
                    "table_name": m.table,
                    "week_start": m.week_start,
                    "scenario": m.scenario,
                    "path": m.path,
                    "written_wall_s": m.written.recorded_wall_s,
                    "written_rows": m.written.rows,
                    "written_size_bytes": m.written.size_bytes,
                    "written_sha256": m.written.sha256,
                    "reason": m.reason,
                }
                for m in audit.missing
            ]
        )
        tables = (("lake_files", files), ("lake_quarantine", quarantine), ("lake_missing", missing))
        for table, rows in tables:
            if rows.num_rows:
                con.register("_rows", rows)
                con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _rows")
                con.unregister("_rows")

    def _previous(self) -> _Previous:
        """What the database being replaced carries over: its version history; and the snapshot its views read."""
        if not self.db_path.exists():
            return _Previous(StoredHistory(None, ()), None)
        try:
            con = self._open(self.db_path, read_only=True)
        except duckdb.Error as exc:
            raise WarehouseError(
                f"cannot read the current database {self.db_path} ({exc}); nothing was changed. If it is damaged, "
                "delete it and refresh again: everything in it is rebuilt from the lake"
            ) from exc
        try:
            history = schema_migrations.read_history(con, str(self.db_path))
            snapshot = None
            if schema_migrations.has_table(con, "lake_files"):
                try:  # lake/_snapshots/<name>/...: one name for every row
                    row = con.execute("SELECT split_part(min(frozen_path), '/', 3) FROM lake_files").fetchone()
                    snapshot = row[0] if row and row[0] else None
                except duckdb.BinderException:
                    pass  # a database from before snapshots: its views read the lake itself
            [database] = con.execute("SELECT current_database()").fetchone() or ("",)
            record = read_record(con, database)
            files: frozenset[LakeFile] = frozenset()
            if record is not None:
                rows = con.execute("SELECT table_name, week_start, scenario, sha256 FROM lake_files").fetchall()
                files = frozenset((t, w, s, h) for t, w, s, h in rows)
            return _Previous(history, snapshot, record, files)
        finally:
            con.close()

    def _source_files(self, root: Path, table: str, snapshot: Path | None) -> str:
        """The read_parquet call the table's view reads: the zero-row stand-in, plus the glob of the table's files in
        the snapshot if it has any (nothing is ever added to a snapshot, so the glob is a fixed list). Each path is
        the warehouse folder, costbench_root's when a session set it, else `root` (absolute, where this refresh
        runs), followed by the path inside it. DuckDB folds getvariable when it binds the view, at each query."""
        self._write_stand_in(table, LAKE_TABLES[table])
        folder = f"coalesce(getvariable('{ROOT_VARIABLE}'), {sql_path_literal(root)})"
        inside = [self.lake_root.relative_to(self.root) / SCHEMA_DIR / table]
        if snapshot is not None:
            inside.append(snapshot.relative_to(self.root) / table)
        files = [f"{folder} || {sql_path_literal(f'/{path}', glob=f'/{VIEW_GLOB}')}" for path in inside]
        return "read_parquet([" + ", ".join(files) + "], " + _HIVE_OPTIONS + ")"

    def _write_stand_in(self, table: str, schema: pa.Schema) -> None:
        # Same hive keys as the lake (week, scenario) so DuckDB reads both in one scan; a Monday far in
        # the past and a scenario name no real scenario can have. Zero rows: it only pins the columns.
        folder = self.lake_root / SCHEMA_DIR / table / "week=1970-01-05" / "scenario=_schema"
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{PART_FILE}.{os.getpid()}.tmp"
        pq.write_table(schema.empty_table(), tmp)
        os.replace(tmp, folder / PART_FILE)  # a concurrent reader sees the old or the new file, never half of one

    # --- files and locks -----------------------------------------------------------------------

    def _root_dir(self) -> Path:
        """The warehouse folder, absolute: where the views read the lake (and DuckDB's file_search_path, against which
        the relative paths of databases built before costbench_root resolve)."""
        root = self.root.absolute()
        bad = sorted(_UNSAFE_ROOT_CHARS & set(str(root)))
        if bad:
            raise WarehouseError(
                f"warehouse path {str(root)!r} contains {bad!r}, which DuckDB would read as a glob or a list "
                "separator in file_search_path"
            )
        return root

    def _configure(self, con: duckdb.DuckDBPyConnection, root: Path) -> None:
        con.execute(f"SET VARIABLE {ROOT_VARIABLE} = ?", [str(root)])
        con.execute("SET file_search_path = ?", [str(root)])
        if self.memory_limit:
            con.execute("SET memory_limit = ?", [self.memory_limit])

    def _open(self, path: Path, read_only: bool) -> duckdb.DuckDBPyConnection:
        # Only a writer of the live file (a tool, or costbench before v3) can hold DuckDB's lock against us.
        deadline = time.monotonic() + self.lock_wait_s
        while True:
            try:
                return duckdb.connect(str(path), read_only=read_only)
            except duckdb.IOException as exc:
                if "lock" not in str(exc).lower():
                    raise
                if time.monotonic() >= deadline:
                    raise WarehouseError(
                        f"{path} is held by another process for more than {self.lock_wait_s:g} s: {exc}"
                    ) from exc
                time.sleep(_LOCK_POLL_S)

    @contextmanager
    def _refresh_lock(self, root: Path) -> Iterator[None]:
        path = root / REFRESH_LOCK
        busy = lambda: WarehouseError(  # noqa: E731
            f"another refresh of {root} has held {path} for more than {self.lock_wait_s:g} s; "
            "nothing was changed, retry when it finishes"
        )
        with open(path, "a") as handle, flock_within(handle, False, self.lock_wait_s, busy):
            yield

    @staticmethod
    def _remove_leftover_builds(root: Path) -> list[Path]:
        # The caller holds the refresh lock, so whoever made these is dead.
        leftovers = sorted(root.glob(f"{BUILD_PREFIX}*"))
        for path in leftovers:
            _remove(path)
        return leftovers


def _wal_of(path: Path) -> Path:
    return path.with_name(path.name + ".wal")


def _remove(path: Path) -> None:
    for p in (path, _wal_of(path), path.with_name(path.name + ".tmp")):
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
