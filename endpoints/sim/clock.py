"""The twin's clock: real monotonic time behind HTTP, virtual time in tests and calibration.

One protocol, `now_s()` and `sleep_until(t_s)`. The virtual clock drives an asyncio event loop
whose notion of time is virtual: when every task is waiting, the loop would block in `select`
until the next timer; the virtual selector instead jumps time forward to that timer and returns
at once. So `asyncio.sleep`, `wait_for` and timeouts all follow virtual time, event order is the
loop's own (timers by due time; ties in an order fixed by the program, so runs repeat exactly), and
a simulated hour runs in milliseconds.
"""

from __future__ import annotations

import asyncio
import selectors
import time
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Clock(Protocol):
    def now_s(self) -> float: ...

    async def sleep_until(self, t_s: float) -> None: ...


class MonotonicClock:
    """Wall time (time.monotonic), for the twin behind HTTP. `time_s` is the time source (tests pass a
    scripted one); sleeps are the event loop's own, so they follow the loop's clock."""

    def __init__(self, time_s: Callable[[], float] = time.monotonic) -> None:
        self._time_s = time_s

    def now_s(self) -> float:
        return self._time_s()

    async def sleep_until(self, t_s: float) -> None:
        delay_s = t_s - self._time_s()
        await asyncio.sleep(delay_s if delay_s > 0 else 0)


class VirtualDeadlockError(RuntimeError):
    pass


class _VirtualSelector(selectors.DefaultSelector):
    """Polls real file descriptors without blocking; a wait for a timer becomes a time jump."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__()
        self._clock = clock

    def select(self, timeout: float | None = None):
        ready = super().select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:
            if self._clock.allow_real_io:
                return super().select(None)
            raise VirtualDeadlockError(
                "virtual clock: every task is waiting and no timer is due, so nothing can ever wake up"
            )
        self._clock._advance(timeout)
        return []


class _VirtualLoop(asyncio.SelectorEventLoop):
    def __init__(self, clock: VirtualClock) -> None:
        self._virtual_clock = clock
        super().__init__(selector=_VirtualSelector(clock))

    def time(self) -> float:
        return self._virtual_clock.now_s()


class VirtualClock:
    """Virtual seconds from `start_s`. Run coroutines with `clock.run(main())`; inside, the engine
    and any asyncio timer use virtual time."""

    def __init__(self, start_s: float = 0.0, allow_real_io: bool = False) -> None:
        self._now_s = start_s
        self.allow_real_io = allow_real_io  # block on sockets when idle instead of calling it a deadlock

    def now_s(self) -> float:
        return self._now_s

    async def sleep_until(self, t_s: float) -> None:
        delay_s = t_s - self._now_s
        await asyncio.sleep(delay_s if delay_s > 0 else 0)

    def _advance(self, delay_s: float) -> None:
        self._now_s += delay_s

    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        return _VirtualLoop(self)

    def run(self, main: Coroutine[Any, Any, T]) -> T:
        with asyncio.Runner(loop_factory=self.new_event_loop) as runner:
            return runner.run(main)
