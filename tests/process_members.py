"""The living members of a process group (Linux /proc), for tests that check a teardown left nothing behind."""

from __future__ import annotations

import os
from pathlib import Path


def group_members(pgid: int) -> list[int]:
    """Every living process in the group: field 5 of /proc/<pid>/stat is its process group; zombies have ended."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # ended between the listing and the read
        fields = text[text.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(stat.parent.name))
    return members


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
