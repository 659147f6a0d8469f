"""What the weekly job measures on the twin for a run's window besides the replay: the capacity sweep (one server's,
or a fleet's through its router's model), a fleet's routing reference, and with a target_rps the fleet plan.

One function, so the weekly job's measure_capacity step and the measurement it starts beside a virtual-clock
replay (capacity_alongside.py) do the same work; every part is cached under `cache_dir` by its inputs (all
deterministic), so whichever runs second reads what the first wrote.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from endpoints.capacity.fleet_plan import FleetPlan, measure_fleet_plan
from endpoints.capacity.routing_reference import RoutingReference, measure_routing_reference
from endpoints.capacity.slo_capacity import SloCapacity, measure_capacity
from endpoints.spec import EndpointSpec
from workloads.workload import Workload


@dataclass(frozen=True, slots=True)
class CapacityInputs:
    endpoint: EndpointSpec  # as of the run's week
    window: Workload  # the week's window of the scenario's workload
    slo: tuple[float, float]  # (TTFT ms, TPOT ms)
    target_rps: float | None  # the scenario's target rate: a plan is made for it (requests/s)
    speedup: float  # the scenario's replay speedup: the routing reference's arrival rate (ratio)
    cache_dir: Path  # where each measurement is kept by its inputs
    plan_disaggregated: bool = False  # the plan tries xP+yD shapes too (always, for a PD endpoint)
    plan_ep_widths: tuple[int, ...] = ()  # ... and xP+yD with wide expert-parallel decode workers of these GPUs
    # The endpoint as this run had it (a twin with run-to-run variation: the run's --sim-run-seed), for the capacity
    # sweep: each run's capacity then varies as its replay does, which the gate's interval must see. The routing
    # reference and the plan are the week's, on `endpoint`. None: the same as `endpoint`.
    run_endpoint: EndpointSpec | None = None


@dataclass(frozen=True, slots=True)
class RunCapacity:
    capacity: SloCapacity | None  # None: no sweep applies (not a twin, fewer than two distinct arrivals)
    reference: RoutingReference | None  # None: not a twin fleet
    plan: FleetPlan | None  # None: no target_rps, no capacity, or no plan applies


def measure_run_capacity(inputs: CapacityInputs) -> RunCapacity:
    spec, window, slo = inputs.endpoint, inputs.window, inputs.slo
    run_spec = inputs.run_endpoint or spec
    capacity = measure_capacity(run_spec, window, *slo, inputs.cache_dir)
    reference = None
    if spec.fleet is not None and not spec.fleet.disaggregated:
        reference = measure_routing_reference(spec, window, inputs.speedup, inputs.cache_dir)
    plan = None
    if capacity is not None and inputs.target_rps is not None:
        plan = measure_fleet_plan(
            spec,
            window,
            inputs.target_rps,
            slo,
            capacity,
            inputs.cache_dir,
            inputs.plan_disaggregated,
            inputs.plan_ep_widths,
        )
    return RunCapacity(capacity, reference, plan)
