"""An flock taken within a deadline: the lake's partition locks and the warehouse's refresh lock.

flock is released by the OS when its process dies, so a crash never leaves anything locked.
"""

from __future__ import annotations

import fcntl
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO

POLL_S = 0.05


@contextmanager
def flock_within(handle: IO, shared: bool, wait_s: float, timed_out: Callable[[], Exception]) -> Iterator[None]:
    """Hold an flock on the open file `handle` (shared or exclusive); raise `timed_out()` after `wait_s`."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(handle, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise timed_out() from None
            time.sleep(POLL_S)
    try:
        yield
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)
