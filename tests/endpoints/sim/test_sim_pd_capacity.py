"""A disaggregated fleet on the virtual clock: P prefill and D decode engines joined by their KV transfers, the
router's policy model choosing each request's two workers; its capacity sweep, and xP+yD shapes in the fleet plan."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from endpoints.capacity.deployment import Deployment
from endpoints.capacity.deployment_bench import bench_deployment, cached_share
from endpoints.capacity.ep_shapes import wide_ep_decode_flags
from endpoints.capacity.fleet_plan import plan_fleet, read_fleet_plans_json, write_fleet_plans_json
from endpoints.capacity.slo_capacity import (
    measure_capacity,
    read_fleet_capacity_json,
    sweep_capacity,
    write_fleet_capacity_json,
)
from endpoints.router.router_spec import RouterSpec
from endpoints.sim.virtual_bench import BenchRequest, random_ids
from endpoints.spec import FleetSpec, WorkerGroup, WorkerRole
from warehouse_builders import endpoint
from workloads.workload import WORKLOAD_SCHEMA, TraceFormat, Workload

FLAGS = ("--tp", "8", "--sim-hardware", "h200")
SLO = (500.0, 50.0)  # TTFT ms, TPOT ms
V3_KV_BYTES_PER_TOKEN = (512 + 64) * 61 * 2
ROUTER = RouterSpec("cache_aware")


def _shape(prefill: int, decode: int, *link: str) -> Deployment:
    return Deployment(FLAGS, 8, 0, ROUTER, prefill, decode, (*FLAGS, *link, "--disaggregation-mode", "prefill"),
                      (*FLAGS, "--disaggregation-mode", "decode"), 8)  # fmt: skip


def _shared_prefix(count: int = 120, every_s: float = 0.1) -> list[BenchRequest]:
    """Eight 2,048-token system prompts, each request one of them and 512 tokens of its own."""
    rng = random.Random(3)
    shared = [random_ids(2048, rng) for _ in range(8)]
    return [BenchRequest(shared[i % 8] + random_ids(512, rng), 128, i * every_s) for i in range(count)]


def test_the_first_token_waits_for_the_prefill_and_the_transfer_and_the_decode_is_not_interrupted():
    requests = _shared_prefix(60, every_s=0.25)
    fast = bench_deployment(_shape(1, 1), requests).bench
    slow = bench_deployment(_shape(1, 1, "--sim-kv-link-gb-s", "1"), requests).bench
    # A 2,560-token prompt's KV at 1 GB/s instead of 50: every first token later by about the difference.
    extra_s = 2560 * V3_KV_BYTES_PER_TOKEN * (1 / 1e9 - 1 / 50e9)
    gaps = [s.ttft_s - f.ttft_s for s, f in zip(slow.requests, fast.requests, strict=True)]
    assert min(gaps) > 0.9 * extra_s and sorted(gaps)[len(gaps) // 2] < 1.5 * extra_s
    # Aggregated, each arriving prompt's prefill step stalls the running decodes; disaggregated, none does.
    one = bench_deployment(Deployment(FLAGS, 8, 1, ROUTER), requests).bench
    assert fast.max_itl_s < one.max_itl_s
    # The prefill's radix cache hits: 7 of every 8 requests reuse a cached 2,048-token prompt.
    assert cached_share(fast) == pytest.approx(cached_share(one), abs=0.02) and cached_share(fast) > 0.6


def test_cache_aware_keeps_a_system_prompt_on_one_prefill_worker():
    result = bench_deployment(_shape(2, 1), _shared_prefix(80))
    by_prompt: dict[int, set[int]] = {}
    for i, worker in enumerate(result.workers):
        by_prompt.setdefault(i % 8, set()).add(worker)
    assert sum(len(w) == 1 for w in by_prompt.values()) >= 6  # a prompt's first request may land anywhere
    assert set(result.workers) == {0, 1}


def _shared_prefix_window(count: int = 40) -> Workload:
    """A trace like _shared_prefix, shorter: eight 512-token system prompts, each request one of them and 512 tokens
    of its own, 32 tokens out, 10 per second."""
    rows = [
        {"request_id": f"r{i}", "arrival_s": i * 0.1, "input_tokens": 1024, "output_tokens": 32,
         "prefix_blocks": [i % 8, 1000 + i]}
        for i in range(count)
    ]  # fmt: skip
    return Workload("w", "trace", TraceFormat.MOONCAKE, "ms", 512, pa.Table.from_pylist(rows, schema=WORKLOAD_SCHEMA))


def test_a_pd_capacity_sweep_is_read_back_equal_from_its_cache(tmp_path):
    requests = _shared_prefix(60)
    first = sweep_capacity(_shape(1, 1), requests, *SLO)
    assert first.capacity.capacity_rps_at_slo is not None and first.replicas == 1  # routed over 1 prefill worker
    write_fleet_capacity_json(tmp_path / "sweep-pd.json", first)
    assert read_fleet_capacity_json(tmp_path / "sweep-pd.json") == first
    again = sweep_capacity(_shape(1, 1), requests, *SLO)  # deterministic, CPU time aside
    assert (again.capacity.probes, again.hit_rate, again.p95_ttft_ms) == (
        first.capacity.probes,
        first.hit_rate,
        first.p95_ttft_ms,
    )
    # measure_capacity keeps a PD endpoint's sweep under its inputs' key and reads it back the second time
    groups = (WorkerGroup(WorkerRole.PREFILL, 1, 8), WorkerGroup(WorkerRole.DECODE, 1, 8))
    spec = endpoint(server_args=FLAGS, gpu_count=16, fleet=FleetSpec(ROUTER, groups))
    window, cache = _shared_prefix_window(40), tmp_path / "cache"
    measured = measure_capacity(spec, window, *SLO, cache)
    assert measured is not None and measured.capacity_rps_at_slo is not None
    assert measure_capacity(spec, window, *SLO, cache) == measured
    [cached] = cache.glob("sweep-*.json")
    kept = read_fleet_capacity_json(cached)
    assert kept.capacity == measured and (kept.replicas, kept.policy) == (1, "cache_aware")


def test_the_plan_tries_disaggregated_shapes_and_chooses_the_fewest_gpus_of_all(tmp_path):
    requests = _shared_prefix(120)
    one = sweep_capacity(Deployment(FLAGS, 8), requests, *SLO).capacity.capacity_rps_at_slo
    assert one is not None
    pd = Deployment(FLAGS, 8, 0, None, 0, 0, (*FLAGS, "--disaggregation-mode", "prefill"),
                    (*FLAGS, "--disaggregation-mode", "decode"), 8)  # fmt: skip
    plan = plan_fleet(Deployment(FLAGS, 8), (), requests, 2.5 * one, SLO, one, pd=[pd])
    disaggregated = [s for s in plan.shapes if s.prefill_workers]
    assert disaggregated and all(s.replicas == s.prefill_workers + s.decode_workers for s in disaggregated)
    assert all(s.gpus == 8 * s.replicas and s.policy == "cache_aware" for s in disaggregated)
    chosen = plan.chosen
    assert chosen is not None and chosen.gpus == min(s.gpus for s in plan.shapes if s.holds_target)
    # for each prefill count tried, one decode worker fewer than the fewest that held fell short
    for s in disaggregated:
        if (
            s.holds_target
            and s.decode_workers > 1
            and s.gpus
            == min(t.gpus for t in disaggregated if t.prefill_workers == s.prefill_workers and t.holds_target)
        ):
            assert any(t.prefill_workers == s.prefill_workers and t.decode_workers == s.decode_workers - 1
                       and not t.holds_target for t in disaggregated)  # fmt: skip
    assert chosen.capacity_rps_at_slo is not None and chosen.capacity_rps_at_slo >= 2.5 * one
    # Each shape says where its TTFT went at the target: a disaggregated one's transfer parts, a replica's none.
    assert all(s.mean_ttft_parts_ms and "kv_transfer" in s.mean_ttft_parts_ms for s in disaggregated)
    assert all(s.mean_ttft_parts_ms and list(s.mean_ttft_parts_ms) == ["queue", "prefill"]
               for s in plan.shapes if not s.prefill_workers)  # fmt: skip
    write_fleet_plans_json(tmp_path, plan)
    assert read_fleet_plans_json(tmp_path) == plan  # the shapes' roles come back from the file
    assert all(s.label == f"{s.prefill_workers}P{s.decode_workers}D x cache_aware" for s in disaggregated)


def test_the_plan_tries_wide_expert_parallel_decode_workers_priced_by_their_gpus(tmp_path):
    requests = _shared_prefix(120)
    one = sweep_capacity(Deployment(FLAGS, 8), requests, *SLO).capacity.capacity_rps_at_slo
    assert one is not None
    narrow = Deployment(FLAGS, 8, 0, None, 0, 0, (*FLAGS, "--disaggregation-mode", "prefill"),
                        (*FLAGS, "--disaggregation-mode", "decode"), 8)  # fmt: skip
    wide_flags = wide_ep_decode_flags(narrow.decode_flags, 16)
    assert {"--enable-dp-attention", "--enable-eplb", "--enable-two-batch-overlap"} <= set(wide_flags)
    assert wide_flags[wide_flags.index("--nnodes") + 1] == "2"  # 16 H200s are two hosts
    wide = Deployment(FLAGS, 8, 0, None, 0, 0, narrow.prefill_flags, wide_flags, 16, 16)
    plan = plan_fleet(Deployment(FLAGS, 8), (), requests, 2.5 * one, SLO, one, pd=[narrow, wide])
    ep = [s for s in plan.shapes if s.decode_ep_size]
    assert ep and all(s.gpus == 8 * s.prefill_workers + 16 * s.decode_workers for s in ep)
    assert all(s.label == f"{s.prefill_workers}P{s.decode_workers}D (EP16 decode) x cache_aware" for s in ep)
    chosen = plan.chosen
    assert chosen is not None and chosen.gpus == min(s.gpus for s in plan.shapes if s.holds_target)
    write_fleet_plans_json(tmp_path, plan)
    assert read_fleet_plans_json(tmp_path) == plan
    # A width the expert count and the hosts cannot carry is refused with the twin's reason.
    with pytest.raises(ValueError, match="must divide --tp-size|split evenly|KV|weights"):
        wide_ep_decode_flags(("--tp", "8", "--sim-hardware", "h100"), 4)
