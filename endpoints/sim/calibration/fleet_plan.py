"""The cheapest fleet that holds a scenario's SLO at its target rate on a week's window: a virtual-time search
over fleet shapes (replica count x routing policy) priced with each price book of the endpoint's GPU type.

Capacity grows with replicas, so the search does not sweep every count: it sweeps 1 and 2 replicas per
policy (fleet_capacity.py), reads the gain per added replica from them, estimates the count N whose capacity
reaches the target, then walks from N to the fewest replicas that hold it (down while they hold, else up, at
most MAX_EXTRA_COUNTS counts past N), each sweep starting its bracket at the rate it expects. Capacity does
not depend on the price, so a shape is swept once and priced with every book. Every sweep is cached
(cache_dir), so a canary's fixed window is planned once. The chosen shape holds the target at the lowest
fleet $/hour (ties: fewer GPUs, then the better hit rate).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from common.atomic_file import write_bytes_atomically
from endpoints.router.router_spec import RouterSpec
from endpoints.sim.calibration.fleet_capacity import FleetCapacity, cached_fleet_capacity
from endpoints.sim.calibration.slo_capacity import arrival_span_s, sweep_requests
from endpoints.sim.calibration.virtual_bench import BenchRequest
from endpoints.spec import EndpointMode, EndpointSpec
from workloads.workload import Workload

PLAN_POLICIES = ("cache_aware", "round_robin")  # the routing lever the plan compares
MAX_EXTRA_COUNTS = 4  # counts tried past N+1 before the plan gives up on a policy
MAX_PLAN_REPLICAS = 64
FLEET_PLANS_FILE = "fleet_plans.json"  # beside capacity.json in the run's folder


@dataclass(frozen=True, slots=True)
class PlanPrice:
    book: str  # a price book's name (warehouse/prices.yaml), or "endpoint" for the endpoint's own price
    usd_per_gpu_hour: float


@dataclass(frozen=True, slots=True)
class FleetPlanRow:
    replicas: int
    policy: str  # smg --policy
    price_book: str
    gpus: int  # replicas x GPUs per replica
    capacity_rps_at_slo: float | None  # the fleet's capacity at the SLO (requests/s; None: no rate held)
    usd_per_request_at_slo: float | None  # fleet $/hour / 3600 / capacity (USD)
    hit_rate: float | None  # cached ÷ prompt tokens at that capacity (ratio 0-1)
    p95_ttft_ms: float | None  # at that capacity (ms)
    fleet_usd_per_hour: float  # gpus x the book's GPU-hour price (USD/h)
    holds_target: bool  # capacity_rps_at_slo >= target_rps
    chosen: bool


@dataclass(frozen=True, slots=True)
class FleetPlan:
    target_rps: float  # the scenario's target rate (requests/s)
    slo_ttft_ms: float
    slo_tpot_ms: float
    rows: tuple[FleetPlanRow, ...]  # one per (shape, price book) tried
    sweeps: int  # fleet sweeps the plan used (count; cached ones included)
    cpu_s: float  # process CPU time the plan took (s; near 0 when every sweep was cached)

    @property
    def chosen(self) -> FleetPlanRow | None:
        return next((r for r in self.rows if r.chosen), None)


def _estimate(c1: float | None, c2: float | None, target_rps: float) -> int:
    """The count whose capacity reaches the target, with capacity linear in replicas through c1 and c2."""
    if c1 is not None and c1 >= target_rps:
        return 1
    base = c1 or 0.0
    gain = (c2 - base) if c2 is not None and c2 > base else (c2 or base) / 2
    if gain <= 0:
        return MAX_PLAN_REPLICAS
    return min(MAX_PLAN_REPLICAS, max(2, 1 + math.ceil((target_rps - base) / gain)))


def plan_fleet(
    content_hash: str,
    flags: list[str],
    gpus_per_replica: int,
    router_args: tuple[str, ...],
    prices: Sequence[PlanPrice],
    requests: Sequence[BenchRequest],
    target_rps: float,
    slo: tuple[float, float],  # (TTFT ms, TPOT ms)
    cache_dir: Path | None = None,
) -> FleetPlan:
    if target_rps <= 0 or not prices:
        raise ValueError("a fleet plan needs a positive target_rps and at least one price")
    started_cpu_s = time.process_time()
    slo_ttft_ms, slo_tpot_ms = slo
    swept: dict[tuple[int, str], FleetCapacity] = {}

    def sweep(replicas: int, policy: str, expected_rps: float | None = None) -> FleetCapacity:
        if (replicas, policy) not in swept:
            offered = len(requests) / max(max(r.arrival_s for r in requests) - min(r.arrival_s for r in requests), 1e-9)
            start = 1.0 if expected_rps is None else expected_rps / offered
            swept[replicas, policy] = cached_fleet_capacity(
                content_hash, flags, replicas, RouterSpec(policy, router_args), requests,
                slo_ttft_ms, slo_tpot_ms, cache_dir, start,
            )  # fmt: skip
        return swept[replicas, policy]

    for policy in PLAN_POLICIES:
        c1 = sweep(1, policy).capacity.capacity_rps_at_slo
        c2 = sweep(2, policy, None if c1 is None else 2 * c1).capacity.capacity_rps_at_slo
        estimate = _estimate(c1, c2, target_rps)
        base, gain = (c1 or 0.0), max((c2 or 0.0) - (c1 or 0.0), 0.0)

        def holds(n: int, policy: str = policy, base: float = base, gain: float = gain) -> bool:
            fleet = sweep(n, policy, base + (n - 1) * gain if gain > 0 else None)
            return (fleet.capacity.capacity_rps_at_slo or 0.0) >= target_rps

        # Walk from the estimate to the fewest replicas that hold the target: down while they hold, else up.
        n = max(estimate, 2)
        if holds(n):
            while n > 1 and holds(n - 1):
                n -= 1
        else:
            last = min(estimate + MAX_EXTRA_COUNTS, MAX_PLAN_REPLICAS)
            while n < last and not holds(n + 1):
                n += 1
    rows = [_row(fleet, price, gpus_per_replica, target_rps) for _, fleet in sorted(swept.items()) for price in prices]
    rows = _mark_chosen(rows)
    return FleetPlan(target_rps, slo_ttft_ms, slo_tpot_ms, tuple(rows), len(swept), time.process_time() - started_cpu_s)


def _any_holds(swept: dict[tuple[int, str], FleetCapacity], policy: str, target_rps: float) -> bool:
    return any(
        p == policy and f.capacity.capacity_rps_at_slo is not None and f.capacity.capacity_rps_at_slo >= target_rps
        for (_, p), f in swept.items()
    )


def _row(fleet: FleetCapacity, price: PlanPrice, gpus_per_replica: int, target_rps: float) -> FleetPlanRow:
    gpus = fleet.replicas * gpus_per_replica
    usd_per_hour = gpus * price.usd_per_gpu_hour
    capacity = fleet.capacity.capacity_rps_at_slo
    return FleetPlanRow(
        replicas=fleet.replicas,
        policy=fleet.policy,
        price_book=price.book,
        gpus=gpus,
        capacity_rps_at_slo=capacity,
        usd_per_request_at_slo=None if not capacity else usd_per_hour / 3600 / capacity,
        hit_rate=fleet.hit_rate,
        p95_ttft_ms=fleet.p95_ttft_ms,
        fleet_usd_per_hour=usd_per_hour,
        holds_target=capacity is not None and capacity >= target_rps,
        chosen=False,
    )


def _mark_chosen(rows: list[FleetPlanRow]) -> list[FleetPlanRow]:
    holding = [r for r in rows if r.holds_target]
    if not holding:
        return rows
    best = min(holding, key=lambda r: (r.fleet_usd_per_hour, r.gpus, -(r.hit_rate or 0.0), r.policy, r.price_book))
    return [FleetPlanRow(**{**asdict(r), "chosen": r is best}) for r in rows]


def write_fleet_plans_json(run_dir: Path, plan: FleetPlan) -> Path:
    body = {
        "target_rps": plan.target_rps,
        "slo_ttft_ms": plan.slo_ttft_ms,
        "slo_tpot_ms": plan.slo_tpot_ms,
        "sweeps": plan.sweeps,
        "cpu_s": plan.cpu_s,
        "rows": [asdict(r) for r in plan.rows],
    }
    return write_bytes_atomically(Path(run_dir) / FLEET_PLANS_FILE, json.dumps(body, indent=2).encode() + b"\n")


def read_fleet_plans_json(run_dir: Path) -> FleetPlan | None:
    """The plan written for a run, or None when none was."""
    path = Path(run_dir) / FLEET_PLANS_FILE
    if not path.exists():
        return None
    try:
        raw = json.loads(path.read_bytes())
        rows = tuple(FleetPlanRow(**r) for r in raw["rows"])
        return FleetPlan(raw["target_rps"], raw["slo_ttft_ms"], raw["slo_tpot_ms"], rows, raw["sweeps"], raw["cpu_s"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a costbench fleet_plans.json ({exc})") from None


def measure_fleet_plan(
    endpoint: EndpointSpec,
    workload: Workload,
    target_rps: float,
    slo: tuple[float, float],
    prices: Sequence[PlanPrice],
    cache_dir: Path | None = None,
) -> FleetPlan | None:
    """The plan for a twin endpoint (one server or a fleet: its replica's flags and GPUs, its router's flags)
    on the window's sweep requests; None where no sweep applies or no price is known for its GPU type."""
    if endpoint.mode is not EndpointMode.SIM or not prices:
        return None
    requests = sweep_requests(workload)
    if len(requests) < 2 or arrival_span_s(requests) <= 0:
        return None
    fleet = endpoint.fleet
    gpus_per_replica = endpoint.gpu_count // fleet.replicas if fleet is not None else endpoint.gpu_count
    router_args = fleet.router.args if fleet is not None else ()
    return plan_fleet(
        workload.content_hash, list(endpoint.server_args), gpus_per_replica, router_args, prices, requests,
        target_rps, slo, cache_dir,
    )  # fmt: skip
