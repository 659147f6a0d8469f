"""Every file the lake's views would read, checked before a refresh builds on it; the unfit ones quarantined.

A refresh (warehouse/backends/store.py) reads only what passes: one truncated or retyped file costs its own week
and scenario, not every query of every week. Each file matched by a view's glob
(`<table>/week=*/scenario=*/part-0.parquet`) is checked by warehouse/parquet/lake_check.py: footer and schema
always; every page decoded, checksums verified, when the file is new or changed since the last refresh
decoded it (its size and mtime recorded in the lake_files table), or when `decode_all` is set (the
store's second pass after DuckDB failed on a file that looked unchanged). A file stamped by a newer
schema version stops the refresh before anything is moved. A file under folders that are not a
partition's (DuckDB would fail to read their week) is quarantined like an unreadable one.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import pyarrow as pa

from warehouse.backends.schema_migrations import SCHEMA_VERSION, SchemaVersionError
from warehouse.parquet.lake import PART_FILE, parse_partition, partition_lock
from warehouse.parquet.lake_check import FileCheck, check_file
from warehouse.parquet.lake_quarantine import QuarantinedFile, quarantine_file

VIEW_GLOB = f"week=*/scenario=*/{PART_FILE}"  # under each table's folder; what the views read
_DECODE_THREADS = 4  # pyarrow decodes without the GIL


@dataclass(frozen=True, slots=True)
class LakeFile:
    """One file a view reads, as the lake_files table records it."""

    table: str
    week_start: date
    scenario: str
    path: str  # relative to the warehouse root
    schema_version: int | None
    rows: int | None
    size_bytes: int
    modified_ns: int
    decoded_wall_s: float  # when its every page was last decoded and checksummed


@dataclass(frozen=True, slots=True)
class LakeAudit:
    files: tuple[LakeFile, ...]
    quarantined: tuple[QuarantinedFile, ...]  # moved out by this audit
    decoded: int  # files decoded this time (new, changed, or every one with decode_all)
    trusted: int  # files not decoded this time: unchanged since a refresh decoded them

    def has_files(self, table: str) -> bool:
        return any(f.table == table for f in self.files)


@dataclass(frozen=True, slots=True)
class _Candidate:
    table: str
    path: Path
    relative: str
    size_bytes: int
    modified_ns: int
    decoded_wall_s: float | None  # from the last refresh, when unchanged since


def audit_lake(
    lake_root: Path,
    tables: dict[str, pa.Schema],
    decoded_before: dict[str, tuple[int, int, float]],
    now_wall_s: float,
    decode_all: bool = False,
) -> LakeAudit:
    """`decoded_before`: path -> (size_bytes, modified_ns, decoded_wall_s) of the last refresh's lake_files."""
    lake_root = Path(lake_root)
    candidates = [
        _candidate(lake_root, table, path, decoded_before)
        for table in tables
        for path in sorted((lake_root / table).glob(VIEW_GLOB))
        if path.is_file()
    ]
    with ThreadPoolExecutor(max_workers=min(_DECODE_THREADS, os.cpu_count() or 1)) as pool:
        checks = list(
            pool.map(
                lambda c: check_file(c.path, tables[c.table], decode=decode_all or c.decoded_wall_s is None),
                candidates,
            )
        )
    newer = [(c, k) for c, k in zip(candidates, checks) if k.newer]
    if newer:
        candidate, check = newer[0]
        raise SchemaVersionError(
            f"{candidate.relative} was written by schema version {check.schema_version}, newer than the "
            f"{SCHEMA_VERSION} this costbench knows ({len(newer)} such file(s)): upgrade costbench and refresh "
            "again; nothing was changed"
        )
    kept: list[LakeFile] = []
    quarantined: list[QuarantinedFile] = []
    for candidate, check in zip(candidates, checks):
        parsed = parse_partition(candidate.table, candidate.path.parent.parent.name, candidate.path.parent.name)
        if parsed is None:
            reason = "not in a partition folder (week=<a Monday>/scenario=<name>), so no week can be read from its path"
            quarantined.append(quarantine_file(lake_root, candidate.path, reason, now_wall_s))
            continue
        week_start, scenario = parsed
        if check.problem is not None:
            with partition_lock(lake_root, candidate.table, week_start, scenario):
                rechecked = _recheck_if_rewritten(lake_root, candidate, check, tables, decoded_before)
                if rechecked is None:
                    continue  # deleted meanwhile: nothing to read, nothing to move
                candidate, check = rechecked
                if check.problem is not None:
                    quarantined.append(quarantine_file(lake_root, candidate.path, check.problem, now_wall_s))
                    continue
        decoded_wall_s = now_wall_s if check.decoded else candidate.decoded_wall_s
        kept.append(
            LakeFile(
                table=candidate.table,
                week_start=week_start,
                scenario=scenario,
                path=candidate.relative,
                schema_version=check.schema_version,
                rows=check.rows,
                size_bytes=candidate.size_bytes,
                modified_ns=candidate.modified_ns,
                decoded_wall_s=decoded_wall_s if decoded_wall_s is not None else now_wall_s,
            )
        )
    decoded = sum(1 for k in checks if k.decoded)
    trusted = sum(1 for k in checks if not k.decoded and k.problem is None)
    return LakeAudit(tuple(kept), tuple(quarantined), decoded, trusted)


def _candidate(
    lake_root: Path, table: str, path: Path, decoded_before: dict[str, tuple[int, int, float]]
) -> _Candidate:
    stat = path.stat()
    relative = str(path.relative_to(lake_root.parent))
    before = decoded_before.get(relative)
    decoded_wall_s = before[2] if before is not None and before[:2] == (stat.st_size, stat.st_mtime_ns) else None
    return _Candidate(table, path, relative, stat.st_size, stat.st_mtime_ns, decoded_wall_s)


def _recheck_if_rewritten(
    lake_root: Path,
    candidate: _Candidate,
    check: FileCheck,
    tables: dict[str, pa.Schema],
    decoded_before: dict[str, tuple[int, int, float]],
) -> tuple[_Candidate, FileCheck] | None:
    """Under the partition lock: a writer may have replaced the bad file since it was checked (None: gone)."""
    if not candidate.path.is_file():
        return None
    stat = candidate.path.stat()
    if (stat.st_size, stat.st_mtime_ns) == (candidate.size_bytes, candidate.modified_ns):
        return candidate, check
    fresh = _candidate(lake_root, candidate.table, candidate.path, decoded_before)
    return fresh, check_file(fresh.path, tables[fresh.table], decode=True)
