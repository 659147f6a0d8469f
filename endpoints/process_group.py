"""A server process in its own process group, and a teardown that reaches every process in it.

The server gets its own session, so a Ctrl-C in the terminal reaches only costbench, whose teardown
then stops the whole group (a router's workers, a container shim, SGLang's scheduler processes).
SIGTERM to costbench would end Python without running any `finally`: `terminate_on_sigterm` turns
it into an exception for the span of a launch, so the teardown runs then too.
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


def start_in_own_group(command: Sequence[str], log_path: Path, extra_env: Mapping[str, str]) -> subprocess.Popen:
    env = {**os.environ, **extra_env}
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            list(command),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )


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


def _reap(pid: int) -> None:
    # When this process started the leader (the same step that stops it), its zombie keeps the
    # group alive until reaped; a leader started elsewhere was re-parented and is reaped there.
    try:
        os.waitpid(pid, os.WNOHANG)
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
    try:
        stop_group_by_id(process.pid, grace_s, reap=process.poll)
    finally:
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
