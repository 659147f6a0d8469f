"""A small file that a reader sees whole or not at all: written under a hidden temporary name beside it,
then renamed into place (a rename within one folder is atomic on POSIX). The temporary name is the writer's own
(process and thread), so writers of one path at once each rename a whole file and the last one wins."""

from __future__ import annotations

import os
import threading
from pathlib import Path


def write_bytes_atomically(path: Path, data: bytes) -> Path:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return path
