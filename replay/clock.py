"""The replay's clock, injected so tests can script time instead of patching `time` (STYLE.md 6).

`now_s` is monotonic (for every latency and schedule computation); `wall_s` is epoch time, read once
per run to anchor the monotonic timeline (`RunInfo.t0_wall_s`).
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    def now_s(self) -> float:
        """Monotonic seconds; only differences mean anything."""
        ...

    def wall_s(self) -> float:
        """Epoch seconds."""
        ...

    async def sleep_until(self, t_s: float) -> None:
        """Return once `now_s() >= t_s` (at once if that moment has passed)."""
        ...


SPIN_S = 0.0011  # the last stretch before a deadline is waited out by yielding, not by a timer


class MonotonicClock:
    """time.monotonic, with sleeps to an absolute deadline so waits never accumulate drift.

    The event loop's timers wake up to ~1 ms late (epoll rounds its timeout up to whole
    milliseconds), which would show as schedule lag on every request. So a sleep uses the timer
    only until SPIN_S before the deadline, then yields to the loop (`sleep(0)`) until it is due:
    other tasks keep running, and the request leaves within microseconds of its time.
    """

    def now_s(self) -> float:
        return time.monotonic()

    def wall_s(self) -> float:
        return time.time()

    async def sleep_until(self, t_s: float) -> None:
        while True:
            delay_s = t_s - time.monotonic()
            if delay_s <= 0:
                return  # never early
            await asyncio.sleep(delay_s - SPIN_S if delay_s > SPIN_S else 0)
