"""The twin's engine and scheduler, run in virtual time: caching, lengths, admission order, KV limits."""

import asyncio
import random

import pytest

from endpoints.clock import VirtualClock
from endpoints.sim.cost.cost_model import ParallelConfig, RooflineCostModel
from endpoints.sim.cost.profiles import HARDWARE_PROFILES, HardwareName, model_profile_for
from endpoints.sim.cost.step_batch import BatchItem, ForwardMode, StepBatch
from endpoints.sim.engine.engine import RequestRejected, SimEngine
from endpoints.sim.engine.kv_pool import KvPool
from endpoints.sim.engine.sim_request import GenerateInput
from endpoints.sim.engine_builder import build_engine
from endpoints.sim.server_args import parse_server_args

BASE_FLAGS = ["--tp", "8", "--sim-hardware", "h200"]


def run(flags: list[str], scenario, pool_tokens: int | None = None):
    """Run `scenario(engine, clock)` on a fresh engine in virtual time; returns its result."""
    clock = VirtualClock()

    async def main():
        engine = build_engine(parse_server_args(BASE_FLAGS + flags), clock)
        if pool_tokens is not None:
            engine.scheduler.pool = KvPool(pool_tokens)
        engine.start()
        try:
            return await scenario(engine, clock)
        finally:
            await engine.stop()

    return clock.run(main())


def ids(n: int, seed: int) -> tuple[int, ...]:
    rng = random.Random(seed)
    return tuple(rng.randrange(3, 129_000) for _ in range(n))


def req(rid: str, input_ids, max_new: int = 16, ignore_eos: bool = True, stream: bool = False) -> GenerateInput:
    return GenerateInput(rid, tuple(input_ids), max_new, ignore_eos, stream)


def test_second_request_with_shared_prefix_reports_cached_tokens():
    shared = ids(3000, 1)

    async def scenario(engine: SimEngine, clock):
        first = await engine.generate(req("a", shared + ids(200, 2)))
        second = await engine.generate(req("b", shared + ids(300, 3)))
        return first, second

    first, second = run([], scenario)
    assert first.cached_tokens == 0
    assert second.cached_tokens >= 3000
    assert second.prompt_tokens == 3300


def test_concurrent_requests_share_a_prefix_once_its_prefill_is_done():
    shared = ids(4000, 1)

    async def scenario(engine: SimEngine, clock):
        first = asyncio.ensure_future(engine.generate(req("a", shared + ids(10, 2), max_new=200)))
        await asyncio.sleep(1.0)  # the first is decoding, not finished
        second = await engine.generate(req("b", shared + ids(10, 3), max_new=4))
        return await first, second

    first, second = run([], scenario)
    assert second.cached_tokens >= 4000
    assert second.now_s < first.now_s  # it really overlapped


def test_disabled_radix_cache_reports_no_cached_tokens():
    shared = ids(3000, 1)

    async def scenario(engine, clock):
        await engine.generate(req("a", shared))
        return await engine.generate(req("b", shared))

    assert run(["--disable-radix-cache"], scenario).cached_tokens == 0


def test_ignore_eos_gives_exactly_max_new_tokens_and_without_it_a_deterministic_early_stop():
    prompt = ids(500, 4)

    async def scenario(engine, clock):
        exact = await engine.generate(req("a", prompt, max_new=137))
        free_1 = await engine.generate(req("b", prompt, max_new=137, ignore_eos=False))
        free_2 = await engine.generate(req("c", prompt, max_new=137, ignore_eos=False))
        return exact, free_1, free_2

    exact, free_1, free_2 = run([], scenario)
    assert exact.output_tokens == 137 and exact.finish_reason == {"type": "length", "length": 137}
    assert 1 <= free_1.output_tokens <= 137
    assert free_1.output_tokens == free_2.output_tokens
    if free_1.output_tokens < 137:
        assert free_1.finish_reason == {"type": "stop", "matched": 1}


def test_lone_request_times_follow_the_cost_model():
    prompt = ids(2000, 5)

    async def scenario(engine, clock):
        t0 = clock.now_s()
        update = await engine.generate(req("a", prompt, max_new=3))
        return t0, update

    t0, update = run([], scenario)
    cost = RooflineCostModel(
        model_profile_for("deepseek-ai/DeepSeek-V3"), HARDWARE_PROFILES[HardwareName.H200], ParallelConfig(8)
    )
    prefill_s = cost.step_time_s(StepBatch(ForwardMode.EXTEND, (BatchItem(2000, 0),)))
    decode_s = cost.step_time_s(StepBatch(ForwardMode.DECODE, (BatchItem(1, 2000),))) + cost.step_time_s(
        StepBatch(ForwardMode.DECODE, (BatchItem(1, 2001),))
    )
    assert update.first_token_s - t0 == pytest.approx(prefill_s)
    assert update.now_s - t0 == pytest.approx(prefill_s + decode_s)


def test_chunked_prefill_splits_a_long_prompt_over_steps():
    prompt = ids(20_000, 6)

    async def scenario(engine, clock):
        await engine.generate(req("a", prompt, max_new=1))
        return engine.steps

    assert run(["--chunked-prefill-size", "4096"], scenario) == 5
    assert run(["--chunked-prefill-size", "-1"], scenario) == 1


def _admission_order(policy: str) -> list[str]:
    warm = ids(3000, 7)

    async def scenario(engine, clock):
        await engine.generate(req("warm", warm + ids(5, 8), max_new=1))
        blocker = asyncio.ensure_future(engine.generate(req("blocker", ids(100, 9), max_new=50)))
        await asyncio.sleep(0.2)  # the blocker holds the only running slot
        cold = asyncio.ensure_future(engine.generate(req("cold", ids(3000, 10), max_new=1)))
        await asyncio.sleep(0)
        hot = asyncio.ensure_future(engine.generate(req("hot", warm + ids(5, 11), max_new=1)))
        done = await asyncio.gather(blocker, cold, hot)
        return [u.rid for u in sorted(done[1:], key=lambda u: u.first_token_s)]

    return run(["--schedule-policy", policy, "--max-running-requests", "1"], scenario)


def test_lpm_admits_the_longest_cached_prefix_first_and_fcfs_the_oldest():
    assert _admission_order("fcfs") == ["cold", "hot"]
    assert _admission_order("lpm") == ["hot", "cold"]


def test_streaming_updates_come_every_stream_interval_tokens():
    async def scenario(engine, clock):
        request = engine.submit(req("a", ids(100, 12), max_new=10, stream=True))
        return [u.output_tokens async for u in engine.updates(request)]

    assert run(["--stream-interval", "4"], scenario) == [1, 5, 9, 10]


def test_a_small_kv_pool_bounds_concurrency_and_every_slot_comes_back():
    async def scenario(engine, clock):
        specs = [req(str(i), ids(1000, 100 + i), max_new=200) for i in range(12)]
        done = await asyncio.gather(*(engine.generate(s) for s in specs))
        return engine, done

    engine, done = run([], scenario, pool_tokens=2500)  # room for two requests' prompt + output
    assert all(u.output_tokens == 200 for u in done)
    spans = [(u.first_token_s, u.now_s) for u in done]
    peak = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
    assert peak <= 2
    assert engine.scheduler.pool.reserved_tokens == 0
    assert engine.scheduler.cache.evictable_tokens() == engine.scheduler.cache.total_tokens  # nothing left locked


def test_requests_that_can_never_fit_are_rejected_with_a_reason():
    async def scenario(engine, clock):
        with pytest.raises(RequestRejected, match="context length"):
            engine.submit(req("a", [5] * 200_000))
        with pytest.raises(RequestRejected, match="KV pool"):
            engine.submit(req("b", ids(3000, 1), max_new=10))
        return True

    assert run([], scenario, pool_tokens=2000)


def test_two_hundred_requests_run_in_virtual_time_without_waiting_for_it():
    shared = ids(2000, 13)
    rng = random.Random(14)

    async def scenario(engine, clock):
        async def one(i):
            await asyncio.sleep(i * 0.05)
            return await engine.generate(req(str(i), shared + ids(rng.randint(50, 500), 1000 + i), max_new=100))

        return engine, await asyncio.gather(*(one(i) for i in range(200))), clock.now_s()

    engine, done, ended_s = run(["--schedule-policy", "lpm"], scenario)
    # Arrivals alone span 10 s, all of it on the virtual clock (asyncio.sleep there is virtual too).
    assert ended_s >= 199 * 0.05
    assert sum(u.output_tokens for u in done) == 200 * 100
    assert sum(u.cached_tokens >= 2000 for u in done) >= 199
    assert engine.scheduler.pool.reserved_tokens == 0


def test_a_consumer_that_stops_listening_aborts_its_request_and_frees_its_kv():
    async def scenario(engine, clock):
        request = engine.submit(req("a", ids(1000, 15), max_new=500, stream=True))
        updates = engine.updates(request)
        async for update in updates:
            if update.output_tokens >= 3:
                break
        await updates.aclose()
        await asyncio.sleep(1.0)
        return engine, request

    engine, request = run([], scenario)
    assert request.aborted and request.output_tokens < 500
    assert engine.scheduler.running == [] and engine.scheduler.pool.reserved_tokens == 0
