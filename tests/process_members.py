"""The living members of a process group (Linux /proc), for tests that check a teardown left nothing behind."""

from __future__ import annotations

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
