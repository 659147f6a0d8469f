"""What the lake's writers wrote: `<lake_root>/_manifest.jsonl`, one JSON line per partition file written.

A refresh checks every file it finds (warehouse/parquet/lake_audit.py), but a file that is gone is not found:
without a record of what was written, a deleted partition, or a whole deleted partition folder, took its week
out of every mart without a word. So `write_partition` appends a line for every file it writes (table, week,
scenario, rows, size, sha256, when), before it swaps the file in, as it records the sidecar checksum; each
refresh compares the lake with the latest line of every partition and reports the partitions written and gone
(the lake_missing table, the lake_intact check), and checks a file whose sidecar is gone against the sha256
here. A refresh records the partitions it finds that the manifest lacks (a lake written before it), as `seen`,
so from then on they are missed too. A partition removed on purpose is recorded as `forgotten`
(`python -m warehouse forget`); writing it again brings it back.

Lines are appended under an flock on the file, each one write and fsync: writers of different partitions
interleave whole lines. A line that does not parse (a write cut by a crash) is skipped. The manifest lives
outside every table's folder, so no view's glob reads it.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import date, datetime, timezone
from pathlib import Path

MANIFEST_FILE = "_manifest.jsonl"  # table names start with a letter, so no table's folder can be called this
WRITTEN, SEEN, FORGOTTEN = "written", "seen", "forgotten"
logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    table: str
    week_start: date
    scenario: str
    event: str  # written (a writer wrote it) | seen (a refresh found it unrecorded) | forgotten (removed on purpose)
    recorded_wall_s: float  # when (s since the Unix epoch)
    rows: int | None = None  # rows in the file (None: forgotten)
    size_bytes: int | None = None
    sha256: str | None = None

    @property
    def key(self) -> tuple[str, date, str]:
        return self.table, self.week_start, self.scenario

    @property
    def live(self) -> bool:
        """The partition should be in the lake: written or seen, not forgotten since."""
        return self.event != FORGOTTEN

    def described(self) -> str:
        """Its last record in words: 'written 2025-03-10 06:00:12 UTC with 400 rows (18,352 bytes)'."""
        when = datetime.fromtimestamp(self.recorded_wall_s, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        verb = "written" if self.event == WRITTEN else "first found by a refresh"
        size = "" if self.size_bytes is None else f" ({self.size_bytes:,} bytes)"
        return f"{verb} {when} with {self.rows} rows{size}"


def manifest_path(lake_root: Path) -> Path:
    return Path(lake_root) / MANIFEST_FILE


def record(lake_root: Path, entries: Iterable[ManifestEntry]) -> None:
    """Append `entries`, one line each, in one write under the manifest's flock, then fsync."""
    text = "".join(json.dumps(_row(e), sort_keys=True) + "\n" for e in entries)
    if not text:
        return
    path = manifest_path(lake_root)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(path, "a", encoding="utf-8") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
    except OSError as exc:  # a full disk's bare "[Errno 28]" names no file: this one names the manifest
        raise OSError(exc.errno, f"{exc.strerror}: could not append to the lake's manifest", str(path)) from exc


def latest_entries(lake_root: Path) -> dict[tuple[str, date, str], ManifestEntry]:
    """Each partition's latest line (table, week, scenario) -> entry; {} when there is no manifest yet."""
    path = manifest_path(lake_root)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return {}
    found: dict[tuple[str, date, str], ManifestEntry] = {}
    skipped = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            entry = ManifestEntry(**{**raw, "week_start": date.fromisoformat(raw["week_start"])})
        except (ValueError, TypeError, KeyError):
            skipped += 1  # a line cut by a crash mid-append, or not this code's
            continue
        found[entry.key] = entry
    if skipped:
        logger.warning("%s: skipped %d line(s) that do not parse", path, skipped)
    return found


def _row(entry: ManifestEntry) -> dict:
    return {**asdict(entry), "week_start": entry.week_start.isoformat()}
