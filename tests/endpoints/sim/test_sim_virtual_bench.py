"""The virtual bench measures like sglang.bench_serving: its arrival pattern at fixed concurrency
(one burst of `concurrency` requests on an idle server, then one request per freed slot) and its
TTFT statistics (mean, median, numpy-linear P99), which the calibration compares with published runs."""

from __future__ import annotations

import random

import pytest

from endpoints.sim.virtual_bench import BenchRequest, BenchResult, RequestTiming, random_ids, run_bench

B200_R1 = ["--model-path", "deepseek-ai/DeepSeek-R1-0528", "--tp", "8", "--sim-hardware", "b200"]


def _requests(count: int, prompt_tokens: int, max_output_tokens: int, seed: int = 7) -> list[BenchRequest]:
    """Output lengths spread over [max/4, max], so later requests arrive one by one as slots free."""
    rng = random.Random(seed)
    return [
        BenchRequest(random_ids(prompt_tokens, rng), rng.randint(max_output_tokens // 4, max_output_tokens))
        for _ in range(count)
    ]


def _timing(ttft_s: float, sent_s: float = 0.0) -> RequestTiming:
    return RequestTiming(10, 2, 0, 0, sent_s, ttft_s, ttft_s + 0.01, (0.01,))


def test_ttft_statistics_follow_bench_serving():
    # 1..100 ms: numpy's linear P99 is 99.01 ms (nearest-rank would give 99 or 100).
    result = BenchResult(1.0, tuple(_timing(ms / 1e3) for ms in range(1, 101)), engine=None)
    assert result.median_ttft_s == pytest.approx(0.0505)
    assert result.p99_ttft_s == pytest.approx(0.09901)
    assert result.mean_ttft_s == pytest.approx(0.0505)
    assert result.max_itl_s == pytest.approx(0.01)


def test_fixed_concurrency_sends_one_burst_then_one_request_per_freed_slot():
    concurrency, count = 6, 18
    result = run_bench(B200_R1, _requests(count, 300, 40), concurrency)
    assert len(result.first_wave_ttft_s) == concurrency
    finish_times = {round(r.sent_s + r.e2e_s, 9) for r in result.requests}
    later = [r for r in result.requests if r.sent_s > 0]
    assert len(later) == count - concurrency
    assert all(round(r.sent_s, 9) in finish_times for r in later)  # sent the moment a slot frees


def test_first_burst_dominates_the_tail_and_grows_with_its_size():
    small = run_bench(B200_R1, _requests(24, 1000, 200), 8)
    large = run_bench(B200_R1, _requests(96, 1000, 200), 32)
    # The burst is prefilled a budget of tokens per step, so its last request waits for all of it.
    assert max(large.first_wave_ttft_s) > 2 * max(small.first_wave_ttft_s)
    assert large.p99_ttft_s > large.median_ttft_s
    assert large.mean_ttft_s > large.median_ttft_s  # the burst pulls the mean above the median


def test_the_stream_interval_changes_no_timing_only_how_many_chunks():
    # published_points.py measures means with chunks every 64 tokens to deliver fewer updates: the
    # twin's steps do not depend on streaming, so TTFT, TPOT, latency and throughput are the same.
    requests = _requests(24, 400, 120)
    per_token = run_bench(B200_R1, requests, 8)
    coarse = run_bench(B200_R1 + ["--stream-interval", "64"], requests, 8)
    assert [(r.ttft_s, r.e2e_s, r.output_tokens) for r in coarse.requests] == [
        (r.ttft_s, r.e2e_s, r.output_tokens) for r in per_token.requests
    ]
    assert coarse.mean_tpot_s == per_token.mean_tpot_s and coarse.total_tok_s == per_token.total_tok_s
    assert sum(len(r.chunk_gaps_s) for r in coarse.requests) < sum(len(r.chunk_gaps_s) for r in per_token.requests)


def test_warm_ups_run_first_unmeasured_and_the_measured_burst_starts_after_them():
    # InferenceX's benchmark_serving.py: 2·C copies of the first prompt behind the same semaphore, all done
    # before the measured run's first burst of C.
    concurrency = 4
    requests = _requests(12, 300, 40)
    plain = run_bench(B200_R1, requests, concurrency)
    warmed = run_bench(B200_R1, requests, concurrency, warmups=2 * concurrency)
    assert len(warmed.requests) == len(requests)  # the warm-ups are not in the result
    start_s = min(r.sent_s for r in warmed.requests)
    assert start_s > 0  # the measured run starts once the warm-ups are done
    assert len(warmed.first_wave_ttft_s) == concurrency
    assert warmed.engine.steps > plain.engine.steps  # the warm-ups ran on the same engine
    # Arrivals count from the end of the warm-ups, so the measured run itself is the same run.
    assert warmed.duration_s == pytest.approx(plain.duration_s, rel=0.05)
