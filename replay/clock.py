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


class MonotonicClock:
    """time.monotonic, with sleeps to an absolute deadline so waits never accumulate drift."""

    def now_s(self) -> float:
        return time.monotonic()

    def wall_s(self) -> float:
        return time.time()

    async def sleep_until(self, t_s: float) -> None:
        # Loop because the event loop may wake us a hair early (timer resolution); never send early.
        while True:
            delay_s = t_s - time.monotonic()
            if delay_s <= 0:
                return
            await asyncio.sleep(delay_s)
