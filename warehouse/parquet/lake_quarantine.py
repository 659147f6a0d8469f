"""Lake files a refresh found unfit, moved out of every view's glob into `<lake_root>/_quarantine`, with why.

Layout: `_quarantine/<table>/<week dir>/<scenario dir>/part-0.<ms>.parquet`, and beside it `part-0.<ms>.json`
(table, week, scenario, where it was, why, when) and the checksum recorded when it was written, if any
(`part-0.<ms>.parquet.sha256`). The record is written first, then the file moves with
one rename, so a kill between leaves a record without a file, which is ignored. Nothing here deletes a
quarantined file: someone looks at it, then writes the partition again (re-materializes it), which
brings its week back; the record stays as history. Paths are relative to the warehouse root (the lake
folder's parent), so a copied warehouse's records point into its own lake.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from datetime import date
from pathlib import Path

from warehouse.parquet.lake import QUARANTINE_DIR, parse_partition
from warehouse.parquet.lake_checksum import sidecar_of

_RECORD_SUFFIX = ".json"


@dataclass(frozen=True, slots=True)
class QuarantinedFile:
    table: str
    week_start: date | None  # None when the folder names are not a partition's (a stray file)
    scenario: str | None
    source_path: str  # where it was, relative to the warehouse root: lake/<table>/week=.../scenario=.../part-0.parquet
    quarantined_path: str  # where it is now, relative to the warehouse root
    reason: str
    quarantined_wall_s: float  # when it was moved (s since the Unix epoch)

    @property
    def message(self) -> str:
        week = self.week_start.isoformat() if self.week_start else "none"
        return (
            f"quarantined {self.source_path} (table {self.table}, week {week}, scenario {self.scenario or 'none'}): "
            f"{self.reason}; moved to {self.quarantined_path}. The other partitions were built; write this "
            "partition again to bring its week back"
        )


def quarantine_file(lake_root: Path, path: Path, reason: str, now_wall_s: float) -> QuarantinedFile:
    """Move `path` (a file under `lake_root/<table>/<week dir>/<scenario dir>/`) into the quarantine.

    The caller holds the partition's lock when the path is a partition's, so no writer races the move."""
    lake_root = Path(lake_root)
    relative = path.relative_to(lake_root)
    table, week_dir, scenario_dir = relative.parts[:3]
    parsed = parse_partition(table, week_dir, scenario_dir)
    folder = lake_root / QUARANTINE_DIR / table / week_dir / scenario_dir
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{Path(relative.name).stem}.{int(now_wall_s * 1000)}"
    while (folder / f"{stem}.parquet").exists() or (folder / f"{stem}{_RECORD_SUFFIX}").exists():
        stem += "-1"  # quarantined twice in one millisecond
    target = folder / f"{stem}.parquet"
    root = lake_root.parent
    record = QuarantinedFile(
        table=table,
        week_start=parsed[0] if parsed else None,
        scenario=parsed[1] if parsed else None,
        source_path=str(path.relative_to(root)),
        quarantined_path=str(target.relative_to(root)),
        reason=reason,
        quarantined_wall_s=now_wall_s,
    )
    record_path = folder / f"{stem}{_RECORD_SUFFIX}"
    tmp = folder / f".{stem}{_RECORD_SUFFIX}.tmp"
    tmp.write_text(json.dumps({**asdict(record), "week_start": parsed[0].isoformat() if parsed else None}))
    os.replace(tmp, record_path)
    os.replace(path, target)
    if sidecar_of(path).exists():  # its checksum goes with it, so the partition folder can go too
        os.replace(sidecar_of(path), sidecar_of(target))
    try:
        path.parent.rmdir()  # the partition folder, now empty: it is not a partition any more
    except OSError:
        pass
    return record


def list_quarantine(lake_root: Path) -> list[QuarantinedFile]:
    """Every quarantined file with its record, oldest first."""
    found: list[QuarantinedFile] = []
    quarantine = Path(lake_root) / QUARANTINE_DIR
    if not quarantine.is_dir():
        return found
    for record_path in quarantine.rglob(f"*{_RECORD_SUFFIX}"):
        if record_path.name.startswith(".") or not record_path.with_suffix(".parquet").is_file():
            continue  # a record being written, or one whose move never happened
        try:
            raw = json.loads(record_path.read_text())
            raw["week_start"] = date.fromisoformat(raw["week_start"]) if raw["week_start"] else None
            found.append(QuarantinedFile(**raw))
        except (ValueError, TypeError, KeyError):
            continue  # not a record this code wrote
    return sorted(found, key=lambda q: (q.quarantined_wall_s, q.quarantined_path))
