"""Schema versions of costbench.duckdb, and the upgrade path from each older one.

What the database holds is derived: views over the lake (recreated on every refresh), prices from
prices.yaml, and marts rebuilt from the lake. The lake's Parquet files are the source of truth and are
never rewritten by an upgrade; files written before a column existed read it as null. So an upgrade
drops only tables that the same refresh rebuilds, and records what it did in schema_version.
A database newer than this code is refused untouched, with what to do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import duckdb

SCHEMA_VERSION = 2


class SchemaVersionError(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class Migration:
    to_version: int
    note: str
    apply: Callable[[duckdb.DuckDBPyConnection], None]


def _v1_to_v2(con: duckdb.DuckDBPyConnection) -> None:
    # v1 marts had fewer columns; they are rebuilt from the lake in the same transaction.
    for table in ("run_summary", "weekly_trends"):
        con.execute(f"DROP TABLE IF EXISTS {table}")
    # v1 schema_version had a single column; the history table replaces it.
    con.execute("DROP TABLE IF EXISTS schema_version")


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        2,
        "v1 -> v2: run_summary and weekly_trends rebuilt from the lake with the v2 columns; "
        "server_samples, gpu_samples, prices, diagnoses added; lake files unchanged",
        _v1_to_v2,
    ),
)


def _aggregate(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> Any:
    """The one value of an aggregate query (count, max): such a query always returns one row."""
    row = con.execute(sql, params).fetchone()
    assert row is not None
    return row[0]


def stored_version(con: duckdb.DuckDBPyConnection) -> int | None:
    """The schema version the database was last built with; None for a new, empty database."""
    has_table = _aggregate(
        con,
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_version' AND table_schema = 'main'",
    )
    if not has_table:
        return None
    found = _aggregate(con, "SELECT max(version) FROM schema_version")
    return None if found is None else int(found)


def refuse_newer(version: int | None, db_path: str) -> None:
    if version is not None and version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{db_path} has schema version {version}, newer than the {SCHEMA_VERSION} this costbench knows: "
            "it was built by a newer costbench. Upgrade costbench (pip install -U costbench, or pull the "
            "repository) and refresh again; nothing was changed."
        )


def check_readable(version: int | None, db_path: str) -> None:
    """For read-only opens: the database must be at exactly this code's version."""
    refuse_newer(version, db_path)
    if version is None or version < SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{db_path} has schema version {version or 'none'}, older than {SCHEMA_VERSION}: upgrade it by "
            "refreshing once with write access (`python -m warehouse refresh --root <warehouse dir>`, or the "
            "weekly_trends asset); the lake is the source of truth, so no data is lost"
        )


def upgrade(con: duckdb.DuckDBPyConnection, db_path: str, now_wall_s: float) -> list[str]:
    """Apply every migration past the stored version; the caller holds a transaction. Returns the notes applied."""
    version = stored_version(con)
    refuse_newer(version, db_path)
    applied: list[str] = []
    if version is not None:
        for migration in MIGRATIONS:
            if migration.to_version > version:
                migration.apply(con)
                applied.append(migration.note)
    return applied


def record_version(con: duckdb.DuckDBPyConnection, notes: list[str], now_wall_s: float, fresh: bool) -> None:
    """After schema.sql: write this version's row if it is not there yet."""
    present = _aggregate(con, "SELECT count(*) FROM schema_version WHERE version = ?", [SCHEMA_VERSION])
    if not present:
        note = "; ".join(notes) if notes else ("created" if fresh else "")
        con.execute("INSERT INTO schema_version VALUES (?, ?, ?)", [SCHEMA_VERSION, now_wall_s, note])
