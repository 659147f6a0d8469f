"""A refresh's frozen copy of the lake: `<lake_root>/_snapshots/<id>/<table>/week=…/scenario=…/part-0.parquet`.

Each file is a hard link to the lake file the refresh checked, so it costs no space while the lake file
lives, and keeps the old bytes when a write replaces the partition (the write renames a new file over the
name; the link still holds the old one). The views of the database built from a snapshot read only it, so
a session reads one lake, the one its marts were built from, until it reconnects after a refresh.

A snapshot is marked superseded (`.superseded`, the wall time) when a refresh swaps in a newer database,
and removed by a later refresh once it has been superseded for longer than the keep time: a session
opened on the old database reads it until then. A snapshot no database uses (a refresh killed before its
swap) is removed by the next refresh.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

SNAPSHOTS_DIR = "_snapshots"  # table names start with a letter, so no table can be called this
_SUPERSEDED = ".superseded"


def freeze(live: Path, frozen: Path) -> None:
    """Hard-link `live` at `frozen` (replacing a link there): atomic, so it is one whole version of the file."""
    frozen.parent.mkdir(parents=True, exist_ok=True)
    frozen.unlink(missing_ok=True)
    os.link(live, frozen)


def mark_superseded(snapshot: Path, now_wall_s: float) -> None:
    """Called just before the swap: a refresh killed before it marks again next time, so the time is the last try's."""
    if snapshot.is_dir():
        (snapshot / _SUPERSEDED).write_text(f"{now_wall_s}\n")


def prune_snapshots(snapshots: Path, in_use: set[str], now_wall_s: float, keep_s: float) -> list[Path]:
    """Remove the snapshots not `in_use` that were superseded more than `keep_s` ago, or never used.

    The caller holds the refresh lock, so no refresh is filling one of them. Returns what was removed."""
    removed: list[Path] = []
    if not snapshots.is_dir():
        return removed
    for snapshot in sorted(p for p in snapshots.iterdir() if p.is_dir() and p.name not in in_use):
        try:
            superseded_wall_s: float | None = float((snapshot / _SUPERSEDED).read_text())
        except (FileNotFoundError, ValueError):
            superseded_wall_s = None  # no database was built on it
        if superseded_wall_s is None or now_wall_s - superseded_wall_s > keep_s:
            shutil.rmtree(snapshot, ignore_errors=True)
            removed.append(snapshot)
    return removed
