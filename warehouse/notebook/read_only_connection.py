"""The notebook's one connection to the warehouse: read-only (a write in it fails, and it never blocks a refresh or
another reader), held open for the notebook's session, or one message saying what to do when it cannot be opened
(above all: no warehouse yet, so run `make demo`)."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import duckdb

from warehouse.backends.backend import WarehouseLocationError, open_warehouse
from warehouse.backends.duckdb_extensions import ExtensionError
from warehouse.backends.store import Warehouse
from warehouse.errors import WarehouseError
from warehouse.schema_migrations import SchemaVersionError

REPO_ROOT = Path(__file__).resolve().parents[2]  # warehouse/notebook/ -> the repository; as assets/resources.py has it
DEFAULT_ROOT = REPO_ROOT / "warehouse"  # where `make demo` builds it
# What opening a warehouse can meet that the analyst can act on; anything else is a bug and keeps its traceback.
OPEN_ERRORS = (WarehouseError, WarehouseLocationError, SchemaVersionError, ExtensionError, duckdb.Error, OSError)


class NotebookWarehouseError(RuntimeError):
    """Why the notebook has no warehouse to read, and what to do about it (markdown)."""


class ReadOnlyWarehouse:
    """A warehouse's read-only connection, open until close() (or until the object is collected)."""

    def __init__(self, location: str, connection: duckdb.DuckDBPyConnection, stack: ExitStack) -> None:
        self.location = location
        self.connection = connection
        self._stack = stack

    def close(self) -> None:
        self._stack.close()


def open_read_only(location: str | None) -> ReadOnlyWarehouse:
    """The warehouse at `location` (a folder or a ducklake: URL; None or empty: $COSTBENCH_WAREHOUSE, else the
    repository's warehouse/), opened read-only. Raises NotebookWarehouseError saying what to do instead."""
    try:
        store = open_warehouse(location, DEFAULT_ROOT)
    except WarehouseLocationError as exc:
        raise NotebookWarehouseError(str(exc)) from None
    if isinstance(store, Warehouse) and not store.db_path.exists():
        raise NotebookWarehouseError(_no_warehouse_yet(store.db_path))
    stack = ExitStack()
    try:
        if isinstance(store, Warehouse):  # a read-only open of the file, which also checks its schema version
            connection = stack.enter_context(store.connect(read_only=True))
        else:  # a DuckLake, attached read-only as `make sql` attaches it (the store's own connection can write)
            from warehouse.backends.ducklake_store import DuckLakeWarehouse, analyst_lines

            assert isinstance(store, DuckLakeWarehouse)
            connection = duckdb.connect()
            stack.callback(connection.close)
            for line in analyst_lines(store.catalog):
                connection.execute(line)
    except OPEN_ERRORS as exc:
        stack.close()
        raise NotebookWarehouseError(f"The warehouse at `{store.location}` cannot be read: {exc}") from None
    return ReadOnlyWarehouse(store.location, connection, stack)


def _no_warehouse_yet(db_path: Path) -> str:
    return (
        f"**There is no warehouse at `{db_path}` yet.** Run `make demo` in the repository (it replays the "
        "demo traffic and builds the warehouse), or `python -m warehouse refresh --root <folder>` where a lake is "
        "already written, or point `COSTBENCH_WAREHOUSE` at another warehouse; then run this cell again."
    )
