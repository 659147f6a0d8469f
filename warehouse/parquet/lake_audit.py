"""Every file the lake's views would read, frozen into the refresh's snapshot and checked before a refresh builds
on it; the unfit ones quarantined.

A refresh (warehouse/backends/store.py) reads only what passes: one truncated, retyped or rotted file costs its own
week and scenario, not every query of every week. Each file matched by a view's glob
(`<table>/week=*/scenario=*/part-0.parquet`) is first hard-linked into the snapshot
(warehouse/parquet/lake_snapshot.py), and the link is what is checked, so what the views read is what passed.
Every refresh checks every file: its sha256 against the one recorded when it was written
(warehouse/parquet/lake_checksum.py; the writer decoded every page before recording it), then its footer and
schema (warehouse/parquet/lake_check.py). A file with no recorded checksum (written before checksums) has every
page decoded, checksums verified, and, when it passes, gets its sha256 recorded. `decode_all` (the store's second
pass after DuckDB failed on a file that passed) decodes every file. A file stamped by a newer schema version stops
the refresh before anything is moved. A file under folders that are not a partition's (DuckDB would fail to read
their week) is quarantined like an unreadable one.

A file that is gone cannot be checked, so each refresh also compares the lake with its manifest of what was written
(warehouse/parquet/lake_manifest.py): a partition written (or seen by an earlier refresh) whose file or folder is
gone, and that no quarantine record accounts for, is `missing`, named with what was written. A file whose sidecar
checksum is gone is held to the manifest's sha256 instead of being trusted anew. Partitions found that the manifest
lacks (a lake written before it) are recorded in it as seen.
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path

import pyarrow as pa

from warehouse.parquet.lake import PART_FILE, LakeError, parse_partition, partition_lock, partition_path
from warehouse.parquet.lake_check import FileCheck, check_file
from warehouse.parquet.lake_checksum import read_checksums, sha256_of, write_checksums
from warehouse.parquet.lake_manifest import SEEN, ManifestEntry, latest_entries, record
from warehouse.parquet.lake_quarantine import QuarantinedFile, list_quarantine, quarantine_file
from warehouse.parquet.lake_snapshot import freeze
from warehouse.schema_migrations import SCHEMA_VERSION, SchemaVersionError

VIEW_GLOB = f"week=*/scenario=*/{PART_FILE}"  # under each table's folder; what the views read
_DECODE_THREADS = 4  # pyarrow decodes and hashlib hashes without the GIL
logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LakeFile:
    """One file a view reads, as the lake_files table records it."""

    table: str
    week_start: date
    scenario: str
    path: str  # relative to the warehouse root
    frozen_path: str  # the snapshot's hard link to it, which the views read; relative to the warehouse root
    sha256: str  # what it hashed to this time: the one recorded when it was written, or recorded now
    schema_version: int | None
    rows: int | None
    size_bytes: int
    modified_ns: int
    decoded_wall_s: float  # when its content was verified: its sha256 matched, or every page decoded


@dataclass(frozen=True, slots=True)
class MissingPartition:
    """A partition the manifest says was written (or seen), whose file is gone, and no quarantine moved it."""

    table: str
    week_start: date
    scenario: str
    path: str  # where its file was, relative to the warehouse root
    written: ManifestEntry  # its latest manifest line: when, rows, size, sha256
    reason: str  # what is gone, and what was there

    @property
    def message(self) -> str:
        week = self.week_start.isoformat()
        return (
            f"missing {self.path} (table {self.table}, week {week}, scenario {self.scenario}): {self.reason}. That "
            f"week's {self.table} rows are in no mart and its verdict is not judged; write the partition again "
            "(re-materialize it) to bring the week back, or, if it was removed on purpose, `python -m warehouse "
            f"forget --table {self.table} --week {week} --scenario {self.scenario}`"
        )


@dataclass(frozen=True, slots=True)
class LakeAudit:
    files: tuple[LakeFile, ...]
    quarantined: tuple[QuarantinedFile, ...]  # moved out by this audit
    decoded: int  # files decoded this time (those without a recorded checksum, or every one with decode_all)
    trusted: int  # files not decoded this time: their sha256 matched the one recorded when they were written
    missing: tuple[MissingPartition, ...] = ()  # written (the manifest says) and gone, not quarantined

    def has_files(self, table: str) -> bool:
        return any(f.table == table for f in self.files)


@dataclass(frozen=True, slots=True)
class _Candidate:
    table: str
    path: Path  # in the lake
    frozen: Path  # its hard link in the snapshot, what is checked
    relative: str
    size_bytes: int
    modified_ns: int
    recorded: tuple[str, ...]  # the checksums recorded when it was written (its sidecar's, else the manifest's)
    manifest: ManifestEntry | None  # its partition's latest live manifest line (None: unrecorded)


@dataclass(frozen=True, slots=True)
class _Verdict:
    check: FileCheck
    sha256: str | None  # what the frozen file hashes to (None: not hashed, no checksum was recorded)

    @property
    def problem(self) -> str | None:
        return self.check.problem


def audit_lake(
    lake_root: Path,
    tables: dict[str, pa.Schema],
    snapshot: Path,
    now_wall_s: float,
    decode_all: bool = False,
) -> LakeAudit:
    """Freeze every file the views would read into `snapshot` (an empty folder), check it, quarantine the unfit."""
    lake_root = Path(lake_root)
    manifest = {key: entry for key, entry in latest_entries(lake_root).items() if entry.live}  # read before the glob
    candidates = [
        _candidate(lake_root, table, path, snapshot, manifest)
        for table in tables
        for path in sorted((lake_root / table).glob(VIEW_GLOB))
        if path.is_file()
    ]
    with ThreadPoolExecutor(max_workers=min(_DECODE_THREADS, os.cpu_count() or 1)) as pool:
        verdicts = list(pool.map(lambda c: _verify(c, tables[c.table], decode_all), candidates))
    newer = [(c, v.check) for c, v in zip(candidates, verdicts) if v.check.newer]
    if newer:
        candidate, check = newer[0]
        raise SchemaVersionError(
            f"{candidate.relative} was written by schema version {check.schema_version}, newer than the "
            f"{SCHEMA_VERSION} this costbench knows ({len(newer)} such file(s)): upgrade costbench and refresh "
            "again; nothing was changed"
        )
    kept: list[LakeFile] = []
    quarantined: list[QuarantinedFile] = []
    for candidate, verdict in zip(candidates, verdicts):
        parsed = parse_partition(candidate.table, candidate.path.parent.parent.name, candidate.path.parent.name)
        if parsed is None:
            reason = "not in a partition folder (week=<a Monday>/scenario=<name>), so no week can be read from its path"
            candidate.frozen.unlink()
            quarantined.append(quarantine_file(lake_root, candidate.path, reason, now_wall_s))
            continue
        week_start, scenario = parsed
        if verdict.problem is not None or (not candidate.recorded and verdict.sha256 is not None):
            with partition_lock(lake_root, candidate.table, week_start, scenario):
                rechecked = _recheck_if_rewritten(lake_root, candidate, verdict, tables, manifest)
                if rechecked is None:
                    continue  # deleted meanwhile: nothing to read, nothing to move
                candidate, verdict = rechecked
                if verdict.problem is not None:
                    candidate.frozen.unlink()
                    quarantined.append(quarantine_file(lake_root, candidate.path, verdict.problem, now_wall_s))
                    continue
                if not candidate.recorded:
                    _record_checksum(candidate, verdict)
        assert verdict.sha256 is not None  # every fit file was hashed: against its record, or after a full decode
        kept.append(
            LakeFile(
                table=candidate.table,
                week_start=week_start,
                scenario=scenario,
                path=candidate.relative,
                frozen_path=str(candidate.frozen.relative_to(lake_root.parent)),
                sha256=verdict.sha256,
                schema_version=verdict.check.schema_version,
                rows=verdict.check.rows,
                size_bytes=candidate.size_bytes,
                modified_ns=candidate.modified_ns,
                decoded_wall_s=now_wall_s,
            )
        )
    decoded = sum(1 for v in verdicts if v.check.decoded)
    trusted = sum(1 for v in verdicts if not v.check.decoded and v.problem is None)
    _record_seen(lake_root, kept, manifest, now_wall_s)
    missing = _missing(lake_root, tables, manifest, kept, quarantined)
    return LakeAudit(tuple(kept), tuple(quarantined), decoded, trusted, tuple(missing))


def _missing(
    lake_root: Path,
    tables: dict[str, pa.Schema],
    manifest: dict[tuple[str, date, str], ManifestEntry],
    kept: list[LakeFile],
    quarantined: list[QuarantinedFile],
) -> list[MissingPartition]:
    """The manifest's live partitions of these tables with no file kept, none quarantined now, and no quarantine
    record since their last write (lake_quarantine names those)."""
    found: set[tuple[str, date | None, str | None]] = {(f.table, f.week_start, f.scenario) for f in kept}
    found |= {(q.table, q.week_start, q.scenario) for q in quarantined}  # this audit's: lake_quarantine names them
    moved: dict[tuple[str, date | None, str | None], float] = {}
    for q in list_quarantine(lake_root):  # moved out by an earlier refresh, after its last write
        key = (q.table, q.week_start, q.scenario)
        moved[key] = max(moved.get(key, q.quarantined_wall_s), q.quarantined_wall_s)
    missing = []
    for key, entry in sorted(manifest.items()):
        table, week_start, scenario = key
        if table not in tables or key in found or moved.get(key, float("-inf")) >= entry.recorded_wall_s:
            continue
        folder = partition_path(lake_root, table, week_start, scenario)
        with partition_lock(lake_root, table, week_start, scenario, shared=True):
            if (folder / PART_FILE).is_file():
                continue  # written since this audit froze the lake: the next refresh reads it
            what = "its file is gone (the partition folder is still there)" if folder.is_dir() else (
                "its partition folder is gone")  # fmt: skip
        reason = f"{entry.described()}, sha256 {entry.sha256}; {what}"
        relative = str((folder / PART_FILE).relative_to(lake_root.parent))
        missing.append(MissingPartition(table, week_start, scenario, relative, entry, reason))
    return missing


def _record_seen(
    lake_root: Path, kept: list[LakeFile], manifest: dict[tuple[str, date, str], ManifestEntry], now_wall_s: float
) -> None:
    """Partitions this audit kept that the manifest lacks (written before it): recorded as seen, so that from now on
    they are missed when they go. Under each partition's lock, and only while its file is still the one checked."""
    seen = []
    for f in kept:
        if (f.table, f.week_start, f.scenario) in manifest:
            continue
        with partition_lock(lake_root, f.table, f.week_start, f.scenario, shared=True):
            live, frozen = lake_root.parent / f.path, lake_root.parent / f.frozen_path
            if live.is_file() and live.samefile(frozen):
                seen.append(ManifestEntry(f.table, f.week_start, f.scenario, SEEN, now_wall_s, f.rows,
                                          f.size_bytes, f.sha256))  # fmt: skip
    try:
        record(lake_root, seen)
    except OSError as exc:
        logger.warning("%s: could not record %d partition(s) in the manifest (%s); tried again next refresh",
                       lake_root, len(seen), exc)  # fmt: skip


def _candidate(
    lake_root: Path, table: str, path: Path, snapshot: Path, manifest: dict[tuple[str, date, str], ManifestEntry]
) -> _Candidate:
    recorded = read_checksums(path)  # before the link: a write swapping the file in between adds its own line first
    parsed = parse_partition(table, path.parent.parent.name, path.parent.name)
    entry = manifest.get((table, *parsed)) if parsed else None
    if not recorded and entry is not None and entry.sha256:
        recorded = (entry.sha256,)  # its sidecar is gone: the manifest still says what was written
    frozen = snapshot / path.relative_to(lake_root)
    try:
        freeze(path, frozen)
    except OSError as exc:
        raise LakeError(
            f"cannot hard-link {path} into the refresh's snapshot {snapshot} ({exc}): the lake's file system must "
            "support hard links; nothing was changed"
        ) from exc
    stat = frozen.stat()
    relative = str(path.relative_to(lake_root.parent))
    return _Candidate(table, path, frozen, relative, stat.st_size, stat.st_mtime_ns, recorded, entry)


def _verify(candidate: _Candidate, expected: pa.Schema, decode_all: bool) -> _Verdict:
    """The frozen file's checksum against the recorded ones, then its footer and schema (and its pages, when it
    has no recorded checksum or decode_all is set)."""
    check = check_file(candidate.frozen, expected, decode=decode_all or not candidate.recorded)
    if check.newer or check.problem is not None or not (candidate.recorded or check.decoded):
        return _Verdict(check, None)
    checksum = sha256_of(candidate.frozen)
    if candidate.recorded and checksum not in candidate.recorded:
        problem = (
            f"its sha256 {checksum} does not match the one recorded when it was written "
            f"({', '.join(candidate.recorded)}): the file changed after it was written"
        )
        if candidate.manifest is not None:
            problem += f" (the manifest: {candidate.manifest.described()}; it holds {check.rows} rows now)"
        return _Verdict(replace(check, problem=problem), None)
    return _Verdict(check, checksum)


def _recheck_if_rewritten(
    lake_root: Path,
    candidate: _Candidate,
    verdict: _Verdict,
    tables: dict[str, pa.Schema],
    manifest: dict[tuple[str, date, str], ManifestEntry],
) -> tuple[_Candidate, _Verdict] | None:
    """Under the partition lock: a writer may have replaced the file since it was frozen (None: gone)."""
    if not candidate.path.is_file():
        candidate.frozen.unlink()
        return None
    if candidate.path.samefile(candidate.frozen):
        return candidate, verdict
    fresh = _candidate(lake_root, candidate.table, candidate.path, candidate.frozen.parents[3], manifest)
    return fresh, _verify(fresh, tables[fresh.table], decode_all=True)


def _record_checksum(candidate: _Candidate, verdict: _Verdict) -> None:
    """A file written before checksums, every page just decoded: record its sha256 now (under the partition lock,
    the file unchanged since it was frozen). A lake that cannot be written keeps decoding it at every refresh."""
    if verdict.sha256 is None or read_checksums(candidate.path):
        return
    try:
        write_checksums(candidate.path, (verdict.sha256,))
    except OSError as exc:
        logger.warning(
            "%s: could not record its checksum (%s); it is decoded again at every refresh", candidate.path, exc
        )
