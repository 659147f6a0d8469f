"""The twin's clock: real monotonic time behind HTTP, virtual time in tests and calibration.

One protocol, `now_s()` and `sleep_until(t_s)`. The virtual clock drives an asyncio event loop
whose notion of time is virtual: when every task is waiting, the loop would block in `select`
until the next timer; the virtual selector instead jumps time forward to that timer and returns
at once. So `asyncio.sleep`, `wait_for` and timeouts all follow virtual time, event order is the
loop's own (timers by due time; ties in an order fixed by the program, so runs repeat exactly), and
a simulated hour runs in milliseconds.

While a thread started from the loop runs (`run_in_executor`, `asyncio.to_thread`:
a urllib call to a twin served on this very loop, a Parquet file being closed) time holds: the loop
waits for I/O or the thread's end in real time instead of jumping to the next timer, so a probe sees
the server as it is at the probe's instant and no stretch of virtual time passes unseen. A thread
that itself waits for virtual time (a request to a handler that sleeps) still gets it, HELD_WAIT_S of
real time per timer.
"""

from __future__ import annotations

import asyncio
import heapq
import math
import selectors
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor
from functools import partial
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
HELD_WAIT_S = 0.5  # real seconds a held loop waits for I/O or a thread's end before time may move on
MAXIMUM_SELECT_TIMEOUT_S = 24 * 3600  # asyncio's longest select: a longer sleep takes more than one jump


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


class _EarliestTimer:
    """Stands in for a sleep's timer handle on asyncio's timer heap where that timer is known to be due before every
    other: it orders first as the handle would (heapq only ever asks whether it is less than another), so pushing
    and popping it leaves the heap as the handle would leave it."""

    __slots__ = ()

    def __lt__(self, other: object) -> bool:
        return True


_EARLIEST_TIMER = _EarliestTimer()


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
        if self._clock._held:
            ready = super().select(HELD_WAIT_S)
            if ready:
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

    def sleep_skipper(self) -> Callable[[float], bool] | None:
        """Sleeps without a round trip through the loop, for a caller that neither yields nor schedules anything
        between them (one sleep_until, or the engine's run of quiet decode steps): skip(t_s) moves the clock to t_s
        exactly as asyncio.sleep would move it (call_later's deadline, reached by _run_once's timeout) and returns
        True when the round trip could do nothing but wake the sleeper: no callback is ready, no real I/O is, no
        thread holds time, and no other timer is due by then. The sleep's timer still goes on and off the heap (as
        a stand-in that orders first, as the handle would), so timers due at one instant keep their order. False:
        nothing was done; sleep the ordinary way. What no sleep of a run can change is read once, and real I/O is
        polled once, at the start (I/O that turns ready during a run, in real time, is seen after it, as it would
        be had it come a moment later). None: every sleep the ordinary way."""
        quiet = self._quiet()
        return None if quiet is None else partial(_skip, self._virtual_clock, *quiet)

    def skip_once(self, t_s: float) -> bool:
        """One sleep_skipper skip without building the skipper (the engine's step sleep: one per step)."""
        quiet = self._quiet()
        return quiet is not None and _skip(self._virtual_clock, *quiet, t_s)

    def _quiet(self) -> tuple[list, float, float] | None:
        """(the timer heap, the clock resolution, when its first timer is due) when the loop has nothing else to do
        now; None: a sleep must go the ordinary way."""
        # asyncio.BaseEventLoop's own state, read as _run_once reads it (CPython 3.11-3.13; not in typeshed). On a
        # Python whose loop lacks it, every sleep goes the ordinary way, which this only shortcuts.
        loop: Any = self
        try:
            if loop._ready or loop._stopping or self._virtual_clock._held or loop._timer_cancelled_count:
                return None
            scheduled, resolution_s = loop._scheduled, loop._clock_resolution
        except AttributeError:
            return None
        if loop._selector.select(0):
            return None
        return scheduled, resolution_s, scheduled[0].when() if scheduled else math.inf

    def run_in_executor(self, executor: Executor | None, func: Callable[..., T], *args: Any) -> asyncio.Future[T]:  # type: ignore[override]
        future = super().run_in_executor(executor, func, *args)
        self._virtual_clock._held += 1
        future.add_done_callback(self._virtual_clock._release)
        return future


def _skip(clock: VirtualClock, scheduled: list, resolution_s: float, first_other_s: float, t_s: float) -> bool:
    """A sleep_skipper skip: moves the clock to t_s as asyncio.sleep would, or returns False having done nothing."""
    now_s = clock._now_s
    delay_s = t_s - now_s  # sleep_until's delay
    if delay_s <= 0:
        return False
    when_s = now_s + delay_s
    ends_s = now_s + (when_s - now_s)
    due_by_s = ends_s + resolution_s
    if when_s - now_s > MAXIMUM_SELECT_TIMEOUT_S or not when_s < due_by_s or first_other_s < due_by_s:
        return False
    if scheduled:
        heapq.heappush(scheduled, _EARLIEST_TIMER)
        heapq.heappop(scheduled)
    clock._advance(ends_s - now_s)
    return True


class VirtualClock:
    """Virtual seconds from `start_s`. Run coroutines with `clock.run(main())`; inside, the engine
    and any asyncio timer use virtual time."""

    def __init__(self, start_s: float = 0.0, allow_real_io: bool = False) -> None:
        self._now_s = start_s
        self.allow_real_io = allow_real_io  # block on sockets when idle instead of calling it a deadlock
        self._held = 0  # threads started from the loop and not yet done

    def now_s(self) -> float:
        return self._now_s

    async def sleep_until(self, t_s: float) -> None:
        if t_s - self._now_s > 0:  # skip_to, inline (one call less per engine step)
            loop = asyncio.get_running_loop()
            if isinstance(loop, _VirtualLoop) and loop.skip_once(t_s):
                return  # nothing else could run before t_s: the time moved, no loop iteration needed
        delay_s = t_s - self._now_s
        await asyncio.sleep(delay_s if delay_s > 0 else 0)

    def skip_to(self, t_s: float) -> bool:
        """sleep_until's shortcut alone, for code running on this clock's loop: when nothing else could run before
        `t_s` (_VirtualLoop.sleep_skipper), time moves there exactly as the sleep would move it and this returns True;
        False: nothing was done (a sleep must go the ordinary way)."""
        if t_s - self._now_s <= 0:
            return False
        loop = asyncio.get_running_loop()
        return isinstance(loop, _VirtualLoop) and loop.skip_once(t_s)

    def sleep_skipper(self) -> Callable[[float], bool] | None:
        """skip_to for a run of sleeps that nothing can come between (_VirtualLoop.sleep_skipper); None: none skips."""
        loop = asyncio.get_running_loop()
        return loop.sleep_skipper() if isinstance(loop, _VirtualLoop) else None

    def _release(self, _future: object) -> None:
        self._held -= 1

    def _advance(self, delay_s: float) -> None:
        self._now_s += delay_s

    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        return _VirtualLoop(self)

    def run(self, main: Coroutine[Any, Any, T]) -> T:
        with asyncio.Runner(loop_factory=self.new_event_loop) as runner:
            return runner.run(main)
