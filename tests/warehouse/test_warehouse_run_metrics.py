"""run_summary, metric by metric, against numbers worked out by hand on one small run (see the comments)."""

from __future__ import annotations

import dataclasses
import math
from datetime import date

import pytest

from endpoints.probes.probe_records import ServerSample
from warehouse.backends.store import Warehouse
from warehouse.marts.mart_rows import RunSummaryRow
from warehouse.marts.run_rows import RunContext
from warehouse_builders import (
    T0_WALL_S,
    endpoint,
    failed_request,
    gpu_sample,
    request,
    run_info,
    server_sample,
    write_run,
)

WEEK = date(2025, 3, 3)
SPEC = endpoint()  # 8 GPUs at $2 per GPU-hour: 90 s cost $0.40
PRICES = """
gpu:
  - {gpu_type: H200, usd_per_gpu_hour: 3.0, as_of: 2026-11-29, source: "a test price list"}
api:
  - name: test-api
    models: [deepseek-ai/DeepSeek-V3]
    usd_per_mtok_cached_input: 1.0
    usd_per_mtok_uncached_input: 2.0
    usd_per_mtok_output: 10.0
    as_of: 2026-11-29
    source: "a test price list"
"""


def _records(run_id: str) -> list:
    return [
        # chunks 100/400/1000 ms with 5 tokens: (5-1)/(3-1) = 2 tokens a gap -> ITL 150, 300; TPOT 900/4 = 225.
        request(
            run_id,
            "q1",
            100,
            1000,
            cached_tokens=0,
            completion_tokens=5,
            reasoning_tokens=1,
            ttfa_ms=150,
            chunks_ms=(100, 400, 1000),
            sent_mono_s=20.0,
        ),
        # 2 tokens a gap -> ITL 400, 500; TPOT 1800/4 = 450.
        request(
            run_id,
            "q2",
            200,
            2000,
            cached_tokens=500,
            completion_tokens=5,
            reasoning_tokens=2,
            ttfa_ms=250,
            chunks_ms=(200, 1000, 2000),
            sent_mono_s=30.0,
        ),
        # 1 token a gap -> ITL 1000, 1700; TPOT 2700/2 = 1350; reasoning not reported.
        request(
            run_id,
            "q3",
            300,
            3000,
            cached_tokens=1000,
            completion_tokens=3,
            chunks_ms=(300, 1300, 3000),
            sent_mono_s=40.0,
        ),
        # 1 token a gap -> ITL 3600; TPOT 3600.
        request(
            run_id,
            "q4",
            400,
            4000,
            cached_tokens=500,
            completion_tokens=2,
            reasoning_tokens=0,
            chunks_ms=(400, 4000),
            sent_mono_s=50.0,
        ),
        failed_request(run_id, "q5", sent_mono_s=60.0),
        # Warm-up: sent before warmup_s = 10 s; it must not show anywhere.
        request(
            run_id,
            "w1",
            9000,
            9900,
            cached_tokens=1000,
            completion_tokens=900,
            reasoning_tokens=900,
            chunks_ms=(9000, 9900),
            is_warmup=True,
            sent_mono_s=5.0,
        ),
    ]


def _server_samples(run_id: str) -> list:
    s = server_sample
    return [
        # Window in wall time: t0 + 10 s to t0 + 100 s.
        s(run_id, 5, "sglang:num_running_reqs", 99),  # before the window: ignored
        s(run_id, 10, "sglang:num_running_reqs", 2),
        s(run_id, 40, "sglang:num_running_reqs", 4),
        s(run_id, 70, "sglang:num_running_reqs", 1),  # held until the window ends at 100 s
        s(run_id, 10, "sglang:num_running_reqs", 1, source="http://127.0.0.1:30001"),  # a second worker
        # Worker A's cap as the probes read it from its /server_info; worker B has none recorded and
        # falls back to runs.max_running_requests (10). Not a scraped sample: not in server_sample_count.
        ServerSample(
            run_id, T0_WALL_S + 1, "http://127.0.0.1:30000", "server_info:max_running_requests", "info", "{}", 8
        ),
        s(run_id, 10, "sglang:token_usage", 0.2),
        s(run_id, 70, "sglang:token_usage", 0.5),
        s(run_id, 5, "sglang:cached_tokens_total", 0),
        s(run_id, 10, "sglang:cached_tokens_total", 100),
        s(run_id, 70, "sglang:cached_tokens_total", 600),
        s(run_id, 101, "sglang:cached_tokens_total", 900),  # the scrape just after the last finish counts
        s(run_id, 10, "sglang:prompt_tokens_total", 200),
        s(run_id, 101, "sglang:prompt_tokens_total", 2200),
        s(run_id, 10, "sglang:num_retracted_requests_total", 1),
        s(run_id, 101, "sglang:num_retracted_requests_total", 4),
        s(run_id, 130, "sglang:num_retracted_requests_total", 50),  # long after the window: ignored
        # Decode steps by how they ran, one series per mode label, on two workers: in the window A ran 300 - 100 = 200
        # steps from a graph and 60 - 10 = 50 without, B 100 from a graph.
        _passes(run_id, 10, "decode_cuda_graph", 100),
        _passes(run_id, 101, "decode_cuda_graph", 300),
        _passes(run_id, 10, "decode_none", 10),
        _passes(run_id, 101, "decode_none", 60),
        _passes(run_id, 10, "prefill_none", 5),  # prefill passes are not decode steps
        _passes(run_id, 101, "prefill_none", 500),
        _passes(run_id, 10, "decode_cuda_graph", 0, source="http://127.0.0.1:30001"),
        _passes(run_id, 101, "decode_cuda_graph", 100, source="http://127.0.0.1:30001"),
    ]


def _passes(run_id: str, at_s: float, mode: str, value: float, source: str = "http://127.0.0.1:30000") -> ServerSample:
    """sglang:cuda_graph_passes_total{mode} as the probes store it (labels sorted, dp_rank summed away)."""
    labels = f'{{"mode":"{mode}","model_name":"m"}}'
    return ServerSample(run_id, T0_WALL_S + at_s, source, "sglang:cuda_graph_passes_total", "counter", labels, value)


def _gpu_samples(run_id: str) -> list:
    return [
        gpu_sample(run_id, 20, 50.0),
        gpu_sample(run_id, 30, 70.0),
        gpu_sample(run_id, 30, None, gpu_index=1),  # unmeasured: not a 0
        gpu_sample(run_id, 200, 0.0),  # after the window
    ]


@pytest.fixture(scope="module")
def row(tmp_path_factory) -> RunSummaryRow:
    root = tmp_path_factory.mktemp("wh")
    prices = root / "prices.yaml"
    prices.write_text(PRICES)
    store = Warehouse(root / "wh", prices_path=prices)
    # The replay's window: from t0 + 10 s (the warm-up's end) to the last finish at t0 + 100 s.
    info = run_info(
        "r1", 90.0, warmup_s=10.0, server_info={"version": "0.5.4", "backend": "sim", "max_running_requests": 10}
    )
    context = RunContext(slo_ttft_ms=350.0, slo_tpot_ms=1000.0, target_rps=1.0)
    write_run(
        store.lake_root, WEEK, "chat", info, SPEC, _records("r1"), context, _server_samples("r1"), _gpu_samples("r1")
    )
    store.refresh()
    [summary] = store.run_summary()
    return summary


def test_cost_over_the_measured_window_excludes_the_warm_up(row):
    # runs.window_s = 90 s, warm-up already out (not subtracted again); 8 x $2/h x 90 s / 3600 = $0.40;
    # 4 completed -> $0.10 each.
    assert row.window_s == pytest.approx(90.0)
    assert row.run_cost_usd == pytest.approx(0.40)
    assert (row.completed_requests, row.failed_requests) == (4, 1)
    assert row.realised_cost_per_request_usd == pytest.approx(0.10)
    # 5 + 5 + 3 + 2 = 15 output tokens: $0.40 / 15e-6 Mtok; 15 tokens / 90 s.
    assert row.cost_per_mtok_output_usd == pytest.approx(0.40 / 15e-6)
    assert row.sustained_output_tokens_per_s == pytest.approx(15 / 90)
    assert row.list_usd_per_gpu_hour == pytest.approx(3.0)


def test_api_equivalent_cost_and_break_even(row):
    # cached 0+500+1000+500 = 2000 at $1, uncached 4000-2000 = 2000 at $2, output 15 at $10 per Mtok.
    api = (2000 * 1.0 + 2000 * 2.0 + 15 * 10.0) / 1e6
    assert row.api_price_name == "test-api"
    assert row.api_cost_usd == pytest.approx(api)
    assert row.api_cost_per_request_usd == pytest.approx(api / 4)
    assert row.self_host_to_api_cost_ratio == pytest.approx(0.40 / api)
    # occupancy (below) x the cost ratio.
    assert row.break_even_utilisation == pytest.approx(0.40 / api * (0.2 * 60 + 0.5 * 30) / 90)  # x occupancy


def test_client_and_server_hit_rates(row):
    assert row.prefix_cache_hit_rate == pytest.approx(2000 / 4000)
    # Counters inside the window: cached 900 - 100 = 800, prompt 2200 - 200 = 2000.
    assert row.server_prefix_cache_hit_rate == pytest.approx(800 / 2000)
    assert row.retractions == 3  # 4 - 1


def test_the_share_of_decode_steps_run_without_a_cuda_graph(row):
    # 50 eager of 200 + 50 + 100 decode steps on both workers; the prefill passes are not counted.
    assert row.eager_decode_share == pytest.approx(50 / 350)


def test_batch_occupancy_and_kv_usage_are_time_weighted(row):
    # Worker A: 2 for 30 s, 4 for 30 s, 1 for 30 s = 7/3 of its 8 slots; worker B: 1 for 90 s of its 10:
    # the fleet ran (7/3 + 1) of 18 slots. Each worker against its own cap, so it stays within 0..1.
    assert row.running_cap_share == pytest.approx((7 / 3 + 1) / 18)
    # 0.2 for 60 s, 0.5 for 30 s.
    assert row.kv_usage_mean == pytest.approx((0.2 * 60 + 0.5 * 30) / 90)
    # No capacity sweep: the occupancy is the share of the KV pool the running requests held.
    assert (row.batch_occupancy, row.batch_occupancy_basis) == (pytest.approx(row.kv_usage_mean), "kv_pool")
    assert row.kv_usage_max == pytest.approx(0.5)
    assert row.gpu_utilisation_pct == pytest.approx(60.0)
    assert (row.server_sample_count, row.gpu_sample_count) == (24, 3)  # 16 + the 8 graph-pass samples


def test_latency_percentiles(row):
    # Linear interpolation over 4 values v: rank q x 3.
    assert [getattr(row, f"p{q}_ttft_ms") for q in (50, 90, 95, 99)] == pytest.approx([250, 370, 385, 397])
    assert [getattr(row, f"p{q}_ttfa_ms") for q in (50, 90, 95, 99)] == pytest.approx([275, 370, 385, 397])
    assert [getattr(row, f"p{q}_tpot_ms") for q in (50, 90, 95, 99)] == pytest.approx(
        [900, 1350 + 0.7 * 2250, 1350 + 0.85 * 2250, 1350 + 0.97 * 2250]
    )
    assert [getattr(row, f"p{q}_e2e_ms") for q in (50, 90, 95, 99)] == pytest.approx([2500, 3700, 3850, 3970])
    # ITL gaps per token: 150, 300, 400, 500, 1000, 1700, 3600; rank q x 6.
    assert [getattr(row, f"p{q}_itl_ms") for q in (50, 90, 95, 99)] == pytest.approx(
        [500, 1700 + 0.4 * 1900, 1700 + 0.7 * 1900, 1700 + 0.94 * 1900]
    )


def test_queueing_share_of_the_p95_tail(row):
    # e2e from schedule 1010..4010 ms: p95 = 3860, so only q4 is in the tail. Fastest prefill: q1 with
    # 1000 uncached tokens in 100 ms = 10 tokens/ms; q4's 500 uncached tokens model 50 ms of prefill, so
    # of its 410 ms to first token from the schedule, 360 ms were waiting: 360 / 4010.
    assert row.p95_e2e_from_schedule_ms == pytest.approx(3860.0)
    assert row.p95_queue_share == pytest.approx(360 / 4010)
    assert row.queue_share_source == "modelled"  # no request reported meta_info.queue_time


def _queue_share(tmp_path, queue_times_s: dict[str, float]) -> RunSummaryRow:
    store = Warehouse(tmp_path / "wh")
    records = [dataclasses.replace(r, server_queue_time_s=queue_times_s.get(r.request_id)) for r in _records("r1")]
    write_run(store.lake_root, WEEK, "chat", run_info("r1", 90.0, warmup_s=10.0), SPEC, records)
    store.refresh()
    [summary] = store.run_summary()
    return summary


def test_queueing_share_is_measured_where_the_server_reports_queue_time(tmp_path):
    # q4 alone is the p95 tail: 10 ms from its schedule to its send, then 200 ms in the server's waiting
    # queue (meta_info.queue_time) -> 210 ms of its 4010 ms from the schedule. Warm-up's value ignored.
    row = _queue_share(tmp_path, {"q1": 0.05, "q2": 0.05, "q3": 0.05, "q4": 0.2, "w1": 9.0})
    assert (row.p95_queue_share, row.queue_share_source) == (pytest.approx(210 / 4010), "server")


def test_queueing_share_falls_back_to_the_model_when_the_tail_lacks_queue_time(tmp_path):
    row = _queue_share(tmp_path / "a", {"q1": 0.05, "q2": 0.05, "q3": 0.05})  # q4, the tail, reports none
    assert (row.p95_queue_share, row.queue_share_source) == (pytest.approx(360 / 4010), "modelled")


def test_reasoning_share_goodput_and_fleet_sizing(row):
    # Requests reporting reasoning: q1 1/5, q2 2/5, q4 0/2 -> 3 / 12.
    assert row.reasoning_token_share == pytest.approx(0.25)
    # SLO TTFT 350 ms from schedule, TPOT 1000 ms: q1 and q2 pass; q3 TPOT 1350, q4 TTFT 410 fail;
    # the failed q5 counts against: 2 / 5.
    assert row.good_requests == 2
    assert row.goodput == pytest.approx(0.4)
    assert row.goodput_rps == pytest.approx(2 / 90)
    # 1 request/s at 2/90 good requests/s per replica -> 45 replicas of 8 GPUs at $2.
    assert row.replicas_for_target == 45
    assert row.fleet_usd_per_hour == pytest.approx(45 * 8 * 2.0)
    assert (row.schedule_lag_p99_ms, row.client_degraded) == (2.5, False)


def test_unmeasured_numbers_are_null_not_zero(tmp_path):
    store = Warehouse(tmp_path / "wh")
    info = run_info("r1", 90.0, server_info={"version": "0.5.4"})  # no max_running_requests
    records = [request("r1", "q1", 100, 1000, completion_tokens=None, chunks_ms=(100, 300, 1000))]
    samples = [
        server_sample("r1", 1, "sglang:num_running_reqs", 3),
        server_sample("r1", 1, "sglang:num_running_reqs", 2, source="http://127.0.0.1:30001"),
        # Only the second worker's cap is known: the fleet's occupancy is unknown, not 2/4 or 5/4.
        ServerSample("r1", T0_WALL_S, "http://127.0.0.1:30001", "server_info:max_running_requests", "info", "{}", 4),
    ]
    write_run(
        store.lake_root,
        WEEK,
        "chat",
        info,
        SPEC,
        records,
        server_samples=samples,
        gpu_samples=[gpu_sample("r1", 1, None)],
    )
    store.refresh()
    [row] = store.run_summary()
    for column in (
        "batch_occupancy",
        "server_prefix_cache_hit_rate",
        "retractions",
        "eager_decode_share",
        "gpu_utilisation_pct",
        "reasoning_token_share",
        "goodput",
        "good_requests",
        "replicas_for_target",
        "output_tokens",
    ):
        assert getattr(row, column) is None, column
    # Without a reported completion count a chunk gap stands for one token: 200 and 700 ms.
    assert (row.p50_itl_ms, row.p99_itl_ms) == (pytest.approx(450.0), pytest.approx(200 + 0.99 * 500))
    assert not math.isnan(row.p95_queue_share)


def test_batch_occupancy_is_against_the_batch_the_endpoint_runs_at_its_slo_capacity(tmp_path):
    # The same samples, with the sweep's running batch at capacity known: 2.5 requests a worker. The two workers
    # ran 7/3 + 1 requests on average, of the 2 x 2.5 they run when they carry their capacity inside the SLO.
    store = Warehouse(tmp_path / "wh")
    info = run_info("r1", 90.0, warmup_s=10.0, server_info={"version": "0.5.4", "backend": "sim"})
    context = RunContext(slo_ttft_ms=350.0, slo_tpot_ms=1000.0, running_requests_at_slo=2.5)
    write_run(store.lake_root, WEEK, "chat", info, SPEC, _records("r1"), context, _server_samples("r1"))
    store.refresh()
    [summary] = store.run_summary()
    assert summary.batch_occupancy == pytest.approx((7 / 3 + 1) / (2 * 2.5))
    assert (summary.batch_occupancy_basis, summary.running_requests_at_slo) == ("slo_batch", 2.5)
