"""The routing reference (endpoints/capacity/routing_reference.py): the same requests through one replica and
through the fleet's router model, so the diagnosis blames routing for what routing loses and not for what a
pool that evicts loses."""

from __future__ import annotations

import pytest
from test_sim_fleet_capacity import FLAGS, _sessions

from endpoints.capacity.routing_reference import (
    RoutingReference,
    measure_routing_reference,
    read_routing_reference_json,
    routing_reference,
    write_routing_reference_json,
)
from endpoints.router.router_spec import RouterSpec
from endpoints.spec import EndpointMode, EndpointSpec, FleetSpec, WorkerGroup, WorkerRole

# A KV pool of about 110,000 tokens: 60 conversations of up to 3,072 tokens do not fit in one.
SMALL_POOL = [*FLAGS, "--mem-fraction-static", "0.62"]


def test_round_robin_over_four_replicas_trails_one_replica_and_cache_aware_does_not():
    requests = _sessions()  # 13 conversations: round_robin moves each one to the next worker every turn
    robin = routing_reference(FLAGS, 4, "round_robin", (), requests)
    aware = routing_reference(FLAGS, 4, "cache_aware", (), requests)
    assert robin.single_replica_hit_rate == aware.single_replica_hit_rate  # the same replay of one replica
    assert robin.single_replica_hit_rate > 0.6  # each turn meets the previous turns' blocks
    assert robin.single_replica_hit_rate - robin.fleet_model_hit_rate >= 0.2  # a turn never meets its last cache
    assert abs(aware.single_replica_hit_rate - aware.fleet_model_hit_rate) < 0.02  # a conversation stays on one
    assert (robin.requests, robin.replicas, robin.policy) == (len(requests), 4, "round_robin")


def test_a_pool_that_evicts_is_not_counted_as_routings_loss():
    requests = _sessions(sessions=60, turns=5)  # three quarters of each prompt was sent before
    reference = routing_reference(SMALL_POOL, 4, "cache_aware", (), requests)
    # One replica's pool cannot hold the conversations until their next turn; four pools can.
    assert reference.single_replica_hit_rate < 0.3
    assert reference.fleet_model_hit_rate > reference.single_replica_hit_rate + 0.3  # the gap is negative


def _fleet(mode: EndpointMode) -> EndpointSpec:
    fleet = FleetSpec(RouterSpec("round_robin"), (WorkerGroup(WorkerRole.REGULAR, 2, 8),))
    return EndpointSpec("v3-fleet", mode, "deepseek-ai/DeepSeek-V3", tuple(FLAGS), "H200", 16, 3.5, fleet=fleet,
                        url="http://127.0.0.1:1" if mode is EndpointMode.ATTACH else None)  # fmt: skip


def test_no_reference_for_one_server_or_a_real_fleet():
    one = EndpointSpec("v3", EndpointMode.SIM, "deepseek-ai/DeepSeek-V3", tuple(FLAGS), "H200", 8, 3.5)
    assert measure_routing_reference(one, workload=None, speedup=1.0) is None  # type: ignore[arg-type]
    assert measure_routing_reference(_fleet(EndpointMode.ATTACH), workload=None, speedup=1.0) is None  # type: ignore[arg-type]


def test_a_reference_reads_back_equal_and_a_bad_file_is_named(tmp_path):
    reference = RoutingReference(300, 2, "round_robin", 0.61, 0.38, 1.5)
    path = write_routing_reference_json(tmp_path / "routing_reference.json", reference)
    assert read_routing_reference_json(path) == reference
    assert read_routing_reference_json(tmp_path / "absent.json") is None
    path.write_text('{"requests": 300}')
    with pytest.raises(ValueError, match="routing_reference.json: not a costbench routing_reference.json"):
        read_routing_reference_json(path)
