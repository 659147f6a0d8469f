"""The decode cohort counts decoding requests together and times a timed-only request's chunks from its own list
of step ends: what a bench reads must be what delivering every chunk would give (retractions, a stream interval,
DP attention), and the clock's skipped sleeps must land where asyncio's sleeps land."""

from __future__ import annotations

import asyncio
import random

from endpoints.clock import VirtualClock
from endpoints.sim.engine.kv_pool import KvPool
from endpoints.sim.engine.sim_request import GenerateInput, SimRequest, TokenUpdate
from endpoints.sim.engine_builder import build_engine
from endpoints.sim.server_args import parse_server_args
from endpoints.sim.virtual_bench import random_ids

R1_H200 = ["--model-path", "deepseek-ai/DeepSeek-R1-0528", "--tp", "8", "--sim-hardware", "h200"]


class _Counting:
    """An observer: with one set, every chunk goes through SimEngine._deliver (nothing is timed later)."""

    def __init__(self) -> None:
        self.updates = 0

    def observe(self, request: SimRequest, update: TokenUpdate, prev_tokens: int, prev_s: float | None) -> None:
        self.updates += 1


def _chunk_times(
    flags: list[str], observed: bool, pool_tokens: int | None = None
) -> tuple[list[tuple[int, list[float]]], int]:
    """Each request's output count and chunk times, and the retractions of the run. Requests arrive a quarter
    second apart (so the later ones meet a decayed new-token ratio and, on a small pool, retractions)."""
    rng = random.Random(3)
    specs = [GenerateInput(f"r{i}", random_ids(500, rng), 600, stream=True) for i in range(16)]
    clock = VirtualClock()

    async def main() -> tuple[list[tuple[int, list[float]]], int]:
        engine = build_engine(parse_server_args(flags), clock)
        if pool_tokens is not None:
            engine.scheduler.pool = KvPool(pool_tokens)
        if observed:
            engine.observer = _Counting()
        engine.start()

        async def one(i: int, spec: GenerateInput) -> tuple[int, list[float]]:
            await asyncio.sleep(0.25 * i)
            request = engine.submit(spec, record_chunk_times=True)
            async for update in engine.updates(request):
                last = update
            assert request.chunk_times is not None and request.chunk_stride == (0 if observed else 3)
            return last.output_tokens, request.chunk_times

        try:
            results = await asyncio.gather(*(one(i, s) for i, s in enumerate(specs)))
        finally:
            await engine.stop()
        return list(results), engine.scheduler.retractions.requests

    return clock.run(main())


def test_timed_chunks_match_delivered_chunks_through_retractions():
    flags = [*R1_H200, "--stream-interval", "3"]
    timed, retractions = _chunk_times(flags, observed=False, pool_tokens=6000)
    assert retractions > 0
    assert (timed, retractions) == _chunk_times(flags, observed=True, pool_tokens=6000)


def test_timed_chunks_match_delivered_chunks_under_dp_attention():
    flags = [*R1_H200, "--dp", "8", "--enable-dp-attention", "--stream-interval", "3"]
    assert _chunk_times(flags, observed=False) == _chunk_times(flags, observed=True)


def test_a_skipped_sleep_lands_where_an_asyncio_sleep_lands():
    wake_s = [0.1, 0.3, 0.30000000000000004, 1 / 3, 7.25, 7.25]

    def run(skippable: bool) -> list[tuple[str, float]]:
        clock = VirtualClock(start_s=0.7)
        seen: list[tuple[str, float]] = []

        async def sleeper(name: str, t_s: float) -> None:
            if skippable:
                await clock.sleep_until(t_s)
            else:
                await asyncio.sleep(t_s - clock.now_s())
            seen.append((name, clock.now_s()))

        async def main() -> None:
            await asyncio.gather(*(sleeper(f"s{i}", 0.7 + t) for i, t in enumerate(wake_s)))
            await sleeper("alone", 123.456789)  # nothing else pending: the skip path

        clock.run(main())
        return seen

    assert run(skippable=True) == run(skippable=False)
