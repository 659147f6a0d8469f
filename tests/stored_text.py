"""What a reader sees in a file the project stored, for tests that search every artefact for a secret:
Parquet and DuckDB compress, so their raw bytes alone could miss a value; other files are read raw."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow.parquet as pq


def decoded_text(path: Path) -> str:
    """The decoded rows of a Parquet or DuckDB file as text; empty for any other file."""
    if path.suffix == ".parquet":
        if path.stat().st_size < 12:
            # Only the magic bytes: a writer killed before its first row group (a terminated run's
            # probe). Nothing is compressed in it, so the caller's raw search sees all it holds.
            return ""
        return str(pq.read_table(path).to_pylist())
    if path.suffix == ".duckdb":
        # The views read the lake relative to the database's folder (warehouse/backends/store.py).
        with duckdb.connect(str(path), read_only=True, config={"file_search_path": str(path.parent)}) as con:
            tables = con.execute("SELECT table_schema, table_name FROM information_schema.tables").fetchall()
            return "".join(str(con.execute(f'SELECT * FROM "{schema}"."{name}"').fetchall()) for schema, name in tables)
    return ""
