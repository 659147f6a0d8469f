"""The lease file of an endpoint that outlives the step that started it, and how to end it.

A sharded replay starts its server in one step and stops it in another, so the server's process group
is written down where every step and the lease sensor can find it: `<leases>/<owner run id>.json`.
The file also names the process that runs the owning run (host and pid), so an owner killed outright
(SIGKILL, OOM) can be told from one that is still replaying. A fleet (its replicas and the router) is one
process group led by its first replica (endpoints/provision.py), so the lease's one group stops all of it.

A pid, and a process group's id, can be handed to another process once theirs has ended, so the lease also
records when each started (endpoints/process_group.py: process_start): a living process with the owner's pid
but another start is not the owner. A process group is signalled only when it is proven to be the server's
(check_group): its leader is the process the lease recorded (same pid, same start, still leading the group).
Group 0, 1, the groups and sessions of the signalling process and its ancestors (the daemon, the terminal), a
group a lease records no leader's start for, and a group whose leader has exited (its id may have been handed to
an unrelated program's group since, which daemonizing also leaves leaderless) are never signalled: such a lease
is set aside into `unproven/`, not acted on, and its group's members are named for a person to stop. A file
that does not read as a lease (torn, another release's shape, a directory or FIFO named *.json) is set aside
whole into `unreadable/`; a FIFO is never opened, and no more than MAX_LEASE_BYTES of a file is read.
"""

from __future__ import annotations

import enum
import os
import socket
import stat
import time
from dataclasses import dataclass, fields
from pathlib import Path

import orjson

from common.atomic_file import write_bytes_atomically
from endpoints.process_group import HAS_PROC, group_members, lineage_groups, process_group_of, process_start
from endpoints.provision import stop_detached

UNREADABLE_DIR = "unreadable"  # beside the leases: files that did not read as one, kept for a person to look at
UNPROVEN_DIR = "unproven"  # beside the leases: leases whose process group nothing proves is the server's
MAX_LEASE_BYTES = 64 * 1024  # a lease is a few hundred bytes: a bigger file is not one, and is not read whole


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


class GroupVerdict(enum.Enum):
    SERVERS = "the server's"  # proven: it is signalled
    GONE = "gone"  # nothing of the server's group is left: the lease ends, nothing is signalled
    UNPROVEN = "unproven"  # nothing proves whose group it is: the lease is set aside, nothing is signalled
    NOT_HERE = "not here"  # attached (no group of its own), or on another host: nothing to signal from here


@dataclass(frozen=True, slots=True)
class GroupCheck:
    verdict: GroupVerdict
    why: str  # one clause, for the log


def check_group(record: LeaseRecord) -> GroupCheck:
    """Whether the lease's process group may be signalled from this process, and why (or why not).

    The kernel hands out no pid that a living process or group still uses as its id: so a living process with
    the group's id that started at another moment means the server's group has ended.
    """
    group, leader = record.process_group, record.group_start
    if group is None:
        return GroupCheck(GroupVerdict.NOT_HERE, "attached: the lease names no process group")
    if record.host != socket.gethostname():
        return GroupCheck(GroupVerdict.NOT_HERE, f"its process group lives on host {record.host}")
    if group <= 1:
        return GroupCheck(GroupVerdict.UNPROVEN, f"process group {group} is never a server's (0 is the signaller's "
                          "own group, 1 init's, a negative one every process)")  # fmt: skip
    if group in lineage_groups():
        return GroupCheck(GroupVerdict.UNPROVEN, f"process group {group} is this process's own, or its daemon's or "
                          "an ancestor's group or session")  # fmt: skip
    if leader is None or not HAS_PROC:
        return GroupCheck(GroupVerdict.UNPROVEN, "the lease records no start of its group's leader (a lease of an "
                          f"older release), so nothing proves process group {group} is the server's")  # fmt: skip
    started = process_start(group)
    if started is not None:
        if started != leader:
            return GroupCheck(GroupVerdict.GONE, f"pid {group} is now another process (started {started}, the "
                              f"server's leader {leader}): the server's group has ended")  # fmt: skip
        if process_group_of(group) != group:
            return GroupCheck(GroupVerdict.UNPROVEN, f"the server's leader (pid {group}) no longer leads process "
                              f"group {group}")  # fmt: skip
        return GroupCheck(GroupVerdict.SERVERS, f"its leader (pid {group}) started at {leader}, as the lease records")
    members = group_members(group)
    if not members:
        return GroupCheck(GroupVerdict.GONE, f"no process is left in process group {group}")
    named = ", ".join(f"{pid} ({_command_of(pid)})" for pid in members[:8])
    return GroupCheck(GroupVerdict.UNPROVEN, f"the server's leader (pid {group}) has exited, so nothing proves the "
                      f"{len(members)} process(es) left in process group {group} are the server's: {named}; if they "
                      f"are, stop them (kill -- -{group})")  # fmt: skip


def _command_of(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "ended"
    return " ".join(os.fsdecode(a) for a in argv if a)[:120] or "?"


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


def _read_lease_bytes(path: Path) -> bytes:
    """The file's bytes, if it is a regular file of at most MAX_LEASE_BYTES. Anything else named *.json (a
    directory, a FIFO, a socket, a device, a link) is refused from its lstat, before it is opened: a FIFO opened
    for reading blocks until someone writes to it. FileNotFoundError: ended meanwhile."""
    mode = os.lstat(path).st_mode
    if not stat.S_ISREG(mode):
        raise LeaseFileError(path, f"not a regular file (a {_file_kind(mode)}); not opened")
    try:
        # O_NONBLOCK and O_NOFOLLOW: a FIFO or a link put in its place since the lstat is neither waited on nor
        # followed; fstat says what was opened.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise LeaseFileError(path, f"cannot be opened: {exc.strerror or exc}") from None
    try:
        opened = os.fstat(fd).st_mode
        if not stat.S_ISREG(opened):
            raise LeaseFileError(path, f"not a regular file (a {_file_kind(opened)})")
        chunks, size = [], 0
        while size <= MAX_LEASE_BYTES:
            chunk = os.read(fd, MAX_LEASE_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > MAX_LEASE_BYTES:
        raise LeaseFileError(path, f"more than {MAX_LEASE_BYTES:,} bytes: not a lease (one is a few hundred)")
    return b"".join(chunks)


def _file_kind(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO"), (stat.S_ISLNK, "symbolic link"),
             (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"))  # fmt: skip
    return next((name for test, name in kinds if test(mode)), "special file")


def parse_lease(path: Path) -> LeaseRecord:
    try:
        data = orjson.loads(_read_lease_bytes(path))
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
    if data["owner_pid"] < 1:
        raise LeaseFileError(path, f"owner_pid is {data['owner_pid']}, not a process id")
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


def set_aside(path: Path, folder: str = UNREADABLE_DIR) -> Path:
    """Moves a lease file (or whatever has its name) into `folder` beside it, kept whole: a person decides. An
    earlier file of the same name there is kept too: this one gets the moment's suffix."""
    target = path.parent / folder / path.name
    target.parent.mkdir(exist_ok=True)
    if os.path.lexists(target):
        target = target.with_name(f"{path.name}.{time.time_ns()}")
    os.replace(path, target)
    return target


@dataclass(frozen=True, slots=True)
class LeaseEnd:
    """What end_lease did with a lease: its group signalled (check.verdict SERVERS), found gone or elsewhere, or
    the lease set aside unsignalled (UNPROVEN: `set_aside_to` says where)."""

    record: LeaseRecord
    check: GroupCheck
    set_aside_to: Path | None = None

    @property
    def signalled(self) -> bool:
        return self.check.verdict is GroupVerdict.SERVERS


def end_lease(leases_dir: Path, owner_run_id: str, grace_s: float = 15.0) -> LeaseEnd | None:
    """Stop the leased server's whole process group and remove the file; None when there was no lease.

    Idempotent, and safe to call from two places at once (a failure hook and the lease sensor). Only a group
    proven to be the server's (check_group) is signalled; a lease whose group nothing proves is moved into
    UNPROVEN_DIR, unsignalled, for a person to look at.
    """
    path = lease_path(leases_dir, owner_run_id)
    try:
        record = parse_lease(path)
    except FileNotFoundError:
        return None
    check = check_group(record)
    if check.verdict is GroupVerdict.UNPROVEN:
        try:
            return LeaseEnd(record, check, set_aside(path, UNPROVEN_DIR))
        except FileNotFoundError:
            return None  # ended by another process meanwhile
    if check.verdict is GroupVerdict.SERVERS:
        stop_detached(record.process_group, grace_s, host=record.host)
    path.unlink(missing_ok=True)
    return LeaseEnd(record, check)
