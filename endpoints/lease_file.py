"""The lease file of an endpoint that outlives the step that started it, and how to end it.

A sharded replay starts its server in one step and stops it in another, so the server's process group
is written down where every step and the lease sensor can find it: `<leases>/<owner run id>.json`.
The file also names the process that runs the owning run (host and pid), so an owner killed outright
(SIGKILL, OOM) can be told from one that is still replaying.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

import orjson

from common.atomic_file import write_bytes_atomically
from endpoints.provision import stop_detached


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    owner_run_id: str  # the orchestrator's run (a Dagster run id)
    endpoint: str
    process_group: int | None  # None: attached, nothing of ours to stop
    host: str  # where the process group and the owner live
    owner_pid: int  # the process that orchestrates the owning run

    def owner_alive(self) -> bool | None:
        """Whether the owner process still exists; None when it lives on another host (cannot tell)."""
        if self.host != socket.gethostname():
            return None
        try:
            os.kill(self.owner_pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True  # exists, someone else's
        return True


def lease_path(leases_dir: Path, owner_run_id: str) -> Path:
    return Path(leases_dir) / f"{owner_run_id}.json"


def write_lease(leases_dir: Path, record: LeaseRecord) -> Path:
    path = lease_path(leases_dir, record.owner_run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_bytes_atomically(path, orjson.dumps(record, option=orjson.OPT_INDENT_2))


def read_leases(leases_dir: Path) -> list[LeaseRecord]:
    if not Path(leases_dir).is_dir():
        return []
    return [LeaseRecord(**orjson.loads(p.read_bytes())) for p in sorted(Path(leases_dir).glob("*.json"))]


def end_lease(leases_dir: Path, owner_run_id: str, grace_s: float = 15.0) -> bool:
    """Stop the leased server's whole process group and remove the file; False when there was no lease.

    Idempotent, and safe to call from two places at once (a failure hook and the lease sensor).
    """
    path = lease_path(leases_dir, owner_run_id)
    try:
        record = LeaseRecord(**orjson.loads(path.read_bytes()))
    except FileNotFoundError:
        return False
    stop_detached(record.process_group, grace_s, host=record.host)  # another host's group is not ours to signal
    path.unlink(missing_ok=True)
    return True
