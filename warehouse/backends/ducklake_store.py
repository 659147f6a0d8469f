"""The DuckLake warehouse: catalog in PostgreSQL, Parquet data files under a path, marts built by the same SQL.

Where the local backend (warehouse/backends/store.py) keeps a folder of Parquet files and a DuckDB file it rebuilds,
this one keeps everything in one DuckLake (attached as `costbench`): the lake tables in schema `lake`
(`lake.requests`, ... with the partition keys `week` and `scenario` as columns, partitioned by both), and in
`main` the views of warehouse/schema.sql and the marts of the dbt project (warehouse/dbt/), with the lake tables as
their sources. Every write is a DuckLake transaction, so:

- re-materializing a (week, scenario) deletes and inserts it in one commit: a reader sees the old rows or
  the new ones, never both or neither;
- writers on different machines need no lock: DuckLake commits optimistically, and a commit that lost a
  race with another is retried here (`_transaction`, bounded), so two pipeline processes writing
  different partitions at once both land;
- every reader's transaction reads one snapshot, and earlier snapshots stay readable (time travel:
  `lake.requests AT (VERSION => n)`, or `connect(snapshot=n)` for the whole warehouse as it was), until an
  operator expires them;
- a refresh rebuilds the marts in one transaction: readers see the old marts until it commits. The views
  read the lake tables `AT (VERSION => n)`, n the snapshot that transaction read, so the views and the
  marts show the same lake, whatever is written before the next refresh (the lake tables themselves move);
- `cleanup()` removes the data files of writers killed before their commit (DuckLake's
  ducklake_delete_orphaned_files), only those older than a minimum age, so a live writer's are left.

Nothing here downloads an extension (warehouse/backends/duckdb_extensions.py). Messages name the catalog by
`DuckLakeLocation.describe()`, never with its password.
"""

from __future__ import annotations

import logging
import random
import re
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import TypeVar

import duckdb
import pyarrow as pa

from warehouse import schema_migrations
from warehouse.backends.duckdb_extensions import ExtensionError, load_extensions, load_statements, offline_connection
from warehouse.backends.ducklake_url import DuckLakeLocation, parse_ducklake_url
from warehouse.backends.store import LAKE_TABLES, RefreshResult, WarehouseError, load_prices
from warehouse.marts.dbt_build import DB_FILE, DbtBuild, MartBuildError, build_marts, connect_build
from warehouse.marts.mart_readers import MartReaders
from warehouse.marts.price_table import PriceTable, load_price_table
from warehouse.marts.week_scope import RECORD_TABLE, WeekScope, choose, inputs_sha256, read_record, write_record
from warehouse.parquet.crash_point import crash_point
from warehouse.parquet.lake import (
    LakeError,
    check_partition_columns,
    partition_name,
    same_type,
    validate_scenario_name,
    validate_table_name,
    validate_week_start,
)
from warehouse.parquet.lake_columns import PATH_COLUMNS, duckdb_type
from warehouse.sql_files import read_sql, render_sql

ALIAS = "costbench"  # the name the warehouse is attached under, here and in the analysts' lines
_LAKE_AT = "costbench_lake"  # the catalog at the refresh's snapshot, in dbt's scratch file
_BUILT = "costbench_built"  # dbt's scratch file, attached while the refresh publishes it
LAKE_SCHEMA = "lake"
EXTENSIONS = ("ducklake", "postgres_scanner")
DEFAULT_COMMIT_WAIT_S = 60.0
# Waits between commit retries stay short: a loser that backed off long would keep losing to a writer that
# goes straight on to its next commit (measured: 17 commits to 1 with doubling waits up to 1 s).
_RETRY_FIRST_S = 0.005
_RETRY_MAX_S = 0.05
_MAX_ATTEMPTS = 1000
_CREATE_ATTEMPTS = 5
# A data file younger than this may be a live writer's, not committed yet: cleanup leaves it.
DEFAULT_ORPHAN_MIN_AGE_S = 3600.0
logger = logging.getLogger(__name__)
T = TypeVar("T")


class CatalogError(WarehouseError):
    """The catalog cannot be reached, does not hold a warehouse, or refused us."""


class DuckLakeWarehouse(MartReaders):
    def __init__(
        self,
        location: DuckLakeLocation,
        root: Path,
        prices_path: Path | None = None,
        memory_limit: str | None = None,
        commit_wait_s: float = DEFAULT_COMMIT_WAIT_S,
        clock_wall_s: Callable[[], float] = time.time,
    ) -> None:
        self.catalog = location
        self.root = Path(root)  # local scratch: runs/, workloads/, reports/ (the data files are under data_path)
        self.prices_path = prices_path
        self.memory_limit = memory_limit
        self.commit_wait_s = commit_wait_s  # how long a write keeps retrying commits that lost a race
        self.clock_wall_s = clock_wall_s
        self.commit_retries = 0  # commits retried after a conflict, over this object's life (bench figure)
        self._db: duckdb.DuckDBPyConnection | None = None
        self._lake_ready = False

    @classmethod
    def from_url(cls, url: str, root: Path, **options) -> DuckLakeWarehouse:
        return cls(parse_ducklake_url(url), root, **options)

    @property
    def location(self) -> str:
        return self.catalog.describe()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    # --- reading -------------------------------------------------------------------------------

    @contextmanager
    def connect(self, read_only: bool = True, snapshot: int | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection whose default catalog is the warehouse, inside one transaction (one snapshot).

        read_only: the transaction is rolled back at the end, whatever ran in it. snapshot: the warehouse
        as it was at that DuckLake snapshot (`snapshots()`), attached read-only as `costbench_at_<n>`.
        """
        if snapshot is not None:
            with self._at_snapshot(snapshot) as con:
                yield con
            return
        con = self._instance().cursor()
        try:
            con.execute(f"USE {ALIAS}")
            con.execute("BEGIN TRANSACTION")
            version = schema_migrations.stored_version(con)
            if read_only and version is not None:  # None: only lake tables so far, nothing refreshed yet
                schema_migrations.check_readable(version, self.location)
            yield con
            con.execute("ROLLBACK" if read_only else "COMMIT")
        finally:
            con.close()

    def read_partition(self, table: str, week_start: date, scenario: str) -> pa.Table:
        """The rows of one partition, without the partition keys (as the local lake returns them)."""
        self._check_partition(table, week_start, scenario)
        missing = LakeError(
            f"lake partition not found: {partition_name(table, week_start, scenario)} in {self.location}"
        )
        con = self._instance().cursor()
        try:
            if not self._has_lake_table(con, table):
                raise missing
            data = con.execute(
                f"SELECT * EXCLUDE (week, scenario) FROM {ALIAS}.{LAKE_SCHEMA}.{table} WHERE week = ? AND scenario = ?",
                [week_start, scenario],
            ).fetch_arrow_table()
        finally:
            con.close()
        if data.num_rows == 0:
            raise missing
        return data

    def snapshots(self) -> list[dict]:
        """Every DuckLake snapshot, oldest first: snapshot_id, snapshot_time, changes."""
        con = self._instance().cursor()
        try:
            cursor = con.execute(f"SELECT snapshot_id, snapshot_time, changes FROM {ALIAS}.snapshots() ORDER BY 1")
            columns = [d[0] for d in cursor.description]
            return [dict(zip(columns, row)) for row in cursor.fetchall()]
        finally:
            con.close()

    def current_snapshot(self) -> int:
        con = self._instance().cursor()
        try:
            row = con.execute(f"SELECT id FROM {ALIAS}.current_snapshot()").fetchone()
            assert row is not None
            return int(row[0])
        finally:
            con.close()

    # --- writing -------------------------------------------------------------------------------

    def write_partition(self, table: str, week_start: date, scenario: str, data: pa.Table) -> str:
        """Replace the (week, scenario) partition of `table` with `data`, in one DuckLake commit.

        Returns where it landed (for messages). Raises LakeError for bad names, a column of another type than
        the lake's, or partition-key columns that disagree with the partition; nothing is written then.
        """
        name = partition_name(table, week_start, scenario)
        self._check_partition(table, week_start, scenario)
        if not isinstance(data, pa.Table):
            raise LakeError(f"{name}: expected a pyarrow.Table, got {type(data).__name__}")
        check_partition_columns(data, table, week_start, scenario)
        rows = self._lake_rows(table, data, name)
        self._ensure_lake_tables()
        target = f"{LAKE_SCHEMA}.{table}"

        def replace(con: duckdb.DuckDBPyConnection) -> None:
            con.execute(f"DELETE FROM {target} WHERE week = ? AND scenario = ?", [week_start, scenario])
            if rows.num_rows:
                con.register("_rows", rows)
                con.execute(
                    f"INSERT INTO {target} BY NAME SELECT ?::DATE AS week, ?::VARCHAR AS scenario, * FROM _rows",
                    [week_start, scenario],
                )
                con.unregister("_rows")
            crash_point("ducklake-inserted")  # the data files are written, the commit is not

        self._transaction(replace, name)
        return f"{self.location} {target} week={week_start.isoformat()} scenario={scenario}"

    def refresh(self, weeks: Iterable[date] = (), full: bool = False) -> RefreshResult:
        """Build the marts from one snapshot of the lake tables, then publish them with the views in one transaction.

        dbt builds in a scratch DuckDB file under the local folder, reading the catalog attached read-only at the
        snapshot the refresh starts from (warehouse/marts/dbt_build.py); readers see the previous marts until the
        publishing transaction commits, and a publish racing another refresh (or a write) is retried. The week
        tables are computed for the weeks the lake tables changed in since the last refresh's snapshot (DuckLake's
        table_changes) and for `weeks`, the others kept, as on the local backend (warehouse/marts/week_scope.py).
        """
        prices = load_price_table(self.prices_path)
        self._ensure_lake_tables()
        with self.connect(read_only=True) as con:
            row = con.execute(f"SELECT id FROM {ALIAS}.current_snapshot()").fetchone()
        assert row is not None
        snapshot = int(row[0])
        self.root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".costbench-dbt-", dir=self.root) as scratch:
            build = Path(scratch) / DB_FILE
            built, scope = self._build_marts(build, snapshot, prices, tuple(weeks), full)
            notes: list[str] = []
            template = read_sql("schema.sql")
            db = self._instance()
            db.execute(f"ATTACH {_literal(str(build))} AS {_BUILT} (READ_ONLY)")
            try:

                def publish(con: duckdb.DuckDBPyConnection) -> int:
                    history = schema_migrations.read_history(con, self.location)  # refuses a newer warehouse
                    at = f"AT (VERSION => {snapshot})"  # the views read the lake the marts were built from
                    sources = {f"{table}_source": f"{LAKE_SCHEMA}.{table} {at}" for table in LAKE_TABLES}
                    notes[:] = schema_migrations.upgrade_notes(history.version)
                    con.execute(render_sql(template, sources, "warehouse/schema.sql"))
                    con.execute("DELETE FROM schema_version")  # rewritten whole from the history read above
                    schema_migrations.record_version(con, history, notes, self.clock_wall_s())
                    load_prices(con, prices)
                    con.execute(f"INSERT INTO {RECORD_TABLE} FROM {_BUILT}.main.{RECORD_TABLE}")
                    # The stages too: the next refresh keeps the weeks of the week tables, stages included.
                    for schema, table in built.models:
                        con.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
                        con.execute(f"CREATE OR REPLACE TABLE {schema}.{table} AS FROM {_BUILT}.{schema}.{table}")
                    return sum(self._data_files(con, table) for table in LAKE_TABLES)

                files = self._transaction(publish, "refresh")
            finally:
                db.execute(f"DETACH {_BUILT}")
        return RefreshResult(
            None,
            tuple(notes),
            (),
            files,
            0,
            location=self.location,
            dbt_seconds=built.seconds,
            dbt_tests=built.tests,
            scope=scope,
        )

    def _build_marts(
        self, build: Path, snapshot: int, prices: PriceTable, weeks: tuple[date, ...], full: bool
    ) -> tuple[DbtBuild, WeekScope]:
        """dbt's build into `build`, over the catalog at `snapshot`, of the weeks week_scope.choose picks."""
        con = connect_build(build)
        try:
            con.execute("SET enable_progress_bar = false")
            names = EXTENSIONS + (("httpfs",) if "://" in (self.catalog.data_path or "") else ())
            load_extensions(con, names)
            if self.memory_limit:
                con.execute("SET memory_limit = ?", [self.memory_limit])
            target = _literal(self.catalog.attach_target(bounded=True))
            try:
                con.execute(f"ATTACH {target} AS {_LAKE_AT} (READ_ONLY, SNAPSHOT_VERSION {snapshot})")
            except duckdb.Error as exc:
                raise self._attach_error(exc) from None
            sources = {f"{table}_source": f"{_LAKE_AT}.{LAKE_SCHEMA}.{table}" for table in LAKE_TABLES}
            inputs = inputs_sha256(prices)
            previous = read_record(con, _LAKE_AT)
            changed = self._changed_weeks(con, previous.lake_snapshot, snapshot) if previous else None
            scope = choose(previous, inputs, changed, weeks, full)
            con.execute("BEGIN TRANSACTION")
            con.execute(render_sql(read_sql("schema.sql"), sources, "warehouse/schema.sql"))
            load_prices(con, prices)
            write_record(con, scope, inputs, snapshot, self.clock_wall_s())
            con.execute("COMMIT")
            try:
                built = build_marts(con, build, build.parent / "dbt", variables=scope.dbt_vars(_LAKE_AT))
            except MartBuildError as exc:  # keeps its tests: the marts asset reports them as its checks
                raise MartBuildError(f"refresh of {self.location}: {self._clean_text(str(exc))}", exc.tests) from None
            except WarehouseError as exc:
                raise WarehouseError(f"refresh of {self.location}: {self._clean_text(str(exc))}") from None
            con.execute(f"DETACH {_LAKE_AT}")
            return built, scope
        finally:
            con.close()

    @staticmethod
    def _changed_weeks(con: duckdb.DuckDBPyConnection, since: int | None, snapshot: int) -> set[date] | None:
        """The weeks of every row the lake tables gained or lost after snapshot `since` up to `snapshot` (None: not
        known, as when `since` is unrecorded or its snapshots have been expired)."""
        if since is None or since > snapshot:
            return None
        if since == snapshot:
            return set()
        weeks: set[date] = set()
        for table in LAKE_TABLES:
            try:
                rows = con.execute(
                    "SELECT DISTINCT week FROM ducklake_table_changes(?, ?, ?, ?, ?)",
                    [_LAKE_AT, LAKE_SCHEMA, table, since + 1, snapshot],
                ).fetchall()
            except duckdb.Error as exc:
                logger.info("the lake's changes since snapshot %d are not known (%s): building every week", since, exc)
                return None
            weeks.update(row[0] for row in rows)
        return weeks

    def cleanup(self, min_age_s: float = DEFAULT_ORPHAN_MIN_AGE_S) -> list[str]:
        """Remove the data files under data_path that no snapshot references (a writer killed before its commit
        left them) and that are older than `min_age_s`. Returns what was removed."""
        if min_age_s < 0:
            raise WarehouseError(f"min_age_s must be >= 0, got {min_age_s!r}")
        older_than = datetime.fromtimestamp(self.clock_wall_s(), timezone.utc) - timedelta(seconds=min_age_s)
        con = self._instance().cursor()
        try:
            rows = con.execute(
                "SELECT path FROM ducklake_delete_orphaned_files(?, older_than => ?) ORDER BY 1", [ALIAS, older_than]
            ).fetchall()
        except duckdb.Error as exc:
            raise WarehouseError(f"cleanup of {self.location} failed: {self._clean(exc)}") from None
        finally:
            con.close()
        return [str(r[0]) for r in rows]

    # --- the DuckLake --------------------------------------------------------------------------

    def _instance(self) -> duckdb.DuckDBPyConnection:
        """The process's in-memory DuckDB with the warehouse attached; each unit of work takes a cursor."""
        if self._db is not None:
            return self._db
        db = offline_connection()
        try:
            names = EXTENSIONS + (("httpfs",) if "://" in (self.catalog.data_path or "") else ())
            load_extensions(db, names)
            db.execute("SET preserve_insertion_order = false")  # marts are read with ORDER BY
            if self.memory_limit:
                db.execute("SET memory_limit = ?", [self.memory_limit])
            options = ""
            if self.catalog.data_path:
                options = f" (DATA_PATH {_literal(self.catalog.data_path)})"
            for attempt in range(1, _CREATE_ATTEMPTS + 1):
                try:
                    db.execute(f"ATTACH {_literal(self.catalog.attach_target(bounded=True))} AS {ALIAS}{options}")
                    break
                except duckdb.Error as exc:
                    # Two processes creating one new catalog at once: the loser's CREATE TABLE collides with
                    # the winner's; once the winner has committed, the catalog exists and attaching works.
                    if "already exists" not in str(exc) or attempt == _CREATE_ATTEMPTS:
                        raise self._attach_error(exc) from None
                    time.sleep(_RETRY_FIRST_S * attempt * random.uniform(1, 3))
        except BaseException:
            db.close()
            raise
        self._db = db
        return db

    @contextmanager
    def _at_snapshot(self, snapshot: int) -> Iterator[duckdb.DuckDBPyConnection]:
        if not isinstance(snapshot, int) or isinstance(snapshot, bool) or snapshot < 0:
            raise WarehouseError(f"snapshot must be a DuckLake snapshot id (an int >= 0), got {snapshot!r}")
        alias = f"{ALIAS}_at_{snapshot}"
        db = self._instance()
        attached = {row[0] for row in db.execute("SELECT database_name FROM duckdb_databases()").fetchall()}
        if alias not in attached:
            try:
                target = _literal(self.catalog.attach_target(bounded=True))
                db.execute(f"ATTACH {target} AS {alias} (READ_ONLY, SNAPSHOT_VERSION {snapshot})")
            except duckdb.Error as exc:
                raise CatalogError(f"{self.location}: no snapshot {snapshot}: {self._clean(exc)}") from None
        con = db.cursor()
        try:
            con.execute(f"USE {alias}")
            yield con
        finally:
            con.close()

    def _transaction(self, work: Callable[[duckdb.DuckDBPyConnection], T], what: str) -> T:
        """Run `work` in one transaction and commit; a commit that lost a race is retried from the start.

        DuckLake commits optimistically: a transaction that conflicts with one committed meanwhile (two
        writers deleting from the same table, two refreshes) fails at COMMIT and changes nothing, so doing
        the whole unit again is safe. Bounded by commit_wait_s and _MAX_ATTEMPTS, with short jittered waits.
        """
        deadline = time.monotonic() + self.commit_wait_s
        wait_s = _RETRY_FIRST_S
        for attempt in range(1, _MAX_ATTEMPTS + 1):
            con = self._instance().cursor()
            try:
                con.execute(f"USE {ALIAS}")
                con.execute("BEGIN TRANSACTION")
                result = work(con)
                con.execute("COMMIT")
                return result
            except duckdb.Error as exc:
                _rollback(con)
                if not _is_conflict(exc):
                    raise WarehouseError(f"{what} in {self.location} failed: {self._clean(exc)}") from None
                if attempt == _MAX_ATTEMPTS or time.monotonic() + wait_s > deadline:
                    raise WarehouseError(
                        f"{what} in {self.location}: gave up after {attempt} commits lost a race with other "
                        f"writers ({self.commit_wait_s:g} s); nothing was changed: {self._clean(exc)}"
                    ) from None
                self.commit_retries += 1
                logger.debug("%s: commit conflict (attempt %d), retrying: %s", what, attempt, exc)
            finally:
                con.close()
            time.sleep(wait_s * random.uniform(0, 2))
            wait_s = min(_RETRY_MAX_S, wait_s + _RETRY_FIRST_S)
        raise AssertionError("unreachable")

    def _ensure_lake_tables(self) -> None:
        """Create the lake tables (partitioned by week and scenario), or add the columns a newer costbench
        defines; once per object. Older rows read a new column as null, as in the local lake."""
        if self._lake_ready:
            return

        def ensure(con: duckdb.DuckDBPyConnection) -> None:
            con.execute(f"CREATE SCHEMA IF NOT EXISTS {LAKE_SCHEMA}")
            for table, schema in LAKE_TABLES.items():
                have = self._columns(con, table)
                if not have:
                    columns = ["week DATE NOT NULL", "scenario VARCHAR NOT NULL"] + [
                        f"{f.name} {duckdb_type(f.type)}" for f in schema if f.name not in PATH_COLUMNS
                    ]
                    con.execute(f"CREATE TABLE {LAKE_SCHEMA}.{table} ({', '.join(columns)})")
                    con.execute(f"ALTER TABLE {LAKE_SCHEMA}.{table} SET PARTITIONED BY (week, scenario)")
                    continue
                for f in schema:
                    if f.name not in have and f.name not in PATH_COLUMNS:
                        con.execute(f"ALTER TABLE {LAKE_SCHEMA}.{table} ADD COLUMN {f.name} {duckdb_type(f.type)}")

        self._transaction(ensure, "creating the lake tables")
        self._lake_ready = True

    @staticmethod
    def _columns(con: duckdb.DuckDBPyConnection, table: str) -> set[str]:
        rows = con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE database_name = ? AND schema_name = ? AND table_name = ?",
            [ALIAS, LAKE_SCHEMA, table],
        ).fetchall()
        return {r[0] for r in rows}

    def _has_lake_table(self, con: duckdb.DuckDBPyConnection, table: str) -> bool:
        return bool(self._columns(con, table))

    @staticmethod
    def _data_files(con: duckdb.DuckDBPyConnection, table: str) -> int:
        row = con.execute(
            "SELECT count(*) FROM ducklake_list_files(?, ?, schema => ?)", [ALIAS, table, LAKE_SCHEMA]
        ).fetchone()
        return int(row[0]) if row else 0

    @staticmethod
    def _check_partition(table: str, week_start: date, scenario: str) -> None:
        validate_table_name(table)
        validate_week_start(week_start)
        validate_scenario_name(scenario)
        if table not in LAKE_TABLES:
            raise LakeError(f"{table!r} is not a lake table (known: {sorted(LAKE_TABLES)})")

    @staticmethod
    def _lake_rows(table: str, data: pa.Table, name: str) -> pa.Table:
        """`data` without its own partition-key columns (checked equal to the partition's), its types checked
        against the lake's: DuckLake would cast a mistyped column silently, or fail mid-insert."""
        schema = LAKE_TABLES[table]
        differ = [
            f"{f.name}: {f.type}, the lake has {schema.field(f.name).type}"
            for f in data.schema
            if f.name in schema.names
            and f.name not in PATH_COLUMNS
            and not same_type(f.type, schema.field(f.name).type)
        ]
        unknown = [f.name for f in data.schema if f.name not in schema.names and f.name != "week"]
        if differ or unknown:
            what = "; ".join(differ + [f"{n}: not a column of the lake table" for n in unknown])
            raise LakeError(f"{name}: {what}; nothing was written")
        return data.drop_columns([c for c in PATH_COLUMNS if c in data.column_names])

    def _attach_error(self, exc: duckdb.Error) -> WarehouseError:
        text = str(exc)
        where = f"the DuckLake catalog {self.location} (PostgreSQL at {self.catalog.host}:{self.catalog.port})"
        if "Unable to connect to Postgres" in text:
            reason = text.split("failed: ", 1)[-1] if "failed: " in text else text
            return CatalogError(f"cannot reach {where}: {self._clean_text(reason)}")
        if "data_path is not set" in text:
            return CatalogError(
                f"{where} holds no warehouse yet: add ?data_path=<absolute path or s3://...> to the URL to create one"
            )
        if "creating a new DuckLake is explicitly disabled" in text:
            return CatalogError(f"{where} holds no warehouse yet: nothing has been written to it")
        return CatalogError(f"cannot attach {where}: {self._clean(exc)}")

    def _clean(self, exc: BaseException) -> str:
        return self._clean_text(str(exc))

    def _clean_text(self, text: str) -> str:
        """One line, with the libpq string shown without its password and the password itself removed."""
        for bounded in (True, False):
            shown = self.catalog.libpq_dsn(with_password=False, bounded=bounded)
            text = text.replace(self.catalog.libpq_dsn(bounded=bounded), shown)
        if self.catalog.password:
            text = text.replace(self.catalog.password, "***")
        text = re.sub(r"password=\S+", "password=***", text)
        return "; ".join(line.strip() for line in text.splitlines() if line.strip())


def analyst_lines(location: DuckLakeLocation) -> list[str]:
    """The three lines an analyst pastes into a plain `duckdb` session to read the warehouse (no password:
    libpq takes it from PGPASSWORD or ~/.pgpass)."""
    names = EXTENSIONS + (("httpfs",) if "://" in (location.data_path or "") else ())
    try:
        loads = " ".join(load_statements(names))
    except ExtensionError as exc:
        raise WarehouseError(str(exc)) from exc
    return [
        loads,
        f"ATTACH {_literal(location.attach_target(with_password=False))} AS {ALIAS} (READ_ONLY);",
        f"USE {ALIAS};",
    ]


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _is_conflict(exc: duckdb.Error) -> bool:
    return isinstance(exc, duckdb.TransactionException) or "conflict" in str(exc).lower()


def _rollback(con: duckdb.DuckDBPyConnection) -> None:
    try:
        con.execute("ROLLBACK")
    except duckdb.Error:
        pass  # no transaction open: the failed COMMIT already ended it
