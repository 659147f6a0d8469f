"""Named points where a test can SIGKILL a real writer: the lake's swap, the warehouse's build and swap.

A test starts a child process with COSTBENCH_CRASH_AT=<point>; when that process reaches the point it
kills itself with SIGKILL, exactly as an OOM kill or a node loss would: no finally block, no cleanup,
locks released only by the OS. Read at each point, never at import, so setting it later works.
"""

from __future__ import annotations

import os
import signal

CRASH_AT_ENV = "COSTBENCH_CRASH_AT"


def crash_point(name: str) -> None:
    if os.environ.get(CRASH_AT_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
