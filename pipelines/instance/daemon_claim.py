"""Who runs the dagster-daemon of an instance, so that a costbench command never starts one beside another.

`<instance>/daemon.lock` is flock'ed by the command that starts a daemon (running_daemon), and inherited by the
daemon's watchdog and the daemon itself (daemon_watchdog.py): the OS keeps it held for exactly as long as any of them
lives, however they end. The file records who holds it (the command, its pid, the daemon's process group, when the
daemon started) and, once the command has stopped it, when.

A command that claims the lock:
- waits up to `wait_s` for a daemon whose command died (its watchdog is stopping it: the grace and a poll), then
  refuses (InstanceInUse), naming the daemon's process group and its command;
- finds what that daemon left: a record never marked stopped means its command died. The runs and backfills
  submitted since that daemon started and left unfinished are marked cancelled (end_orphan), so that no later
  daemon carries them out in another command's environment, and that is said;
- finds a daemon costbench did not start (`make dagster`'s, another host's; other_daemon): a process on this host
  whose DAGSTER_HOME is the instance, else a heartbeat younger than DAEMON_ALIVE_S and newer than the last costbench
  daemon's end (a stopped daemon's last heartbeats stay young for a minute).
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

import dagster as dg
import orjson
from dagster._core.execution.backfill import BULK_ACTION_TERMINAL_STATUSES, BulkActionsFilter, BulkActionStatus

from endpoints.process_group import group_members, process_start
from pipelines.instance.stop_guard import InstanceInUse

DAEMON_LOCK_NAME = "daemon.lock"
DAEMON_ALIVE_S = 60.0  # a daemon whose last heartbeat is younger than this is taken to be running
MAX_RECORD_BYTES = 4096
_UNFINISHED = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
               dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING]  # fmt: skip


@dataclass(frozen=True, slots=True)
class DaemonRecord:
    """What daemon.lock says of the last daemon a costbench command started on the instance."""

    command: str  # "costbench demo", "costbench run"
    pid: int  # the command's
    pid_start: str | None  # process_start(pid): a reused pid is not the command
    group: int | None  # the daemon's process group (its watchdog's pid); None until it is started
    started_wall_s: float
    stopped_wall_s: float | None = None  # None while it runs, and forever when its command died first

    def describe(self) -> str:
        alive = self.pid_start is not None and process_start(self.pid) == self.pid_start
        members = group_members(self.group) if self.group is not None else []
        return (
            f"the dagster-daemon of {self.command} (pid {self.pid}, {'running' if alive else 'gone'}): process group "
            f"{self.group}, {len(members)} process(es)"
        )


@dataclass(frozen=True, slots=True)
class DaemonClaim:
    """daemon.lock, held by this command: no costbench-started daemon of the instance is alive but its own."""

    home: Path
    fd: int  # the locked descriptor: the watchdog and the daemon inherit it
    command: str
    orphan: DaemonRecord | None  # a daemon whose command died (stopped by its watchdog since): end_orphan
    quiet_since_wall_s: float  # heartbeats at or before this may be a stopped costbench daemon's


@contextmanager
def daemon_lock(home: Path, command: str, wait_s: float, report: Callable[[str], None]) -> Iterator[DaemonClaim]:
    """Held for the block; InstanceInUse when a daemon's group still holds it after `wait_s`."""
    fd = os.open(Path(home) / DAEMON_LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline, told = time.monotonic() + wait_s, False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    holder = _read(fd)
                    stop = f"kill -- -{holder.group}" if holder is not None and holder.group else "stop it"
                    raise InstanceInUse(
                        f"{_described(holder)} still holds the Dagster instance at {home} after {wait_s:.0f} s; a "
                        f"second daemon is never started beside it: {stop}, or give this command its own --dagster-home"
                    ) from None
                if not told:
                    report(f"waiting up to {wait_s:.0f} s for {_described(_read(fd))} to stop")
                    told = True
                time.sleep(0.2)
        previous = _read(fd)
        orphan = previous if previous is not None and previous.stopped_wall_s is None else None
        quiet = time.time() if orphan is not None else (previous.stopped_wall_s or 0.0) if previous else 0.0
        yield DaemonClaim(Path(home), fd, command, orphan, quiet)
    finally:
        os.close(fd)


def record_started(claim: DaemonClaim) -> DaemonRecord:
    """Written before the daemon starts: were this command to die from here on, the next one ends what it left."""
    record = DaemonRecord(claim.command, os.getpid(), process_start(os.getpid()), None, time.time())
    _write(claim.fd, record)
    return record


def record_group(claim: DaemonClaim, record: DaemonRecord, group: int) -> DaemonRecord:
    record = replace(record, group=group)
    _write(claim.fd, record)
    return record


def record_stopped(claim: DaemonClaim, record: DaemonRecord) -> None:
    _write(claim.fd, replace(record, stopped_wall_s=time.time()))


def end_orphan(instance: dg.DagsterInstance, claim: DaemonClaim) -> str | None:
    """Marks cancelled what the daemon of a command that died had not finished: every run and backfill submitted
    since it started. Returns what was done, in a sentence (None: no such daemon)."""
    orphan = claim.orphan
    if orphan is None:
        return None
    since = datetime.fromtimestamp(orphan.started_wall_s, timezone.utc)
    why = (
        f"the dagster-daemon of {orphan.command} (pid {orphan.pid}), which ended without stopping it, was stopped "
        "with its run workers by its watchdog"
    )
    backfills = [
        b
        for b in instance.get_backfills(filters=BulkActionsFilter(created_after=since))
        if b.status not in BULK_ACTION_TERMINAL_STATUSES
    ]
    for backfill in backfills:
        instance.update_backfill(backfill.with_status(BulkActionStatus.CANCELED))
    runs = instance.get_runs(filters=dg.RunsFilter(statuses=_UNFINISHED, created_after=since))
    for run in runs:
        instance.report_run_canceled(run, message=why)
    named = f" ({', '.join(r.run_id[:8] for r in runs[:10])})" if runs else ""
    return f"{why}: {len(runs)} unfinished run(s){named} and {len(backfills)} backfill(s) it left were marked cancelled"


def other_daemon(instance: dg.DagsterInstance, claim: DaemonClaim) -> str | None:
    """A running daemon of the instance that no costbench command started, in words; None when there is none."""
    local = local_daemons(claim.home)
    if local:
        return "a dagster-daemon not started by costbench (" + "; ".join(f"pid {p}: {c}" for p, c in local) + ")"
    now = time.time()
    beats = [
        b.timestamp
        for b in instance.get_daemon_heartbeats().values()
        if b.timestamp > claim.quiet_since_wall_s and now - b.timestamp < DAEMON_ALIVE_S
    ]
    if beats:
        age = now - max(beats)
        return (
            f"a dagster-daemon not started by costbench, on another host (none runs on this one; its last heartbeat "
            f"{age:.0f} s ago: one stopped just now stops counting {DAEMON_ALIVE_S - age:.0f} s from now)"
        )
    return None


def local_daemons(home: Path) -> list[tuple[int, str]]:
    """Processes on this host running `dagster-daemon run` (or `dagster dev`'s `python -m dagster._daemon run`)
    with DAGSTER_HOME naming this instance: (pid, command line)."""
    wanted = Path(home).resolve()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if not _runs_a_daemon(argv):
                continue
            env = dict(v.split(b"=", 1) for v in (entry / "environ").read_bytes().split(b"\0") if b"=" in v)
        except OSError:
            continue  # ended meanwhile, or another user's
        home_var = env.get(b"DAGSTER_HOME")
        if home_var and Path(os.fsdecode(home_var)).resolve() == wanted:
            found.append((int(entry.name), " ".join(os.fsdecode(a) for a in argv if a)[:200]))
    return found


def _runs_a_daemon(argv: list[bytes]) -> bool:
    """`dagster-daemon run ...` (the script, or Python running it) or `python -m dagster._daemon run ...`; not a
    command that merely names one among its arguments (the watchdog does)."""
    for index, arg in enumerate(argv[:3]):
        if arg.endswith(b"dagster-daemon") or (arg == b"dagster._daemon" and argv[index - 1 : index] == [b"-m"]):
            return argv[index + 1 : index + 2] == [b"run"]
    return False


def _described(holder: DaemonRecord | None) -> str:
    return holder.describe() if holder is not None else "a dagster-daemon (daemon.lock records no owner)"


def _read(fd: int) -> DaemonRecord | None:
    data = os.pread(fd, MAX_RECORD_BYTES, 0)
    try:
        raw = orjson.loads(data)
        return DaemonRecord(**raw) if isinstance(raw, dict) else None
    except (orjson.JSONDecodeError, TypeError):
        return None  # empty (never used), or not a record: nothing is known of a predecessor


def _write(fd: int, record: DaemonRecord) -> None:
    data = orjson.dumps(record)
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)
