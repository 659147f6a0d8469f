"""The sha256 of each lake file, recorded when it is written, in a sidecar beside it: `part-0.parquet.sha256`.

The sidecar is in `sha256sum` format (`<hex>  part-0.parquet`, one line per accepted checksum), so
`sha256sum -c part-0.parquet.sha256` checks a file by hand. A write records the new file's checksum before
it swaps the file in, keeping the old one's beside it, and drops the old one after the swap: a kill between
leaves two lines, either file passes, and nothing else can. A refresh (warehouse/parquet/lake_audit.py)
recomputes every file's checksum, so a file changed after it was written, even with its size and mtime
put back, is caught by the next refresh.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

SUFFIX = ".sha256"


def sha256_of(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def sidecar_of(data_file: Path) -> Path:
    return data_file.with_name(data_file.name + SUFFIX)


def read_checksums(data_file: Path) -> tuple[str, ...]:
    """The checksums recorded for `data_file`; () when none were (a file written before checksums)."""
    try:
        text = sidecar_of(data_file).read_text()
    except FileNotFoundError:
        return ()
    return tuple(line.split()[0] for line in text.splitlines() if line.strip())


def write_checksums(data_file: Path, checksums: tuple[str, ...]) -> None:
    """Replace the sidecar in one rename; the caller holds the partition's lock."""
    sidecar = sidecar_of(data_file)
    tmp = sidecar.with_name(f".{sidecar.name}.{os.getpid()}.tmp")
    unique = tuple(dict.fromkeys(checksums))
    try:
        with open(tmp, "w") as handle:
            handle.writelines(f"{checksum}  {data_file.name}\n" for checksum in unique)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, sidecar)
    finally:
        tmp.unlink(missing_ok=True)  # gone already once renamed; a full disk leaves the old sidecar whole
