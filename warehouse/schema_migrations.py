"""Schema versions of costbench.duckdb and of the lake's files, and what each upgrade changed.

What the database holds is derived: views over the lake, prices from prices.yaml, and marts rebuilt
from the lake. Every refresh builds a new database file from scratch and swaps it in
(warehouse/backends/store.py), so an upgrade never edits an old database: it reads the old one's version
history (the only thing not derived from the lake) and carries it into the new file, with a row for
this version and what the upgrade did. A database newer than this code is refused untouched, with what
to do. The lake's Parquet files are the source of truth and are never rewritten by an upgrade; files
written before a column existed read it as null, and each file written since version 3 carries its
version in its Parquet key-value metadata (warehouse/parquet/lake.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import duckdb

SCHEMA_VERSION = 6


class SchemaVersionError(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class Migration:
    to_version: int
    note: str


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        2,
        "v1 -> v2: run_summary and weekly_trends rebuilt from the lake with the v2 columns; "
        "server_samples, gpu_samples, prices, diagnoses added; lake files unchanged",
    ),
    Migration(
        3,
        "v2 -> v3: lake_files and lake_quarantine added; views read the lake by paths relative to the "
        "warehouse folder; lake files written from now on carry their schema version; lake files unchanged",
    ),
    Migration(
        4,
        "v3 -> v4: lake/_manifest.jsonl records every partition written (the first refresh records the partitions it "
        "finds as seen) and lake_missing names those written and gone; runs gains workers_json, degraded and "
        "degraded_reason (older lake files read them as null), run_summary degraded and degraded_reason, "
        "weekly_trends degraded_runs and caveats (an incomplete lake week is not judged); requests gains the TTFT's "
        "parts ttft_prealloc_ms .. ttft_decode_wait_ms (null in older files) and the mart ttft_parts is added; lake "
        "files unchanged",
    ),
    Migration(
        5,
        "v4 -> v5: runs gains revision_note (the note of the endpoints.yaml revision in force; null in older lake "
        "files) and hours_per_week (168 in older lake files); run_summary gains revision_note, hours_per_week and "
        "week_spend_usd (the endpoint's GPUs for the whole week); weekly_trends.cost_usd is renamed replay_cost_usd "
        "and weekly_trends gains revision_note and week_spend_usd, cost_attribution revision_note; a week whose "
        "configuration changed names the changed server facts and the note in regression_reasons; lake files unchanged",
    ),
    Migration(
        6,
        "v5 -> v6: run_summary and diagnoses gain eager_decode_share (the share of decode steps the servers ran "
        "without a CUDA graph, from sglang:cuda_graph_passes_total) and diagnoses the lever cuda_graphs; lake files "
        "unchanged",
    ),
)


@dataclass(frozen=True, slots=True)
class StoredHistory:
    """What an existing database says about its schema: its version and its schema_version rows."""

    version: int | None  # None: no database yet, or an empty one
    rows: tuple[tuple[int, float | None, str | None], ...]  # (version, applied_wall_s, note), carried over


def _aggregate(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> Any:
    """The one value of an aggregate query (count, max): such a query always returns one row."""
    row = con.execute(sql, params).fetchone()
    assert row is not None
    return row[0]


def has_table(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    return bool(
        _aggregate(
            con,
            "SELECT count(*) FROM information_schema.tables WHERE table_name = ? AND table_schema = 'main' "
            "AND table_catalog = current_database()",
            [name],
        )
    )


def stored_version(con: duckdb.DuckDBPyConnection) -> int | None:
    """The schema version the database was last built with; None for a new, empty database."""
    if not has_table(con, "schema_version"):
        return None
    found = _aggregate(con, "SELECT max(version) FROM schema_version")
    return None if found is None else int(found)


def read_history(con: duckdb.DuckDBPyConnection, db_path: str) -> StoredHistory:
    """The old database's version and history; refuses one newer than this code before anything is built."""
    version = stored_version(con)
    refuse_newer(version, db_path)
    if version is None or version < 2:
        return StoredHistory(version, ())  # v1 kept one bare version number: nothing to carry
    rows = con.execute("SELECT version, applied_wall_s, note FROM schema_version ORDER BY version").fetchall()
    return StoredHistory(version, tuple((int(v), a, n) for v, a, n in rows))


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


def upgrade_notes(version: int | None) -> list[str]:
    """The notes of every migration past `version` (none for a new database: it is simply created)."""
    if version is None:
        return []
    return [m.note for m in MIGRATIONS if m.to_version > version]


def record_version(con: duckdb.DuckDBPyConnection, history: StoredHistory, notes: list[str], now_wall_s: float) -> None:
    """After schema.sql, in the new database: the carried history, then this version's row if it is new."""
    if history.rows:
        con.executemany("INSERT INTO schema_version VALUES (?, ?, ?)", [list(r) for r in history.rows])
    if all(version != SCHEMA_VERSION for version, _, _ in history.rows):
        note = "; ".join(notes) if notes else ("created" if history.version is None else "")
        con.execute("INSERT INTO schema_version VALUES (?, ?, ?)", [SCHEMA_VERSION, now_wall_s, note])
