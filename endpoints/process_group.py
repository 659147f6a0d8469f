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
from collections.abc import Iterator, Mapping, Sequence
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


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process we cannot signal took the id: ours are gone
        return False
    return True


def stop_group(process: subprocess.Popen, grace_s: float = 15.0) -> None:
    """SIGTERM the whole group, wait up to `grace_s` for every member to leave, then SIGKILL.

    Also when the leader already exited: its children may still hold the GPUs.
    """
    pgid = process.pid  # start_new_session: the leader's pid is the group id
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        process.poll()
        return
    try:
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            process.poll()  # reap the leader, or its zombie keeps the group alive
            if not _group_alive(pgid):
                return
            time.sleep(0.05)
    finally:
        # Runs on a second Ctrl-C during the grace period as well: nothing is left behind.
        if _group_alive(pgid):
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            process.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            pass


def _reap(pid: int) -> None:
    # When this process started the leader (the same step that stops it), its zombie keeps the
    # group alive until reaped; a leader started elsewhere was re-parented and is reaped there.
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def stop_group_by_id(pgid: int, grace_s: float = 15.0) -> None:
    """stop_group for a group this process did not start (a server another step launched)."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and _group_alive(pgid):
        _reap(pgid)
        time.sleep(0.05)
    if _group_alive(pgid):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
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
