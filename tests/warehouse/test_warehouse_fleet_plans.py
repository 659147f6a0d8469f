"""The fleet plans in the warehouse: a run's plan (runs.fleet_plan_json, written from fleet_plans.json) is
unnested by the view fleet_plan_shapes, priced with every price book of the endpoint's GPU type in the mart
fleet_plans, and sizes run_summary.replicas_for_target. Built lake rows, a real refresh."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import date

import pytest

from endpoints.capacity.fleet_plan import FleetPlan, ShapeProbe, fleet_plan_text
from endpoints.router.router_spec import RouterSpec
from endpoints.spec import EndpointSpec, FleetSpec, WorkerGroup, WorkerRole
from warehouse.backends.store import Warehouse
from warehouse.marts.run_rows import RunContext, build_run_row
from warehouse.parquet.lake import write_partition
from warehouse_builders import endpoint, request, requests_table, run_info, write_run

WEEK = date(2026, 11, 23)
TARGET_RPS = 20.0
H200_BOOKS = {"h200-on-demand", "h200-reserved", "h200-own-3y"}


def _shape(replicas: int, policy: str, holds: bool, chosen: bool = False, capacity: float | None = None):
    return ShapeProbe(replicas, policy, 8 * replicas, 0.99 if holds else 0.90, holds, 0.6, 400.0 + replicas,
                      1 / replicas + 0.02, capacity, chosen)  # fmt: skip


PLAN = FleetPlan(
    TARGET_RPS, 1000.0, 100.0, 1200, 1.0,
    (_shape(3, "cache_aware", False), _shape(4, "cache_aware", True, True, 28.3), _shape(4, "round_robin", False),
     _shape(5, "round_robin", True)),
    6, 12.5,
)  # fmt: skip


def _fleet(replicas: int = 2, **extra) -> EndpointSpec:
    fleet = FleetSpec(RouterSpec("cache_aware"), (WorkerGroup(WorkerRole.REGULAR, replicas, 8),))
    return endpoint("v3-fleet", gpu_count=8 * replicas, fleet=fleet, **extra)


def _run(store: Warehouse, scenario: str, spec: EndpointSpec, context: RunContext, drop_plan: bool = False) -> None:
    run_id = f"{scenario}-run"
    records = [request(run_id, f"q{i}", 100.0, 300.0, sent_mono_s=(i + 1) * 0.5, lag_ms=0.0) for i in range(20)]
    info = run_info(run_id, 20.0, requests_total=20, requests_recorded=20, requests_ok=20)
    if not drop_plan:
        write_run(store.lake_root, WEEK, scenario, info, spec, records, context)
        return
    row = build_run_row(info, spec, scenario, WEEK, context).drop_columns(["fleet_plan_json"])
    write_partition(store.lake_root, "runs", WEEK, scenario, row)
    write_partition(store.lake_root, "requests", WEEK, scenario, requests_table(records))


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Warehouse:
    store = Warehouse(tmp_path_factory.mktemp("plans") / "wh")
    sized = RunContext(slo_ttft_ms=1000.0, slo_tpot_ms=100.0, target_rps=TARGET_RPS, capacity_rps_at_slo=10.0,
                       capacity_source="twin_sweep")  # fmt: skip
    _run(store, "planned", _fleet(), _with_plan(sized))
    _run(store, "booked", _fleet(usd_per_gpu_hour=None, price_book="h200-reserved"), _with_plan(sized))
    _run(store, "unplanned", _fleet(), sized)
    _run(store, "before-plans", _fleet(), sized, drop_plan=True)
    store.refresh()
    return store


def _with_plan(context: RunContext) -> RunContext:
    return replace(context, fleet_plan_json=fleet_plan_text(PLAN))


def test_every_shape_is_priced_with_the_run_s_price_and_every_book_of_its_gpu(store):
    rows = [r for r in store.fleet_plans() if r.scenario == "planned"]
    assert len(rows) == len(PLAN.shapes) * (1 + len(H200_BOOKS))
    assert {r.price_book for r in rows} == H200_BOOKS | {"endpoint"}
    assert {r.price_book for r in rows if r.run_price} == {"endpoint"}
    for r in rows:
        shape = next(s for s in PLAN.shapes if (s.replicas, s.policy) == (r.replicas, r.router_policy))
        assert (r.gpus, r.holds_target, r.chosen, r.good_share) == (shape.gpus, shape.holds_target, shape.chosen,
                                                                     shape.good_share)  # fmt: skip
        assert r.fleet_usd_per_hour == pytest.approx(r.gpus * r.usd_per_gpu_hour)
        assert r.usd_per_request_at_target == pytest.approx(r.fleet_usd_per_hour / 3600 / TARGET_RPS)
        assert r.break_even_rps == pytest.approx(r.fleet_usd_per_hour / 3600 / r.api_cost_per_request_usd)
        if r.chosen:
            assert r.usd_per_request_at_slo == pytest.approx(r.fleet_usd_per_hour / 3600 / 28.3)
        else:
            assert r.capacity_rps_at_slo is None and r.usd_per_request_at_slo is None
    run_price = [r for r in rows if r.run_price]
    assert {r.usd_per_gpu_hour for r in run_price} == {2.0}  # the endpoint's own figure


def test_a_run_priced_by_a_book_lists_that_book_once(store):
    rows = [r for r in store.fleet_plans() if r.scenario == "booked"]
    assert len(rows) == len(PLAN.shapes) * len(H200_BOOKS)
    assert {r.price_book for r in rows if r.run_price} == {"h200-reserved"}
    assert {r.usd_per_gpu_hour for r in rows if r.price_book == "h200-reserved"} == {3.50}


def test_replicas_for_target_comes_from_the_chosen_plan(store):
    summary = {r.scenario: r for r in store.run_summary()}
    planned = summary["planned"]
    assert (planned.replicas_for_target, planned.replicas_for_target_source, planned.fleet_plan_policy) == (
        4,
        "fleet_plan",
        "cache_aware",
    )
    assert planned.fleet_usd_per_hour == pytest.approx(4 * 8 * 2.0)  # 4 workers of 8 GPUs, not 4 fleets of 2
    # Without a plan: the measured capacity of the 2-worker fleet, per worker.
    unplanned = summary["unplanned"]
    assert unplanned.replicas_for_target == math.ceil(TARGET_RPS * 2 / 10.0)
    assert unplanned.replicas_for_target_source == "capacity" and unplanned.fleet_plan_policy is None
    assert unplanned.fleet_usd_per_hour == pytest.approx(unplanned.replicas_for_target * 8 * 2.0)


def test_a_runs_file_written_before_plans_reads_as_no_plan(store):
    assert not [r for r in store.fleet_plans() if r.scenario == "before-plans"]
    old = next(r for r in store.run_summary() if r.scenario == "before-plans")
    assert old.replicas_for_target_source == "capacity"
