"""A demo (or `costbench run`) stopped part-way stops all it started, and one at a time uses an instance.

SIGTERM (`timeout`, a CI job's cancel), SIGINT (Ctrl-C) and SIGHUP (a closed terminal) become DemoStopped,
so the demo's `with` blocks unwind: its backfill is cancelled (a later daemon on this instance must not
carry it on), the daemon's process group stops (the daemon, its code server, the run workers and their
step processes: Dagster starts none of them in a group of its own), and any twin whose run worker is then
gone is stopped through its lease. Python's default SIGTERM and SIGHUP would end the process with no
`finally`, leaving all of that to init.
"""

from __future__ import annotations

import fcntl
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from endpoints.lease_file import end_lease, read_leases

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
LOCK_NAME = "demo.lock"


class DemoStopped(SystemExit):
    """A stop signal arrived; the exit status is the shell's 128 + its number."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signal_name = signal.Signals(signum).name


@contextmanager
def stopped_by_signals() -> Iterator[None]:
    previous = {s: signal.getsignal(s) for s in STOP_SIGNALS}

    def _stop(signum, frame):
        # The first one counts; the teardown it starts is bounded (the daemon's grace, then SIGKILL) and a
        # second Ctrl-C mid-way would leave half of it undone.
        for s in STOP_SIGNALS:
            signal.signal(s, signal.SIG_IGN)
        raise DemoStopped(signum)

    for s in STOP_SIGNALS:
        signal.signal(s, _stop)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


class InstanceInUse(RuntimeError):
    """Another demo or run holds this instance; the message names its pid and the instance."""


@contextmanager
def instance_lock(home: Path) -> Iterator[None]:
    """Held while a demo uses the instance at `home`. An flock: the OS lets go of it when the holder dies,
    however it dies, so a killed demo never locks out the next one."""
    fd = os.open(Path(home) / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise InstanceInUse(
                f"another costbench demo or run (pid {holder}) is using the Dagster instance at {home}: wait for "
                "it to finish, stop it, or give this one its own --dagster-home"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)


def end_orphaned_leases(leases_dir: Path, wait_s: float = 10.0) -> list[str]:
    """End the lease of every server whose run worker is gone, once the daemon's group has been stopped.

    A worker SIGKILLed a moment ago may not have exited yet: its lease is looked at again for up to `wait_s`.
    """
    ended: list[str] = []
    deadline = time.monotonic() + wait_s
    while True:
        waiting = False
        for lease in read_leases(leases_dir):
            alive = lease.owner_alive()
            if alive is False and end_lease(leases_dir, lease.owner_run_id):
                ended.append(lease.endpoint)
            waiting = waiting or alive is True
        if not waiting or time.monotonic() > deadline:
            return ended
        time.sleep(0.2)
