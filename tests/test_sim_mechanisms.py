"""One test per mechanism the twin claims, in virtual time: prefix caching, occupancy, retraction,
overlap scheduling, calibration shape."""

import asyncio
import random
from dataclasses import replace

from endpoints.sim.clock import VirtualClock
from endpoints.sim.engine_builder import build_engine
from endpoints.sim.kv_pool import KvPool
from endpoints.sim.profiles import Vendor, cost_constants_for
from endpoints.sim.server_args import parse_server_args
from endpoints.sim.sim_request import GenerateInput
from endpoints.sim.virtual_bench import BenchRequest, random_ids, random_requests, run_bench

H200 = ["--model-path", "deepseek-ai/DeepSeek-V3", "--tp", "8", "--sim-hardware", "h200"]


def test_a_shared_prefix_lowers_prefill_time_and_shows_in_cached_tokens():
    rng = random.Random(1)
    system = random_ids(6000, rng)
    requests = [BenchRequest(system + random_ids(200, rng), 8, arrival_s=i * 2.0) for i in range(6)]
    cached = run_bench(H200, requests)
    uncached = run_bench(H200 + ["--disable-radix-cache"], requests)
    warm = cached.requests[1:]
    assert cached.requests[0].cached_tokens == 0
    assert all(r.cached_tokens >= 6000 for r in warm)
    assert all(r.cached_tokens == 0 for r in uncached.requests)
    warm_ttft = max(r.ttft_s for r in warm)
    assert warm_ttft < 0.7 * min(r.ttft_s for r in uncached.requests[1:])
    assert warm_ttft < 0.7 * cached.requests[0].ttft_s


def test_higher_batch_occupancy_raises_throughput_per_gpu():
    def tok_s(concurrency: int) -> float:
        requests = random_requests(concurrency * 3, 400, 300, 1.0, seed=concurrency)
        return run_bench(H200, requests, concurrency).output_tok_s

    rates = [tok_s(c) for c in (1, 8, 64)]
    assert rates[0] < rates[1] < rates[2]
    assert rates[2] > 15 * rates[0]  # the expert weights read per step are shared by the whole batch


def _kv_pressure(pool_tokens: int):
    clock = VirtualClock()

    async def main():
        engine = build_engine(parse_server_args(H200), clock)
        engine.scheduler.pool = KvPool(pool_tokens)
        engine.start()
        rng = random.Random(3)
        specs = [GenerateInput(f"r{i}", random_ids(500, rng), 600, ignore_eos=True) for i in range(16)]
        try:
            done = await asyncio.gather(*(engine.generate(s) for s in specs))
        finally:
            await engine.stop()
        return engine, done

    return clock.run(main())


def test_kv_exhaustion_retracts_running_requests_instead_of_crashing_and_all_finish():
    # 16 requests × (500 + 600) tokens need 17,600 slots; the pool has 6,000. Admission is optimistic
    # (new_token_ratio), so decode runs out of slots and must retract.
    engine, done = _kv_pressure(6000)
    assert all(u.output_tokens == 600 and u.finish_reason == {"type": "length", "length": 600} for u in done)
    assert engine.scheduler.retractions.requests > 0
    assert sum(u.num_retractions for u in done) == engine.scheduler.retractions.requests
    assert engine.scheduler.new_token_ratio > engine.scheduler.min_new_token_ratio
    assert engine.scheduler.pool.reserved_tokens == 0 and engine.scheduler.running == []
    assert all(u.cached_tokens <= u.prompt_tokens for u in done)  # a re-prefill is not reported as a hit


def test_a_roomy_pool_never_retracts():
    engine, done = _kv_pressure(200_000)
    assert engine.scheduler.retractions.requests == 0 and all(u.num_retractions == 0 for u in done)


def test_admission_is_optimistic_more_requests_run_than_their_full_budgets_fit():
    clock = VirtualClock()

    async def main():
        engine = build_engine(parse_server_args(H200), clock)
        engine.scheduler.pool = KvPool(20_000)
        engine.start()
        rng = random.Random(5)
        tasks = [asyncio.ensure_future(engine.generate(GenerateInput(f"r{i}", random_ids(200, rng), 2000, True)))
                 for i in range(20)]  # fmt: skip
        await asyncio.sleep(3.0)
        running = len(engine.scheduler.running)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await engine.stop()
        return running

    running = clock.run(main())
    assert running * (200 + 2000) > 20_000  # more than a reserve-everything scheduler would admit


def test_arrivals_during_a_busy_step_wait_one_more_step_like_the_overlap_scheduler():
    rng = random.Random(6)
    long_runner = BenchRequest(random_ids(300, rng), 400)
    probe = BenchRequest(random_ids(300, rng), 2, arrival_s=1.0)
    runner, busy = run_bench(H200, [long_runner, probe]).requests
    idle = run_bench(H200, [BenchRequest(probe.input_ids, 2, arrival_s=1.0)]).requests[0]
    decode_step_s = runner.chunk_gaps_s[10]
    # Without the overlap delay the probe would wait only for the rest of the current step.
    assert busy.ttft_s >= idle.ttft_s + 0.95 * decode_step_s


def _decode_gaps_during_a_chunked_prefill(extra_flags: list[str]) -> tuple[float, int, float]:
    """A long decode runs; at t=1 s a 12k-token prompt arrives and is prefilled in 4 chunks of 3,072.
    Returns the decode's longest gap between tokens, its tokens during the newcomer's prefill, and
    the newcomer's TTFT."""
    rng = random.Random(8)
    runner = BenchRequest(random_ids(200, rng), 600)
    newcomer = BenchRequest(random_ids(12_288, rng), 4, arrival_s=1.0)
    flags = H200 + ["--chunked-prefill-size", "3072", "--max-prefill-tokens", "3072", *extra_flags]
    first, second = run_bench(flags, [runner, newcomer]).requests
    times, t = [], first.sent_s + first.ttft_s
    for gap in first.chunk_gaps_s:
        t += gap
        times.append(t)
    prefill_start, prefill_end = second.sent_s, second.sent_s + second.ttft_s
    during = sum(1 for x in times if prefill_start < x <= prefill_end)
    return max(first.chunk_gaps_s), during, second.ttft_s


def test_without_mixed_chunk_a_chunked_prefill_stalls_running_decodes_for_every_chunk():
    # SGLang's default (get_next_batch_to_run: a prefill batch, when there is one, runs instead of decode).
    longest_gap, during, ttft = _decode_gaps_during_a_chunked_prefill([])
    assert during <= 2  # only before the prefill starts (the overlap scheduler admits it a step late)
    assert longest_gap > 0.8 * ttft  # the decode waited for the whole four-chunk prefill


def test_mixed_chunk_decodes_advance_in_every_extend_step():
    longest_gap, during, ttft = _decode_gaps_during_a_chunked_prefill(["--enable-mixed-chunk"])
    stalled_gap, _, _ = _decode_gaps_during_a_chunked_prefill([])
    assert during >= 4  # one token per mixed step, every chunk
    assert longest_gap < 0.4 * stalled_gap  # a gap is one mixed step, not the whole prefill
    assert longest_gap < 0.5 * ttft


def test_cold_start_holds_only_the_first_batched_prefill_and_only_once():
    constants = replace(cost_constants_for(Vendor.NVIDIA), cold_prefill_s=2.0)
    rng = random.Random(9)
    single = [BenchRequest(random_ids(500, rng), 8)]
    burst = [BenchRequest(random_ids(500, rng), 8, arrival_s=5.0) for _ in range(4)]
    second_burst = [BenchRequest(random_ids(500, rng), 8, arrival_s=10.0) for _ in range(4)]
    requests = single + burst + second_burst
    warm = run_bench(H200, requests, cost_constants=constants).requests
    cold = run_bench(H200 + ["--sim-cold-start"], requests, cost_constants=constants).requests
    assert cold[0].ttft_s == warm[0].ttft_s  # a lone request never pays it (the cookbook's concurrency 1)
    for c, w in zip(cold[1:5], warm[1:5]):
        assert 2.0 <= c.ttft_s - w.ttft_s < 2.01  # the first batched prefill pays the stall
    assert [c.ttft_s for c in cold[5:]] == [w.ttft_s for w in warm[5:]]  # once per engine
