"""Routing as a cost lever in the warehouse: the runs and run_summary know the fleet (replicas, router policy and
flags), run_workers says how the router spread each run and what each worker's cache realised,
cost_attribution names a routing change between the baseline and this week, and diagnoses says "routing"
when a fleet's hit rate trails what one replica would realise on the same traffic by 20 points or more.
Built lake rows, a real refresh."""

from __future__ import annotations

import json
from datetime import date, timedelta

import pytest

from endpoints.router.router_spec import RouterSpec
from endpoints.spec import EndpointSpec, FleetSpec, WorkerGroup, WorkerRole
from warehouse.backends.store import Warehouse
from warehouse.marts.mart_rows import CostAttributionRow, DiagnosisRow
from warehouse.marts.run_rows import RunContext, build_run_row
from warehouse.parquet.lake import write_partition
from warehouse_builders import endpoint, request, requests_table, run_info, server_sample, write_run

WEEKS = [date(2026, 11, 2) + timedelta(days=7 * i) for i in range(2)]
WORKERS = tuple(f"http://127.0.0.1:3100{i}" for i in range(4))
FLEET_COLUMNS = ["replicas", "router_policy", "router_args_json"]


def _fleet(policy: str, replicas: int = 2, args: tuple[str, ...] = ()) -> EndpointSpec:
    fleet = FleetSpec(RouterSpec(policy, args), (WorkerGroup(WorkerRole.REGULAR, replicas, 8),))
    return endpoint("v3-fleet", gpu_count=8 * replicas, fleet=fleet)


def _run(
    store: Warehouse,
    week: date,
    scenario: str,
    spec: EndpointSpec,
    *,
    cached: tuple[int, ...],
    workers: tuple[str | None, ...],
    reuse: float = 0.7,
    reference: tuple[float, float] | None = None,
    before_fleets: bool = False,
) -> None:
    """One run of 1,000-token prompts scheduled evenly over 10 s of a 20 s window, the i-th with cached[i]
    cached tokens, served by workers[i]; the trace offers `reuse` of its input tokens for reuse; `reference`:
    the twin's (one replica, fleet) hit rates on the same requests (routing_reference.py).
    before_fleets: its runs row is written as a file of before fleets is (no fleet columns)."""
    run_id = f"{scenario}-{week.isoformat()}"
    n = len(cached)
    records = [
        request(run_id, f"q{i}", 100.0, 300.0, cached_tokens=c, sent_mono_s=(i + 1) * 10.0 / n, lag_ms=0.0, worker=w)
        for i, (c, w) in enumerate(zip(cached, workers, strict=True))
    ]
    info = run_info(run_id, 20.0, requests_total=n, requests_recorded=n, requests_ok=n)
    context = RunContext(slo_ttft_ms=1000.0, slo_tpot_ms=100.0, prefix_reuse_share=reuse, capacity_rps_at_slo=8.0,
                         capacity_source="twin_sweep", single_replica_hit_rate=None if reference is None else reference[0],
                         fleet_model_hit_rate=None if reference is None else reference[1],
                         running_requests_at_slo=16.0)  # fmt: skip
    if not before_fleets:
        # 4 requests running: the prefill weight the attribution weighs the cache's saved tokens by is known.
        samples = [server_sample(run_id, t, "sglang:num_running_reqs", 4.0) for t in (0.5, 10.0)]
        write_run(store.lake_root, week, scenario, info, spec, records, context, server_samples=samples)
        return
    row = build_run_row(info, spec, scenario, week, context).drop_columns(FLEET_COLUMNS)
    write_partition(store.lake_root, "runs", week, scenario, row)
    write_partition(store.lake_root, "requests", week, scenario, requests_table(records))


def _alternating(n: int, replicas: int = 2) -> tuple[str, ...]:
    return tuple(WORKERS[i % replicas] for i in range(n))


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Warehouse:
    store = Warehouse(tmp_path_factory.mktemp("routing") / "wh")
    # The same traffic, round_robin then cache_aware on the same 2-replica fleet: the hit rate rises.
    _run(store, WEEKS[0], "policy", _fleet("round_robin"), cached=(200,) * 40, workers=_alternating(40))
    _run(store, WEEKS[1], "policy", _fleet("cache_aware"), cached=(600,) * 40, workers=_alternating(40))
    # Nothing changed but the traffic's luck.
    _run(store, WEEKS[0], "steady", _fleet("cache_aware"), cached=(600,) * 40, workers=_alternating(40))
    _run(store, WEEKS[1], "steady", _fleet("cache_aware"), cached=(550,) * 40, workers=_alternating(40))
    # Twice the replicas (and GPUs), the same policy; then a router flag changed.
    _run(store, WEEKS[0], "scaled", _fleet("cache_aware"), cached=(600,) * 40, workers=_alternating(40))
    _run(store, WEEKS[1], "scaled", _fleet("cache_aware", 4), cached=(500,) * 40, workers=_alternating(40, 4))
    _run(store, WEEKS[0], "flags", _fleet("cache_aware"), cached=(600,) * 40, workers=_alternating(40))
    _run(store, WEEKS[1], "flags", _fleet("cache_aware", args=("--cache-threshold", "0.9")), cached=(400,) * 40,
         workers=_alternating(40))  # fmt: skip
    # A baseline week recorded before fleets: its fleet is unknown, so no change is claimed.
    _run(store, WEEKS[0], "unrecorded", endpoint("v3-fleet"), cached=(600,) * 40, workers=(None,) * 40,
         before_fleets=True)  # fmt: skip
    _run(store, WEEKS[1], "unrecorded", _fleet("cache_aware"), cached=(600,) * 40, workers=_alternating(40))
    # Diagnoses: the traffic offers 0.70 for reuse; on the twin one replica realises 0.70 of the same requests.
    _run(store, WEEKS[0], "fleet-trails", _fleet("round_robin"), cached=(450,) * 40, workers=_alternating(40),
         reference=(0.70, 0.44))  # fmt: skip
    _run(store, WEEKS[0], "fleet-near", _fleet("cache_aware"), cached=(550,) * 40, workers=_alternating(40),
         reference=(0.70, 0.56))  # fmt: skip
    # A cache that evicts: one replica too realises 0.16 of the 0.70 offered, so the fleet's 0.15 is not routing's.
    _run(store, WEEKS[0], "fleet-evicts", _fleet("round_robin", 4), cached=(150,) * 40, workers=_alternating(40, 4),
         reference=(0.16, 0.15))  # fmt: skip
    # A real fleet has no twin reference: routing is not judged (and a fleet never on prefix_cache).
    _run(store, WEEKS[0], "fleet-unjudged", _fleet("round_robin"), cached=(150,) * 40, workers=_alternating(40))
    _run(store, WEEKS[0], "one-server-trails", endpoint("v3-8xh200"), cached=(450,) * 40, workers=(None,) * 40)
    # A lopsided fleet: three of every four requests on one worker, which caches them all.
    lopsided = tuple(WORKERS[0] if i % 4 else WORKERS[1] for i in range(40))
    _run(store, WEEKS[0], "lopsided", _fleet("cache_aware"), cached=tuple(800 if i % 4 else 0 for i in range(40)),
         workers=lopsided)  # fmt: skip
    store.refresh()
    return store


@pytest.fixture(scope="module")
def attribution(store) -> dict[tuple[str, date], CostAttributionRow]:
    return {(r.scenario, r.week_start): r for r in store.cost_attribution()}


@pytest.fixture(scope="module")
def diagnoses(store) -> dict[str, DiagnosisRow]:
    return {r.scenario: r for r in store.diagnoses()}


def test_runs_and_run_summary_know_the_fleet_and_old_runs_read_null(store):
    summary = {(r.scenario, r.week_start): r for r in store.run_summary()}
    flags = summary[("flags", WEEKS[1])]
    assert (flags.replicas, flags.router_policy) == (2, "cache_aware")
    assert json.loads(flags.router_args_json) == ["--cache-threshold", "0.9"]
    assert (summary[("scaled", WEEKS[1])].replicas, summary[("scaled", WEEKS[1])].gpu_count) == (4, 32)
    single = summary[("one-server-trails", WEEKS[0])]
    assert (single.replicas, single.router_policy, single.router_args_json) == (1, None, None)
    old = summary[("unrecorded", WEEKS[0])]
    assert (old.replicas, old.router_policy, old.router_args_json) == (None, None, None)


def test_run_workers_and_run_summary_say_how_the_router_spread_a_run(store):
    rows = [r for r in store.run_workers() if r.scenario == "lopsided"]
    assert [(r.worker, r.completed_requests, r.request_share) for r in rows] == [
        (WORKERS[0], 30, pytest.approx(0.75)),
        (WORKERS[1], 10, pytest.approx(0.25)),
    ]
    assert [r.prefix_cache_hit_rate for r in rows] == [pytest.approx(0.8), pytest.approx(0.0)]
    summary = {r.scenario: r for r in store.run_summary() if r.week_start == WEEKS[0]}
    assert (summary["lopsided"].workers_served, summary["lopsided"].max_worker_share) == (2, pytest.approx(0.75))
    assert summary["lopsided"].prefix_cache_hit_rate == pytest.approx(0.6)  # the fleet's: 30 x 800 / 40 x 1000
    # One server: its requests name no worker, one row, no spread.
    [single] = [r for r in store.run_workers() if r.scenario == "one-server-trails"]
    assert (single.worker, single.request_share) == (None, 1.0)
    assert (summary["one-server-trails"].workers_served, summary["one-server-trails"].max_worker_share) == (None, None)


def test_cost_attribution_names_routing_when_the_policy_changed(attribution):
    row = attribution[("policy", WEEKS[1])]
    assert row.routing_changed is True
    assert json.loads(row.runtime_changes) == ["routing: round_robin -> cache_aware"]
    assert (row.baseline_fleet, row.replicas, row.router_policy) == ("2 x round_robin", 2, "cache_aware")
    # What the new policy's cache saved is a runtime part; the whole change is the runtime's, none traffic or price
    # (on the same GPUs, window and capacity the saving shows as work per GPU-hour, not yet as cost).
    assert row.prefix_cache_usd < 0
    assert row.runtime_usd == pytest.approx(row.change_usd, abs=1e-12)
    assert row.traffic_usd == pytest.approx(0.0, abs=1e-12) and row.price_usd == pytest.approx(0.0, abs=1e-12)


def test_cost_attribution_names_replicas_and_router_flags_and_nothing_when_nothing_changed(attribution):
    scaled = attribution[("scaled", WEEKS[1])]
    assert scaled.routing_changed is True and json.loads(scaled.runtime_changes) == ["replicas: 2 -> 4"]
    assert scaled.baseline_fleet == "2 x cache_aware"
    flags = attribution[("flags", WEEKS[1])]
    assert json.loads(flags.runtime_changes) == ['router flags: [] -> ["--cache-threshold", "0.9"]']
    steady = attribution[("steady", WEEKS[1])]
    assert steady.routing_changed is False and json.loads(steady.runtime_changes) == []
    assert steady.prefix_cache_usd > 0  # the hit rate fell, with no routing change to name
    first = attribution[("policy", WEEKS[0])]
    assert (first.routing_changed, first.runtime_changes, first.baseline_fleet) == (None, None, None)


def test_a_baseline_recorded_before_fleets_claims_no_routing_change(attribution):
    row = attribution[("unrecorded", WEEKS[1])]
    assert row.baseline_realised_cost_per_request_usd is not None  # judged against it all the same
    assert (row.routing_changed, row.baseline_fleet, json.loads(row.runtime_changes)) == (None, None, [])


def test_diagnoses_say_routing_when_the_fleet_trails_one_replica_by_20_points(diagnoses):
    trails = diagnoses["fleet-trails"]  # on the twin 0.44 against one replica's 0.70: 26 points
    assert trails.verdict == "runtime_lever"
    assert json.loads(trails.levers) == ["routing"]
    [reason] = json.loads(trails.reasons)
    assert reason.startswith("routing: on the twin the fleet's hit rate 0.440 (2 replicas, router policy round_robin)")
    assert "trails the 0.700 one replica realises on the same requests by 26.0 points" in reason
    assert reason.endswith("this run realised 0.450")
    assert (trails.replicas, trails.router_policy) == (2, "round_robin")
    assert (trails.single_replica_hit_rate, trails.fleet_model_hit_rate) == (0.7, 0.44)


def test_diagnoses_do_not_say_routing_within_20_points_or_on_one_server(diagnoses):
    near = diagnoses["fleet-near"]  # 0.56 against 0.70: 14 points
    assert "routing" not in json.loads(near.levers)
    assert not any("routing" in reason for reason in json.loads(near.reasons))
    single = diagnoses["one-server-trails"]  # the same 25-point gap on one server is the prefix cache's
    assert json.loads(single.levers) == ["prefix_cache"]
    assert json.loads(single.reasons)[0].startswith("prefix-cache hit rate 0.450 trails the 0.700")


def test_diagnoses_do_not_blame_routing_for_what_eviction_loses(diagnoses):
    # The fleet realises 0.15 of the 0.70 the trace offers (55 points short), but one replica realises only
    # 0.16 of the same requests: its pool evicts, and no router would win the rest back. The cache is the lever.
    evicts = diagnoses["fleet-evicts"]
    assert json.loads(evicts.levers) == ["prefix_cache"]
    [reason] = json.loads(evicts.reasons)
    assert reason.startswith("prefix-cache hit rate 0.150 trails the 0.700 the traffic could reuse by 55.0 points")
    assert reason.endswith("; routing accounts for 1.0 of them (the twin's one-replica reference)")
    unjudged = diagnoses["fleet-unjudged"]  # no reference: the whole gap is the cache's, routing not told apart
    assert (unjudged.single_replica_hit_rate, unjudged.fleet_model_hit_rate) == (None, None)
    assert json.loads(unjudged.levers) == ["prefix_cache"]
    assert json.loads(unjudged.reasons)[0].endswith("; a fleet: routing not told apart (no twin reference)")


def test_routings_part_of_the_gap_is_not_counted_again_as_the_caches(diagnoses):
    # 25 points short of the reusable share, 26 of them routing's: routing alone.
    assert json.loads(diagnoses["fleet-trails"].levers) == ["routing"]
