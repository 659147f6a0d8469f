"""What a teardown left behind (Linux /proc), for the tests: a group's living members (endpoints/process_group.py's
group_members) and the process listening on a port."""

from __future__ import annotations

import os
from pathlib import Path

from endpoints.process_group import group_members as group_members  # re-exported for the tests


def listener_pid(url: str) -> int:
    """The pid listening on the URL's port (Linux /proc/net/tcp and the sockets in /proc/<pid>/fd)."""
    port = int(url.rsplit(":", 1)[1])
    inodes = {line.split()[9] for line in Path("/proc/net/tcp").read_text().splitlines()[1:]
              if int(line.split()[1].split(":")[1], 16) == port and line.split()[3] == "0A"}  # fmt: skip
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            links = [os.readlink(fd) for fd in fd_dir.iterdir()]
        except OSError:
            continue
        if any(link.startswith("socket:[") and link[8:-1] in inodes for link in links):
            return int(fd_dir.parent.name)
    raise AssertionError(f"nothing listens on {url}")
