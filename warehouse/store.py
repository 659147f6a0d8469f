"""The DuckDB side of the warehouse: views over the lake, marts rebuilt from them, one connection per unit of work.

Layout under `root`: `lake/` (the Parquet lake, warehouse/lake.py) and `costbench.duckdb`. All SQL lives in
warehouse/schema.sql and warehouse/sql/*.sql. DuckDB allows one writing process at a time, so every
method opens its own connection and closes it before returning. Schema versions and upgrades:
warehouse/schema_migrations.py.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from warehouse import schema_migrations
from warehouse.bootstrap_interval import rebuild_intervals
from warehouse.lake import list_partitions, recover_lake
from warehouse.lake_columns import LAKE_COLUMNS
from warehouse.price_table import PriceTable, load_price_table

# Lake tables the views read, with the columns and types they must have even while the lake is empty.
LAKE_TABLES: dict[str, pa.Schema] = {table: columns.schema() for table, columns in LAKE_COLUMNS.items()}
SCHEMA_DIR = "_schema"  # zero-row stand-ins, inside the lake root but outside every table's folder
_PLACEHOLDER = re.compile(r"@([a-z_]+)@")
_UNSAFE_PATH_CHARS = set("*?[]{}\0\n\r")  # glob syntax or characters that cannot be in an SQL literal


class WarehouseError(RuntimeError):
    pass


def read_sql(name: str) -> str:
    return resources.files("warehouse").joinpath(name).read_text()


def render_sql(template: str, values: dict[str, str], where: str) -> str:
    """Replace every @name@ with values[name]; each name must be used and every placeholder known."""
    used = set(_PLACEHOLDER.findall(template))
    if used != set(values):
        raise WarehouseError(f"{where}: placeholders {sorted(used)} do not match the values {sorted(values)}")
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


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


class Warehouse:
    def __init__(
        self,
        root: Path,
        lock_wait_s: float = 120.0,
        prices_path: Path | None = None,
        memory_limit: str | None = None,
        clock_wall_s: Callable[[], float] = time.time,
    ) -> None:
        self.root = Path(root)
        # DuckDB lets one process write; another waits this long for the lock, then gets a clear error.
        self.lock_wait_s = lock_wait_s
        self.prices_path = prices_path  # None: warehouse/prices.yaml
        self.memory_limit = memory_limit  # DuckDB memory_limit, e.g. "3GB"; None: DuckDB's default
        self.clock_wall_s = clock_wall_s

    @property
    def db_path(self) -> Path:
        return self.root / "costbench.duckdb"

    @property
    def lake_root(self) -> Path:
        return self.root / "lake"

    @contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """One DuckDB connection for one unit of work, closed on exit so other processes can write."""
        if read_only and not self.db_path.exists():
            raise WarehouseError(f"{self.db_path} does not exist yet: refresh the warehouse first")
        if not read_only:
            self.root.mkdir(parents=True, exist_ok=True)
        con = self._open(read_only)
        try:
            if self.memory_limit:
                con.execute("SET memory_limit = ?", [self.memory_limit])
            if read_only:
                schema_migrations.check_readable(schema_migrations.stored_version(con), str(self.db_path))
            yield con
        finally:
            con.close()

    def _open(self, read_only: bool) -> duckdb.DuckDBPyConnection:
        deadline = time.monotonic() + self.lock_wait_s
        while True:
            try:
                return duckdb.connect(str(self.db_path), read_only=read_only)
            except duckdb.IOException as exc:
                if "lock" not in str(exc).lower():
                    raise
                if time.monotonic() >= deadline:
                    raise WarehouseError(
                        f"{self.db_path} is held by another process for more than {self.lock_wait_s:g} s: {exc}"
                    ) from exc
                time.sleep(0.2)

    def refresh(self) -> list[str]:
        """Upgrade an older database, create or replace the lake views and rebuild the marts, in one transaction.

        Works on an empty or partly filled lake: a table with no files yet gets an empty view with its
        full set of columns. A failure (or a database newer than this code) leaves the previous views and
        marts as they were. Returns the notes of the schema upgrades applied (usually none).
        """
        prices = load_price_table(self.prices_path)  # a bad price file fails before anything is touched
        recover_lake(self.lake_root)
        sources = {f"{table}_files": self._source_files(table, schema) for table, schema in LAKE_TABLES.items()}
        schema_sql = render_sql(read_sql("schema.sql"), sources, "warehouse/schema.sql")
        now_wall_s = self.clock_wall_s()
        with self.connect() as con:
            # Marts are read with ORDER BY; not keeping insertion order lets DuckDB stream large scans.
            con.execute("SET preserve_insertion_order = false")
            con.execute("BEGIN TRANSACTION")
            try:
                fresh = schema_migrations.stored_version(con) is None
                notes = schema_migrations.upgrade(con, str(self.db_path), now_wall_s)
                con.execute(schema_sql)
                schema_migrations.record_version(con, notes, now_wall_s, fresh)
                self._load_prices(con, prices)
                con.execute(read_sql("sql/run_summary.sql"))
                rebuild_intervals(con, read_sql("sql/interval_blocks.sql"))
                con.execute(read_sql("sql/weekly_trends.sql"))
                con.execute(read_sql("sql/diagnoses.sql"))
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")
        return notes

    @staticmethod
    def _load_prices(con: duckdb.DuckDBPyConnection, prices: PriceTable) -> None:
        if prices.gpu_rows:
            con.executemany("INSERT INTO gpu_prices VALUES (?, ?, ?, ?)", list(prices.gpu_rows))
        if prices.api_rows:
            con.executemany("INSERT INTO api_prices VALUES (?, ?, ?, ?, ?, ?, ?)", list(prices.api_rows))

    def diagnoses(self) -> list[dict]:
        """Every diagnoses row (the four-numbers verdict per run), ordered by week, scenario, run."""
        return self._rows("diagnoses", "week_start, scenario, run_id")

    def weekly_trends(self) -> list[dict]:
        """Every weekly_trends row (columns: warehouse/schema.sql), ordered by week, scenario, endpoint."""
        return self._rows("weekly_trends", "week_start, scenario, endpoint, backend, config_fingerprint")

    def run_summary(self) -> list[dict]:
        """Every run_summary row, ordered by week, scenario, run."""
        return self._rows("run_summary", "week_start, scenario, run_id")

    def _rows(self, table: str, order_by: str) -> list[dict]:
        with self.connect(read_only=True) as con:
            try:
                cursor = con.execute(f"SELECT * FROM {table} ORDER BY {order_by}")
            except duckdb.CatalogException as exc:
                raise WarehouseError(f"{self.db_path}: no {table} table yet: refresh the warehouse first") from exc
            columns = [d[0] for d in cursor.description]
            return [dict(zip(columns, row)) for row in cursor.fetchall()]

    def _source_files(self, table: str, schema: pa.Schema) -> str:
        """SQL list literal of what the table's view reads: the zero-row stand-in, plus the lake glob if it has
        files."""
        lake_root = self.lake_root.resolve()
        files = [sql_path_literal(self._write_stand_in(lake_root, table, schema))]
        if list_partitions(lake_root, table):
            files.append(sql_path_literal(lake_root / table, glob="/week=*/scenario=*/*.parquet"))
        return "[" + ", ".join(files) + "]"

    @staticmethod
    def _write_stand_in(lake_root: Path, table: str, schema: pa.Schema) -> Path:
        # Same hive keys as the lake (week, scenario) so DuckDB reads both in one scan; a Monday far in
        # the past and a scenario name no real scenario can have. Zero rows: it only pins the columns.
        folder = lake_root / SCHEMA_DIR / table / "week=1970-01-05" / "scenario=_schema"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "part-0.parquet"
        tmp = folder / f".part-0.parquet.{os.getpid()}.tmp"
        pq.write_table(schema.empty_table(), tmp)
        os.replace(tmp, path)  # a concurrent reader sees the old or the new file, never half of one
        return path
