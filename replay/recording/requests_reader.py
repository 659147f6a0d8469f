"""Read a replay's request records back, whether the run finished or was killed mid-way.

A finished (or cleanly interrupted) run has `requests.parquet`; a run killed with SIGKILL has only
`requests.parts/part-*.parquet`, one complete file per flushed batch. `read_requests` returns the
same table either way; `requests_partial_parts` says which case it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from common.run_folder import REQUESTS_FILE
from common.run_folder import REQUESTS_PARTS_DIR as PARTS_DIR
from replay.recording.records import REQUEST_RECORD_SCHEMA


def part_paths(out_dir: Path) -> list[Path]:
    """Completed part files in write order (temporary `.part-*.tmp` files are not parts)."""
    parts_dir = Path(out_dir) / PARTS_DIR
    if not parts_dir.is_dir():
        return []
    return sorted(parts_dir.glob("part-*.parquet"))


def requests_partial_parts(out_dir: Path) -> bool:
    """True when only part files exist: the writing process died before merging them."""
    return not (Path(out_dir) / REQUESTS_FILE).exists() and bool(part_paths(out_dir))


def read_requests(out_dir: Path, columns: Sequence[str] | None = None) -> pa.Table:
    """Every request record of the run in out_dir, as a REQUEST_RECORD_SCHEMA table (or `columns` of it).

    Raises FileNotFoundError naming the directory when it holds neither form.
    """
    out_dir = Path(out_dir)
    cols = list(columns) if columns is not None else None
    merged = out_dir / REQUESTS_FILE
    if merged.exists():
        return pq.read_table(merged, columns=cols, schema=REQUEST_RECORD_SCHEMA)
    parts = part_paths(out_dir)
    if not parts and not (out_dir / PARTS_DIR).is_dir():
        raise FileNotFoundError(f"{out_dir}: no {REQUESTS_FILE} and no {PARTS_DIR}/ (not a replay output directory?)")
    schema = REQUEST_RECORD_SCHEMA if cols is None else pa.schema([REQUEST_RECORD_SCHEMA.field(c) for c in cols])
    tables = [pq.read_table(p, columns=cols, schema=REQUEST_RECORD_SCHEMA) for p in parts]
    return pa.concat_tables(tables) if tables else schema.empty_table()
