"""A fleet's capacity at the SLO and its plan: the same load sweep as one replica's, through N twin engines
on one virtual clock with smg's policy model (endpoints/router/) choosing each request's engine."""

from __future__ import annotations

import random

import pytest

from endpoints.router.policy_params import UnmodelledRouting, parse_router_spec
from endpoints.router.router_spec import RouterSpec
from endpoints.sim.calibration.fleet_capacity import (
    cached_fleet_capacity,
    cached_share,
    run_fleet_bench,
    sweep_fleet_capacity,
)
from endpoints.sim.calibration.fleet_plan import PlanPrice, plan_fleet, read_fleet_plans_json, write_fleet_plans_json
from endpoints.sim.calibration.slo_capacity import sweep_slo_capacity
from endpoints.sim.calibration.virtual_bench import BenchRequest, random_ids

FLAGS = ["--tp", "8", "--sim-hardware", "h200"]
SLO = (500.0, 50.0)  # TTFT ms, TPOT ms


def _shared_prefix(count: int = 120) -> list[BenchRequest]:
    """Eight 2,048-token system prompts, each request one of them and 512 tokens of its own, 10 per second."""
    rng = random.Random(3)
    shared = [random_ids(2048, rng) for _ in range(8)]
    return [BenchRequest(shared[i % 8] + random_ids(512, rng), 128, i * 0.1) for i in range(count)]


def _sessions(sessions: int = 13, turns: int = 5) -> list[BenchRequest]:
    """Multi-turn chat as the Mooncake trace's hash_ids have it: each turn's prompt is the previous turn's
    blocks plus new ones (a 512-token block per hash id), sessions interleaved, one turn every 0.5 s."""
    rng = random.Random(5)
    blocks: list[list[tuple[int, ...]]] = [[random_ids(512, rng)] for _ in range(sessions)]
    requests = []
    for turn in range(turns):
        for s in range(sessions):
            blocks[s].append(random_ids(512, rng))
            prompt = tuple(i for block in blocks[s] for i in block)
            requests.append(BenchRequest(prompt, 32, (turn * sessions + s) * 0.5))
    return requests


@pytest.fixture(scope="module")
def capacities() -> dict[str, float | None]:
    requests = _shared_prefix()
    one = sweep_slo_capacity(FLAGS, requests, *SLO)
    two = sweep_fleet_capacity(FLAGS, 2, RouterSpec("cache_aware"), requests, *SLO)
    return {"one": one.capacity_rps_at_slo, "two": two.capacity.capacity_rps_at_slo, "hit": two.hit_rate}


def test_two_cache_aware_replicas_carry_more_than_one_and_at_most_about_twice(capacities):
    assert capacities["one"] is not None and capacities["two"] is not None
    assert capacities["one"] < capacities["two"] <= 2.2 * capacities["one"]
    assert 0.5 < capacities["hit"] < 1.0  # the system prompts hit; each request's own tokens do not


def test_a_one_replica_fleet_is_the_single_server_sweep():
    requests = _shared_prefix(60)
    one = sweep_slo_capacity(FLAGS, requests, *SLO)
    fleet = sweep_fleet_capacity(FLAGS, 1, RouterSpec("round_robin"), requests, *SLO)
    assert fleet.capacity.capacity_rps_at_slo == pytest.approx(one.capacity_rps_at_slo)
    assert fleet.worker_shares == (1.0,)


def test_round_robin_scatters_a_sessions_turns_and_realises_fewer_cache_hits():
    requests = _sessions()
    results = {
        policy: run_fleet_bench(FLAGS, 2, parse_router_spec(RouterSpec(policy)), requests)
        for policy in ("cache_aware", "round_robin")
    }
    aware, robin = (cached_share(results[p].bench) for p in ("cache_aware", "round_robin"))
    assert robin <= aware - 0.15  # every other turn meets a cache that never saw the session
    # cache_aware keeps each session on one worker; round_robin alternates (13 sessions, an odd count: a
    # session's turns land on worker 0, 1, 0, ...)
    by_session = {s: {results["cache_aware"].workers[t * 13 + s] for t in range(5)} for s in range(13)}
    assert all(len(workers) == 1 for workers in by_session.values())
    assert sorted(results["round_robin"].workers.count(w) for w in (0, 1)) == [32, 33]


def test_a_policy_the_model_does_not_implement_is_refused_by_name():
    with pytest.raises(UnmodelledRouting, match="least_load"):
        sweep_fleet_capacity(FLAGS, 2, RouterSpec("least_load"), _shared_prefix(20), *SLO)


def test_the_plan_picks_the_cheapest_shape_holding_the_target_and_is_cached(tmp_path):
    requests = _shared_prefix(60)
    one = sweep_slo_capacity(FLAGS, requests, *SLO).capacity_rps_at_slo
    assert one is not None
    target_rps = 2.5 * one  # more than one replica can carry
    prices = [PlanPrice("on-demand", 4.54), PlanPrice("reserved", 3.50)]
    plan = plan_fleet("test-window", FLAGS, 8, (), prices, requests, target_rps, SLO, tmp_path)
    chosen = plan.chosen
    assert chosen is not None and chosen.holds_target and chosen.price_book == "reserved"
    assert chosen.replicas >= 2 and chosen.gpus == 8 * chosen.replicas
    assert chosen.fleet_usd_per_hour == pytest.approx(chosen.gpus * 3.50)
    assert chosen.usd_per_request_at_slo == pytest.approx(chosen.fleet_usd_per_hour / 3600 / chosen.capacity_rps_at_slo)
    holding = [r for r in plan.rows if r.holds_target]
    assert chosen.fleet_usd_per_hour == min(r.fleet_usd_per_hour for r in holding)
    # fewer replicas of the chosen policy were tried and fell short: the count is the smallest that holds
    assert any(
        r.policy == chosen.policy and r.replicas == chosen.replicas - 1 and not r.holds_target for r in plan.rows
    )
    assert {r.policy for r in plan.rows} == {"cache_aware", "round_robin"}
    assert {r.price_book for r in plan.rows} == {"on-demand", "reserved"}
    write_fleet_plans_json(tmp_path, plan)
    assert read_fleet_plans_json(tmp_path) == plan
    again = plan_fleet("test-window", FLAGS, 8, (), prices, requests, target_rps, SLO, tmp_path)
    assert again.rows == plan.rows and again.cpu_s < 1.0  # every sweep from the cache


def test_a_cached_fleet_sweep_is_read_back_equal(tmp_path):
    requests = _shared_prefix(40)
    first = cached_fleet_capacity("w", FLAGS, 2, RouterSpec("round_robin"), requests, *SLO, tmp_path)
    assert cached_fleet_capacity("w", FLAGS, 2, RouterSpec("round_robin"), requests, *SLO, tmp_path) == first
    assert len(list(tmp_path.glob("fleet-*.json"))) == 1
