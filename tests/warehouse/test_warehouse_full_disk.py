"""A lake on a full disk: the write fails saying so and where, and what was stored before is what readers see.

The disk is a real 4 MiB tmpfs, mounted in a private mount namespace held by a child process (`unshare
--mount`), so the mount can never outlive the test: the child ends when the test closes its stdin, or when
the test's process dies. The test reaches the mount through /proc/<child>/root. It needs root and util-linux's
`unshare`, as CI's machine has; without them it fails and says so rather than skip.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from warehouse.parquet.lake import (
    PART_FILE,
    STAGING_DIR,
    list_partitions,
    partition_path,
    read_partition,
    write_partition,
)

DISK_BYTES = 4 * 1024 * 1024
LEFT_FREE_BYTES = 64 * 1024  # less than the new partition needs (about 2.4 MB of random floats)
WEEK = date(2026, 11, 16)


@pytest.fixture
def small_disk(tmp_path) -> Iterator[Path]:
    """An empty 4 MiB filesystem of its own, seen by this process at the returned path."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.fail("this test mounts a small tmpfs: it needs root and util-linux's unshare (CI runs as root)")
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    holder = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c",
         f"mount -t tmpfs -o size={DISK_BYTES} tmpfs '{mount_point}' && echo mounted && read _"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        if holder.stdout is None or holder.stdout.readline() != b"mounted\n":
            holder.wait(timeout=10)
            pytest.fail(f"could not mount a tmpfs in a private namespace: {holder.stderr.read().decode().strip()}")
        yield Path(f"/proc/{holder.pid}/root") / mount_point.relative_to("/")
    finally:
        if holder.stdin is not None:
            holder.stdin.close()  # `read` returns, sh exits, the namespace and its mount go with it
        try:
            holder.wait(timeout=10)
        except subprocess.TimeoutExpired:
            holder.kill()
            holder.wait()


def _fill(disk: Path, leave_bytes: int) -> Path:
    """Writes a file until the disk is full, then gives `leave_bytes` back."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as out:
        try:
            while True:
                out.write(b"\0" * 65536)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    os.truncate(filler, filler.stat().st_size - leave_bytes)
    return filler


def _stored(lake: Path) -> dict[str, bytes]:
    """Every file a reader could see: the lake without its staging area (locks, temporary files)."""
    return {
        str(p.relative_to(lake)): p.read_bytes()
        for p in sorted(lake.rglob("*"))
        if p.is_file() and p.relative_to(lake).parts[0] != STAGING_DIR
    }


def _duckdb_rows(lake: Path) -> int:
    with duckdb.connect() as con:
        glob = str(lake / "requests" / "*" / "*" / "*.parquet")
        return con.execute("SELECT count(*) FROM read_parquet(?, hive_partitioning = true)", [glob]).fetchone()[0]


def test_a_full_disk_fails_the_write_naming_the_partition_and_keeps_what_was_stored(small_disk):
    lake = small_disk / "lake"
    before = pa.table({"value": np.arange(100)})
    write_partition(lake, "requests", WEEK, "chat", before)
    stored = _stored(lake)
    filler = _fill(small_disk, LEFT_FREE_BYTES)

    bigger = pa.table({"value": np.random.default_rng(0).random(300_000)})
    for scenario in ("chat", "code"):  # a partition stored before, and a new one
        with pytest.raises(OSError) as failed:
            write_partition(lake, "requests", WEEK, scenario, bigger)
        assert failed.value.errno == errno.ENOSPC
        message = str(failed.value)
        assert f"No space left on device: the disk under {lake} is full" in message
        assert str(partition_path(lake, "requests", WEEK, scenario) / PART_FILE) in message

    # Nothing half-written is visible, nothing stored is lost, and the staging area holds no leftover.
    assert _stored(lake) == stored
    assert read_partition(lake, "requests", WEEK, "chat").equals(before)
    assert [p.scenario for p in list_partitions(lake, "requests")] == ["chat"]
    assert _duckdb_rows(lake) == 100
    assert not any((lake / STAGING_DIR / "tmp").iterdir())

    # Space freed: the same write goes through.
    filler.unlink()
    write_partition(lake, "requests", WEEK, "chat", bigger)
    assert read_partition(lake, "requests", WEEK, "chat").num_rows == 300_000
