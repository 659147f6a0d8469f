"""The twin's virtual clock: time jumps to the next wake-up, in due order, and a stuck program says so."""

import asyncio

import pytest

from endpoints.clock import MonotonicClock, VirtualClock, VirtualDeadlockError


class JumpRecordingClock(VirtualClock):
    """Records each forward jump: the idle loop asked to wait this long and got the time at once."""

    def __init__(self, start_s: float = 0.0) -> None:
        super().__init__(start_s)
        self.jumps_s: list[float] = []

    def _advance(self, delay_s: float) -> None:
        self.jumps_s.append(delay_s)
        super()._advance(delay_s)


def test_virtual_time_jumps_to_each_wake_up_in_due_order():
    clock = JumpRecordingClock(start_s=100.0)
    woke: list[tuple[str, float]] = []

    async def sleeper(name: str, t_s: float):
        await clock.sleep_until(t_s)
        woke.append((name, clock.now_s()))

    async def main():
        await asyncio.gather(sleeper("late", 3600.0), sleeper("early", 101.5), sleeper("past", 50.0))

    clock.run(main())
    assert woke == [("past", 100.0), ("early", 101.5), ("late", 3600.0)]
    # An hour in two jumps straight to the due timers, no stepping and no real wait in between.
    assert clock.jumps_s == [pytest.approx(1.5), pytest.approx(3498.5)]


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
    """The sleep is target minus the time source's now (a deadline, not a duration); a deadline already
    past returns at once. A scripted source over the virtual loop makes the check exact."""
    loop_clock = VirtualClock()
    clock = MonotonicClock(time_s=lambda: 1000.0 + loop_clock.now_s())

    async def main():
        await clock.sleep_until(1000.25)
        woke_s = clock.now_s()
        await clock.sleep_until(999.0)
        return woke_s, clock.now_s()

    assert loop_clock.run(main()) == (1000.25, 1000.25)
