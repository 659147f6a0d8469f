"""SIGTERM stops a replay the way Ctrl-C (SIGINT) does, so `kill`, a container stop or a job
scheduler's timeout leave the same merged, accounted-for records as Ctrl-C does.

Inside `asyncio.run`, SIGINT's handler is the runner's own: it cancels the main task, the replay
records what was in flight and not yet sent as `cancelled`, merges its part files and writes run.json,
and then `asyncio.run` raises KeyboardInterrupt. `sigterm_as_sigint()` makes SIGTERM call whatever
SIGINT's handler is at that moment, so both signals take exactly that one path.

It changes nothing where it could interfere: only in the main thread (the only one that may set
handlers), only while SIGTERM still has the default action (a host that chose its own SIGTERM
handling, like Dagster's run worker, keeps it), and it puts the previous handler back on exit. When
SIGINT's handler is not a Python function (SIGINT ignored, as for a job started with `&` from a
script), SIGTERM keeps its default action.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


def _as_sigint(signum: int, frame: FrameType | None) -> None:
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, frame)
        return
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # nothing to forward to: terminate as before
    os.kill(os.getpid(), signal.SIGTERM)


@contextmanager
def sigterm_as_sigint() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    previous = signal.signal(signal.SIGTERM, _as_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
