"""The lease file of an endpoint that outlives the step that started it, and how to end it.

A sharded replay starts its server in one step and stops it in another, so the server's process group
is written down where every step and the lease sensor can find it: `<leases>/<owner run id>.json`.
The file also names the process that runs the owning run (host and pid), so an owner killed outright
(SIGKILL, OOM) can be told from one that is still replaying. A fleet (its replicas and the router) is one
process group led by its first replica (endpoints/provision.py), so the lease's one group stops all of it.

A pid, and a process group's id, can be handed to another process once theirs has ended, so the lease also
records when each started (endpoints/process_group.py: process_start): a living process with the owner's pid
but another start is not the owner, and a process group whose leader started at another moment is not the
server's and is never signalled. A file that does not read as a lease is set aside whole, not acted on.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, fields
from pathlib import Path

import orjson

from common.atomic_file import write_bytes_atomically
from endpoints.process_group import HAS_PROC, process_start
from endpoints.provision import stop_detached

UNREADABLE_DIR = "unreadable"  # beside the leases: files that did not read as one, kept for a person to look at


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    owner_run_id: str  # the orchestrator's run (a Dagster run id)
    endpoint: str
    process_group: int | None  # None: attached, nothing of ours to stop
    host: str  # where the process group and the owner live
    owner_pid: int  # the process that orchestrates the owning run
    # process_start() of the owner and of the group's leader when the lease was written; None in leases of
    # releases before these were recorded, and where /proc is not there to tell.
    owner_start: str | None = None
    group_start: str | None = None

    def owner_alive(self) -> bool | None:
        """Whether the owner process still exists; None when it lives on another host (cannot tell)."""
        if self.host != socket.gethostname():
            return None
        try:
            os.kill(self.owner_pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # exists, someone else's: the start time tells whether it is the owner
        if not HAS_PROC:
            return True
        started = process_start(self.owner_pid)  # None: a zombie, which has ended
        return started is not None and (self.owner_start is None or started == self.owner_start)

    def group_is_the_servers(self) -> bool:
        """Whether `process_group` still names the server's group (on this host).

        A leader that exited leaves its members in the group, and the kernel hands out no pid that a living
        group's id still uses; so a living process with the group's id that started at another moment leads
        some other group, which got the id after the server's group had ended.
        """
        if self.process_group is None or self.group_start is None:
            return self.process_group is not None
        started = process_start(self.process_group)
        return started is None or started == self.group_start


class LeaseFileError(ValueError):
    """A lease file that does not read as a lease; the message names the file and what is wrong."""

    def __init__(self, path: Path, what: str) -> None:
        super().__init__(f"{path}: {what}")
        self.path = path


def new_lease(owner_run_id: str, endpoint: str, process_group: int | None, owner_pid: int) -> LeaseRecord:
    """The lease of a server just started on this host (its group) by the run whose worker is `owner_pid`."""
    return LeaseRecord(
        owner_run_id, endpoint, process_group, socket.gethostname(), owner_pid,
        owner_start=process_start(owner_pid),
        group_start=None if process_group is None else process_start(process_group),
    )  # fmt: skip


def lease_path(leases_dir: Path, owner_run_id: str) -> Path:
    return Path(leases_dir) / f"{owner_run_id}.json"


def write_lease(leases_dir: Path, record: LeaseRecord) -> Path:
    path = lease_path(leases_dir, record.owner_run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_bytes_atomically(path, orjson.dumps(record, option=orjson.OPT_INDENT_2))


_TYPES = {"owner_run_id": str, "endpoint": str, "process_group": int, "host": str, "owner_pid": int,
          "owner_start": str, "group_start": str}  # fmt: skip
_OPTIONAL = {"process_group", "owner_start", "group_start"}


def parse_lease(path: Path) -> LeaseRecord:
    try:
        data = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise LeaseFileError(path, f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise LeaseFileError(path, f"a JSON {type(data).__name__}, not an object")
    names = {f.name for f in fields(LeaseRecord)}
    missing = sorted(names - _OPTIONAL - data.keys())
    unknown = sorted(data.keys() - names)
    if missing or unknown:
        raise LeaseFileError(path, f"missing {missing or 'nothing'}, unknown keys {unknown or 'none'}")
    for name, value in data.items():
        wanted = _TYPES[name]
        if not (value is None and name in _OPTIONAL) and (type(value) is not wanted):
            raise LeaseFileError(path, f"{name} is {value!r:.60}, not a {wanted.__name__}")
    return LeaseRecord(**data)


@dataclass(frozen=True, slots=True)
class LeaseScan:
    leases: list[LeaseRecord]
    unreadable: list[LeaseFileError]


def scan_leases(leases_dir: Path) -> LeaseScan:
    """Every lease in the folder, and an error for each file that is not one (the others are still read)."""
    leases, unreadable = [], []
    if Path(leases_dir).is_dir():
        for path in sorted(Path(leases_dir).glob("*.json")):
            try:
                leases.append(parse_lease(path))
            except FileNotFoundError:
                continue  # ended by another process between the listing and the read
            except LeaseFileError as exc:
                unreadable.append(exc)
    return LeaseScan(leases, unreadable)


def read_leases(leases_dir: Path) -> list[LeaseRecord]:
    return scan_leases(leases_dir).leases


def set_aside(path: Path) -> Path:
    """Moves an unreadable lease file into UNREADABLE_DIR beside it (kept whole: a person decides)."""
    target = path.parent / UNREADABLE_DIR / path.name
    target.parent.mkdir(exist_ok=True)
    os.replace(path, target)
    return target


def end_lease(leases_dir: Path, owner_run_id: str, grace_s: float = 15.0) -> bool:
    """Stop the leased server's whole process group and remove the file; False when there was no lease.

    Idempotent, and safe to call from two places at once (a failure hook and the lease sensor). A group
    id now used by another group (LeaseRecord.group_is_the_servers) is not signalled: the server is gone.
    """
    path = lease_path(leases_dir, owner_run_id)
    try:
        record = parse_lease(path)
    except FileNotFoundError:
        return False
    if record.group_is_the_servers():
        stop_detached(record.process_group, grace_s, host=record.host)  # another host's group is not ours
    path.unlink(missing_ok=True)
    return True
