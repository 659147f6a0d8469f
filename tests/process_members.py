"""What a teardown left behind (Linux /proc), for the tests: a group's living members (endpoints/process_group.py's
group_members) and the process listening on a port."""

from __future__ import annotations

import os
import time
from pathlib import Path

from endpoints.process_group import group_members as group_members  # re-exported for the tests


def listener_pid(url: str, timeout_s: float = 5.0) -> int:
    """The pid listening on the URL's port (Linux /proc/net/tcp and the sockets in /proc/<pid>/fd).

    Both are read while the processes work: a busy server closes an fd between the listing of its fd folder and the
    readlink of it (skipped, not the whole process), and /proc/net/tcp is read page by page while it changes, so an
    entry can be missed once; the scan is tried again until `timeout_s`."""
    port = int(url.rsplit(":", 1)[1])
    deadline = time.monotonic() + timeout_s
    while True:
        pid = _listener_once(port)
        if pid is not None:
            return pid
        if time.monotonic() > deadline:
            raise AssertionError(f"nothing listens on {url}")
        time.sleep(0.1)


def _listener_once(port: int) -> int | None:
    inodes = {line.split()[9] for line in Path("/proc/net/tcp").read_text().splitlines()[1:]
              if int(line.split()[1].split(":")[1], 16) == port and line.split()[3] == "0A"}  # fmt: skip
    if not inodes:
        return None
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            fds = list(fd_dir.iterdir())
        except OSError:
            continue  # the process ended, or is not ours to read
        for fd in fds:
            try:
                link = os.readlink(fd)
            except OSError:
                continue  # closed since the listing
            if link.startswith("socket:[") and link[8:-1] in inodes:
                return int(fd_dir.parent.name)
    return None
