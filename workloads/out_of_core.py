"""One DuckDB connection for out-of-core work on a big trace (sorting a spool, checking request ids):
bounded memory, the rest spilled to a temporary folder removed afterwards."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

# What one such query may hold in memory; with pyarrow's batches and the imports beside it, a process
# stays well under the 2 GB bound of docs/workloads.md ("Big traces").
MEMORY_LIMIT = "700MB"


@contextmanager
def out_of_core(spill_parent: Path | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection limited to MEMORY_LIMIT and two threads, spilling under `spill_parent` (default: the
    system's temporary folder; give the data's own folder when it is bigger than /tmp)."""
    with tempfile.TemporaryDirectory(prefix="costbench-spill-", dir=spill_parent) as spill:
        # A database file, not an in-memory one: a table built here lives on disk behind the buffer
        # pool, so the memory limit bounds it too.
        database = str(Path(spill) / "work.duckdb")
        con = duckdb.connect(database, config={"memory_limit": MEMORY_LIMIT, "temp_directory": spill, "threads": 2})
        try:
            con.execute("SET enable_progress_bar = false")  # a long query must not draw on the user's terminal
            # Results are ordered explicitly where order matters; without this DuckDB can stream and spill.
            con.execute("SET preserve_insertion_order = false")
            yield con
        finally:
            con.close()


def sql_text(text: str | Path) -> str:
    """A single-quoted SQL string literal."""
    return "'" + str(text).replace("'", "''") + "'"
