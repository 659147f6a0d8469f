"""One test per mechanism the twin claims, in virtual time: prefix caching, occupancy, retraction,
overlap scheduling, calibration shape."""

import asyncio
import random
from dataclasses import replace

from endpoints.clock import VirtualClock
from endpoints.sim.cost.profiles import Vendor, cost_constants_for
from endpoints.sim.engine.kv_pool import KvPool
from endpoints.sim.engine.sim_request import GenerateInput
from endpoints.sim.engine_builder import build_engine
from endpoints.sim.server_args import parse_server_args
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


def _on_pool(
    pool_tokens: int,
    specs: list[GenerateInput],
    flags: list[str] = H200,
    spacing_s: float = 0.0,
    look_at_s: float | None = None,
):
    """Serve `specs` (the i-th arriving at i × spacing_s) on a twin whose KV pool holds `pool_tokens`: the engine
    and every final update, or, with `look_at_s`, the engine and how many requests were running then."""
    clock = VirtualClock()

    async def main():
        engine = build_engine(parse_server_args(flags), clock)
        engine.scheduler.pool = KvPool(pool_tokens)
        engine.start()

        async def arrive(i: int, spec: GenerateInput):
            await asyncio.sleep(spacing_s * i)
            return await engine.generate(spec)

        tasks = [asyncio.ensure_future(arrive(i, spec)) for i, spec in enumerate(specs)]
        try:
            if look_at_s is None:
                return engine, await asyncio.gather(*tasks)
            await asyncio.sleep(look_at_s)
            running = len(engine.scheduler.running)
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            return engine, running
        finally:
            await engine.stop()

    return clock.run(main())


def _kv_pressure(pool_tokens: int):
    rng = random.Random(3)
    # Not ignore_eos: SGLang reserves a fixed-length request's whole budget, so only these can over-commit.
    specs = [GenerateInput(f"r{i}", random_ids(500, rng), 600) for i in range(16)]
    # One by one, so the later ones meet running requests' decayed ratio.
    return _on_pool(pool_tokens, specs, spacing_s=0.25)


def test_kv_exhaustion_retracts_running_requests_instead_of_crashing_and_all_finish():
    # 16 requests × (500 + 600) tokens need 17,600 slots; the pool has 6,000. Admission is optimistic about
    # running requests (new_token_ratio × their remaining budget), so decode runs out of slots and must retract.
    engine, done = _kv_pressure(6000)
    assert all(u.finish_reason is not None and 300 <= u.output_tokens <= 600 for u in done)  # each ran to its end
    assert engine.scheduler.retractions.requests > 0
    assert sum(u.num_retractions for u in done) == engine.scheduler.retractions.requests
    assert engine.scheduler.new_token_ratio > engine.scheduler.min_new_token_ratio
    assert engine.scheduler.pool.reserved_tokens == 0 and engine.scheduler.running == []
    assert all(u.cached_tokens <= u.prompt_tokens for u in done)  # a re-prefill is not reported as a hit


def test_a_roomy_pool_never_retracts():
    engine, done = _kv_pressure(200_000)
    assert engine.scheduler.retractions.requests == 0 and all(u.num_retractions == 0 for u in done)


def test_admission_is_optimistic_more_requests_run_than_their_full_budgets_fit():
    rng = random.Random(5)
    specs = [GenerateInput(f"r{i}", random_ids(200, rng), 2000) for i in range(20)]
    _, running = _on_pool(20_000, specs, spacing_s=0.25, look_at_s=6.0)
    assert running * (200 + 2000) > 20_000  # more than a reserve-everything scheduler would admit


def _first_burst_running(extra_flags: list[str], pool_tokens: int, ignore_eos: bool) -> int:
    """How many of 20 simultaneous requests (200-token prompts, 2,000 output tokens) the first step admits."""
    rng = random.Random(5)
    specs = [GenerateInput(f"r{i}", random_ids(200, rng), 2000, ignore_eos) for i in range(20)]
    return _on_pool(pool_tokens, specs, H200 + extra_flags, look_at_s=0.5)[1]


def test_a_new_request_is_admitted_on_its_whole_budget_as_sglangs_prefill_adder_does():
    # SGLang's add_one_req: a waiting request needs its prompt + its whole max_new_tokens free, only the running
    # ones count at new_token_ratio. 20,000 slots hold 9 of 2,200 tokens each (20,000 // 2,200), not the
    # 20,000 // (200 + 0.7 × 2,000) = 12 an estimate at the ratio would let in.
    assert _first_burst_running([], 20_000, ignore_eos=False) == 9


def test_ignore_eos_without_a_radix_cache_admits_only_what_runs_to_the_end():
    # add_one_req_ignore_eos (benchmarks: --ignore-eos against --disable-radix-cache): exact, never retracts.
    # 9 × 2,200 = 19,800 leaves 200 slots, more than IGNORE_EOS_RESERVE_TOKENS per request.
    assert _first_burst_running(["--disable-radix-cache"], 20_000, ignore_eos=True) == 9
    assert _first_burst_running(["--disable-radix-cache"], 19_805, ignore_eos=True) == 8  # 5 spare < 9 × 1


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


def test_cold_start_holds_only_the_first_batched_prefill_of_different_prompts_and_only_once():
    constants = replace(cost_constants_for(Vendor.NVIDIA), cold_prefill_s=2.0)
    rng = random.Random(9)
    single = [BenchRequest(random_ids(500, rng), 8)]
    copy = random_ids(500, rng)
    warmups = [BenchRequest(copy, 8, arrival_s=2.0) for _ in range(4)]  # InferenceX's warm-ups: one prompt, copied
    burst = [BenchRequest(random_ids(400 + 50 * i, rng), 8, arrival_s=5.0) for i in range(4)]
    second_burst = [BenchRequest(random_ids(400 + 50 * i, rng), 8, arrival_s=10.0) for i in range(4)]
    requests = single + warmups + burst + second_burst
    warm = run_bench(H200 + ["--disable-radix-cache"], requests, cost_constants=constants).requests
    cold = run_bench(H200 + ["--disable-radix-cache", "--sim-cold-start"], requests, cost_constants=constants).requests
    assert cold[0].ttft_s == warm[0].ttft_s  # a lone request never pays it (the cookbook's concurrency 1)
    assert [c.ttft_s for c in cold[1:5]] == [w.ttft_s for w in warm[1:5]]  # nor a batch of copies of one prompt
    for c, w in zip(cold[5:9], warm[5:9]):
        assert 2.0 <= c.ttft_s - w.ttft_s < 2.01  # the first batch of different prompts pays the stall
    assert [c.ttft_s for c in cold[9:]] == [w.ttft_s for w in warm[9:]]  # once per engine


def test_once_kv_stops_admission_nothing_is_admitted_until_a_running_request_leaves():
    # SGLang's batch_is_full: the running requests' new_token_ratio decays every decode step, which frees
    # estimated room, but the scheduler tries no admission until one of them finishes.
    rng = random.Random(6)
    specs = [GenerateInput(f"r{i}", random_ids(200, rng), 2000 - i, True) for i in range(10)]
    _, done = _on_pool(20_000, specs)
    first_nine, tenth = done[:9], done[9]
    assert all(u.admitted_s == first_nine[0].admitted_s for u in first_nine)  # 9 x 2,200 fit, the 10th does not
    first_finish_s = min(u.now_s for u in first_nine)
    assert tenth.admitted_s >= first_finish_s  # not before a running request left, ~2,000 decode steps later
