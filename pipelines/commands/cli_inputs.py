"""Checks of what the user typed, made before any work: option values argparse cannot check by type, and
output paths, so a command that cannot write its result says so at once (naming the option and the path)
instead of failing after reading a week of traffic."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from pipelines.commands.cli_errors import CommandInputError


def positive_int(text: str) -> int:
    """argparse type: an integer > 0 (argparse reports a refusal as `argument --flag: ...`)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer > 0, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def _nearest_existing(path: Path) -> Path:
    """`path` itself if it exists, else its closest existing ancestor (missing folders are created later)."""
    for candidate in (path, *path.parents):
        if os.path.lexists(candidate):
            return candidate
    return Path(".")


def _check_writable_folder(folder: Path, option: str, path: Path) -> None:
    """Create and remove a hidden file in `folder`: the only test that also holds for root and read-only mounts."""
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".costbench-write-check-")
    except OSError as exc:
        raise CommandInputError(f"{option} {path}: cannot write in {folder}: {exc.strerror or exc}") from None
    os.close(fd)
    os.unlink(probe)


def check_output_file(path: Path, option: str) -> None:
    """`path` can become a file: not a folder, and its folder (or the closest one that exists) is a writable folder."""
    if path.is_dir():
        example = path / "out.parquet"
        raise CommandInputError(f"{option} {path}: is a folder; give the output file's name, e.g. {example}")
    folder = _nearest_existing(path.parent)
    if not folder.is_dir():
        raise CommandInputError(f"{option} {path}: {folder} is a file, not a folder")
    _check_writable_folder(folder, option, path)


def check_output_folder(path: Path, option: str) -> None:
    """`path` is, or can become, a folder this process can write in."""
    existing = _nearest_existing(path)
    if not existing.is_dir():
        where = "is a file" if existing == path else f"is under {existing}, which is a file"
        raise CommandInputError(f"{option} {path}: {where}, not a folder")
    _check_writable_folder(existing, option, path)
