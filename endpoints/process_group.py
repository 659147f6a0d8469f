"""A server process in its own process group, and a teardown that reaches every process in it.

The server gets its own session, so a Ctrl-C in the terminal reaches only costbench, whose teardown
then stops the whole group (a router's workers, a container shim, SGLang's scheduler processes).
SIGTERM to costbench would end Python without running any `finally`: `terminate_on_sigterm` turns
it into an exception for the span of a launch, so the teardown runs then too.

A fleet (several workers and a router) is one process group, so a lease naming one group stops all of it.
Its members cannot have a session of their own: a process may only join a group of its own session. Its
group is a new one in costbench's session instead, never the terminal's foreground group, so Ctrl-C still
reaches only costbench.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path


class TerminatedError(SystemExit):
    """SIGTERM arrived while a server was up (a SystemExit, so nothing swallows it as an ordinary error)."""

    def __init__(self) -> None:
        super().__init__(128 + signal.SIGTERM)


def _start_logged(command: Sequence[str], log_path: Path, extra_env: Mapping[str, str], **grouping) -> subprocess.Popen:
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            list(command),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **extra_env},
            **grouping,
        )


def start_in_own_group(command: Sequence[str], log_path: Path, extra_env: Mapping[str, str]) -> subprocess.Popen:
    return _start_logged(command, log_path, extra_env, start_new_session=True)


def start_in_group(
    command: Sequence[str], log_path: Path, extra_env: Mapping[str, str], group: int | None
) -> subprocess.Popen:
    """A fleet's member: `group` None starts a new process group led by this process (its pid is the
    group id), else the process joins `group` (which must still have a member)."""
    return _start_logged(command, log_path, extra_env, process_group=0 if group is None else group)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process we cannot signal took the id: ours are gone
        return False
    return True


def process_start(pid: int) -> str | None:
    """Which process this pid names: the boot and the clock tick it started at (Linux /proc), so a pid or a
    process group id handed to another process since can be told apart. None: no such process, one that has
    ended (a zombie, whose exit status its parent has not collected yet), or no /proc to tell."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Fields 3 (state) and 22 (starttime); the command name (field 2) is in parentheses and may hold either.
    after_name = stat[stat.rindex(")") + 2 :].split()
    return None if after_name[0] in ("Z", "X") else f"{boot}:{after_name[19]}"


HAS_PROC = Path("/proc/self/stat").exists()


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat from field 3 (state) on: [0] state, [1] parent, [2] process group, [3] session. None: no
    such process, or a zombie. The command name (field 2) is in parentheses and may hold anything."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    after_name = stat[stat.rindex(")") + 2 :].split()
    return None if after_name[0] in ("Z", "X") else after_name


def process_group_of(pid: int) -> int | None:
    """The process group of a living process; None: no such process, or a zombie."""
    fields = _stat_fields(pid)
    return None if fields is None else int(fields[2])


def lineage_groups() -> set[int]:
    """The process groups and sessions of this process and of every ancestor up to init: a signal to any of
    them could reach this process, the daemon that runs it or the terminal it was started from."""
    groups = {os.getpgrp(), os.getsid(0)}
    pid = os.getppid()
    while pid > 1:
        fields = _stat_fields(pid)
        if fields is None:
            break
        groups.update((int(fields[2]), int(fields[3])))
        pid = int(fields[1])
    return groups


def group_members(pgid: int) -> list[int]:
    """The living processes of a process group (Linux /proc; zombies have ended), for whoever must tell what is
    left in a group before it signals it or once it has."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and process_group_of(int(entry.name)) == pgid:
            members.append(int(entry.name))
    return members


def _reap(pgid: int) -> None:
    # When this process started the group (the same step that stops it), its members' zombies keep the
    # group alive until reaped (a fleet has several); members started elsewhere were re-parented and are
    # reaped there. waitpid(-pgid) collects any child of ours in that group.
    try:
        while os.waitpid(-pgid, os.WNOHANG)[0] != 0:
            pass
    except ChildProcessError:
        pass


def stop_group_by_id(pgid: int, grace_s: float = 15.0, reap: Callable[[], object] | None = None) -> None:
    """SIGTERM the whole group, wait up to `grace_s` for every member to leave, then SIGKILL.

    Also when the leader already exited: its children may still hold the GPUs. `reap` collects the
    leader's exit status (default: waitpid, harmless for a leader this process did not start).
    """
    reap = reap or (lambda: _reap(pgid))
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        reap()
        return
    try:
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            reap()  # the leader's zombie keeps the group alive until reaped
            if not group_alive(pgid):
                return
            time.sleep(0.05)
    finally:
        # Runs on a second Ctrl-C during the grace period as well: nothing is left behind.
        if group_alive(pgid):
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def stop_group(process: subprocess.Popen, grace_s: float = 15.0) -> None:
    """stop_group_by_id for a server this process started (start_new_session: pid = group id)."""
    stop_members([process], grace_s)


def stop_members(processes: Sequence[subprocess.Popen], grace_s: float = 15.0) -> None:
    """stop_group_by_id for a group this process started: the first process leads it (pid = group id), and
    every member's exit status is collected, so no zombie keeps the group alive."""
    if not processes:
        return
    try:
        stop_group_by_id(processes[0].pid, grace_s, reap=lambda: [p.poll() for p in processes])
    finally:
        for process in processes:
            try:
                process.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                pass


@contextmanager
def terminate_on_sigterm() -> Iterator[None]:
    """Within the block, SIGTERM raises TerminatedError (main thread, default handler only).

    A handler someone else installed (Dagster's, a test runner's) is left alone: it owns shutdown.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous not in (signal.SIG_DFL, None):
        yield
        return

    def _raise(signum, frame):
        raise TerminatedError()

    signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
