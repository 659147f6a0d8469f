"""The twin's virtual clock: time jumps to the next wake-up, in due order, and a stuck program says so."""

import asyncio
import time

import pytest

from endpoints.sim.clock import MonotonicClock, VirtualClock, VirtualDeadlockError


def test_virtual_time_jumps_to_each_wake_up_in_due_order():
    clock = VirtualClock(start_s=100.0)
    woke: list[tuple[str, float]] = []

    async def sleeper(name: str, t_s: float):
        await clock.sleep_until(t_s)
        woke.append((name, clock.now_s()))

    async def main():
        await asyncio.gather(sleeper("late", 3600.0), sleeper("early", 101.5), sleeper("past", 50.0))

    start = time.perf_counter()
    clock.run(main())
    assert woke == [("past", 100.0), ("early", 101.5), ("late", 3600.0)]
    assert time.perf_counter() - start < 0.5


def test_asyncio_timeouts_follow_virtual_time():
    clock = VirtualClock()

    async def main():
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.sleep(1000), timeout=30)
        return clock.now_s()

    assert clock.run(main()) == pytest.approx(30.0)


def test_a_program_where_nothing_can_wake_is_reported_not_hung():
    async def main():
        await asyncio.Event().wait()

    with pytest.raises(VirtualDeadlockError):
        VirtualClock().run(main())


def test_monotonic_clock_sleeps_until_an_absolute_time():
    clock = MonotonicClock()

    async def main():
        target = clock.now_s() + 0.05
        await clock.sleep_until(target)
        return clock.now_s() - target

    assert 0 <= asyncio.run(main()) < 0.05
