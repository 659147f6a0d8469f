"""A small file that a reader sees whole or not at all: written under a hidden temporary name beside it,
then renamed into place (a rename within one folder is atomic on POSIX)."""

from __future__ import annotations

import os
from pathlib import Path


def write_bytes_atomically(path: Path, data: bytes) -> Path:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return path
