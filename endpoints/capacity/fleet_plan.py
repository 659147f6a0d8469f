"""The cheapest fleet that holds a scenario's SLO at its target rate on a week's window: a virtual-time search
over fleet shapes (replica count x routing policy).

A shape either holds the target or not, so the plan does not sweep each shape's capacity: it replays the
window once per shape tried, at the target rate, through the shape's replicas and the router's policy model
(deployment_bench.py), and reads the share of requests inside the SLO there. A shape holds the
target when that share is at least MIN_GOOD_SHARE of the idle share (the capacity sweep's verdict; the idle
reference is the endpoint's own sweep's, else one replica with arrivals IDLE_FACTOR wider). Per policy the
search starts at the count the measured capacity of one replica predicts and steps away from it, doubling
the step, until the verdict flips, then bisects: two replays when the prediction is right. Each probe
replays REQUESTS_PER_REPLICA requests per predicted replica, so every replica sees as many requests as one
replica's sweep does: a short burst spread over many replicas fits in their queues and makes any count
look sufficient.

Every replica of a shape is priced alike, so in every price book the cheapest shape is the one with the
fewest GPUs: the chosen shape is the fewest replicas that hold the target (ties: the larger share inside
the SLO, the margin on the verdict, then the lower p95 TTFT). The warehouse prices each shape with every
book (dbt model fleet_plans). The chosen shape alone also gets its capacity at the SLO, in
steps of 2^(1/2) up from the target: a lower bound within that factor. The whole plan is cached (cache_dir):
it is deterministic.
"""

from __future__ import annotations

import functools
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from common.atomic_file import write_bytes_atomically
from common.run_folder import FLEET_PLANS_FILE
from endpoints.capacity.deployment import Deployment, deployment_of, shape_label
from endpoints.capacity.deployment_bench import FleetBenchResult, bench_deployment, cached_share
from endpoints.capacity.ep_shapes import wide_ep_decode_flags
from endpoints.capacity.slo_capacity import (
    IDLE_FACTOR,
    MAX_SWEEP_REQUESTS,
    MIN_GOOD_SHARE,
    SWEEP_RULES,
    SloCapacity,
    arrival_span_s,
    compressed,
    good_share,
    p95_ttft_ms,
    sweep_cache_path,
    workload_bench_requests,
)
from endpoints.router.router_spec import RouterSpec
from endpoints.sim.virtual_bench import BenchRequest, BenchResult, mean_ttft_parts_ms
from endpoints.spec import EndpointMode, EndpointSpec
from workloads.workload import Workload

PLAN_POLICIES = ("cache_aware", "round_robin")  # the routing lever the plan compares
REQUESTS_PER_REPLICA = MAX_SWEEP_REQUESTS  # requests a probe replays per predicted replica
MAX_PLAN_REQUESTS = 3000  # CPU grows with the requests: about 2 s a probe per 1,000 on this twin
MAX_PLAN_REPLICAS = 64
CAPACITY_STEP = math.sqrt(2)  # the chosen shape's capacity: the target times this, step by step, until it fails
MAX_CAPACITY_STEPS = 8  # up to 16 times the target
PD_POLICY = "cache_aware"  # smg's default --policy, for both roles of a disaggregated shape
MAX_PD_PREFILL_WORKERS = 8  # the most prefill workers a disaggregated shape tries
PLAN_RULES = (SWEEP_RULES, REQUESTS_PER_REPLICA, MAX_PLAN_REQUESTS, CAPACITY_STEP, MAX_CAPACITY_STEPS, "plan", 5)


@dataclass(frozen=True, slots=True)
class ShapeProbe:
    replicas: int  # workers behind the router (count)
    policy: str  # smg --policy
    gpus: int  # replicas x GPUs per replica (count)
    good_share: float  # requests inside both SLO parts at the target rate (ratio 0-1)
    holds_target: bool  # good_share >= MIN_GOOD_SHARE x the plan's idle_good_share
    hit_rate: float  # cached / prompt tokens at the target rate (ratio 0-1)
    p95_ttft_ms: float  # TTFT from arrival at the target rate, 95th percentile, nearest rank (ms)
    max_worker_share: float  # the busiest worker's share of the requests (ratio 0-1; 1 / replicas is even)
    capacity_rps_at_slo: float | None  # the chosen shape's capacity at the SLO (requests/s; None: not swept)
    chosen: bool  # the fewest GPUs holding the target
    # A disaggregated shape (xP+yD): its prefill and decode workers, replicas = x + y; 0 and 0: aggregated replicas.
    prefill_workers: int = 0
    decode_workers: int = 0
    # Its decode workers are each one wide expert-parallel server over this many GPUs (ep_shapes.py); 0: the
    # endpoint's own kind of worker.
    decode_ep_size: int = 0
    # Where its TTFT goes at the target rate: {stage: mean ms} (virtual_bench.mean_ttft_parts_ms; they add up to the
    # mean TTFT). None: a plan made before TTFT parts.
    mean_ttft_parts_ms: dict[str, float] | None = None

    @property
    def decode_gpus(self) -> int:
        """A disaggregated shape's GPUs on the decode side (its workers are alike unless the decode is wide)."""
        return self.decode_workers * (self.decode_ep_size or self.gpus // self.replicas)

    @property
    def prefill_gpus(self) -> int:
        return self.gpus - self.decode_gpus

    @property
    def label(self) -> str:
        return shape_label(self.replicas, self.policy, self.prefill_workers, self.decode_workers, self.decode_ep_size)


@dataclass(frozen=True, slots=True)
class FleetPlan:
    target_rps: float  # the scenario's target rate (requests/s)
    slo_ttft_ms: float
    slo_tpot_ms: float
    requests: int  # requests each probe replayed (count)
    idle_good_share: float  # inside the SLO on one idle replica (ratio 0-1): the verdict's reference
    shapes: tuple[ShapeProbe, ...]  # every shape tried, by policy then replicas
    probes: int  # fleet replays the plan ran, the capacity sweep's included (count)
    cpu_s: float  # process CPU time the plan took (s)

    @property
    def chosen(self) -> ShapeProbe | None:
        return next((s for s in self.shapes if s.chosen), None)

    def fewest_holding(self, policy: str) -> ShapeProbe | None:
        """The fewest aggregated replicas of `policy` that hold the target (None: none tried did)."""
        return min((s for s in self.shapes if s.policy == policy and s.holds_target and not s.prefill_workers),
                   default=None, key=lambda s: s.replicas)  # fmt: skip


def predicted_replicas(target_rps: float, replica_rps: float | None) -> int:
    """The count whose capacity reaches the target if capacity grew in proportion to replicas."""
    if not replica_rps or replica_rps <= 0:
        return 1
    return min(MAX_PLAN_REPLICAS, max(1, math.ceil(target_rps / replica_rps)))


def plan_requests(target_rps: float, replica_rps: float | None) -> int:
    """Requests a plan's probes replay: REQUESTS_PER_REPLICA per predicted replica, at most MAX_PLAN_REQUESTS."""
    return min(MAX_PLAN_REQUESTS, REQUESTS_PER_REPLICA * predicted_replicas(target_rps, replica_rps))


def plan_fleet(
    replica: Deployment,
    router_args: tuple[str, ...],
    requests: Sequence[BenchRequest],
    target_rps: float,
    slo: tuple[float, float],  # (TTFT ms, TPOT ms)
    replica_rps: float | None,  # one replica's measured capacity at the SLO, the search's starting point
    idle_good_share: float | None = None,  # the capacity sweep's idle reference, when it ran on these requests
    policies: Sequence[str] = PLAN_POLICIES,
    pd: Sequence[Deployment] = (),
) -> FleetPlan:
    """The plan for fleets of `replica` (one server: its flags and GPUs) behind a router with `router_args`, on
    `requests` (arrivals as in the trace; compressed here to the target rate). Without `idle_good_share` the idle
    reference is replayed here, on the first MAX_SWEEP_REQUESTS requests. With `pd` (disaggregated deployments
    whose worker counts the plan sets), disaggregated shapes too, family by family: for each prefill count x from
    1, the fewest decode workers y that hold the target, until x alone needs as many GPUs as the cheapest shape
    found."""
    requests = sorted(requests, key=lambda r: r.arrival_s)
    if target_rps <= 0:
        raise ValueError("a fleet plan needs a positive target_rps")
    if len(requests) < 2 or arrival_span_s(requests) <= 0:
        raise ValueError("a fleet plan needs at least two requests arriving at different times")
    started_cpu_s = time.process_time()
    slo_ttft_ms, slo_tpot_ms = slo
    factor = target_rps * arrival_span_s(requests) / len(requests)
    at_target = compressed(requests, factor)
    runs = [0]  # replays run (a list: the probes count into it)
    idle_share = idle_good_share
    if idle_share is None:
        idle = compressed(requests[:MAX_SWEEP_REQUESTS], IDLE_FACTOR)
        idle_share = good_share(bench_deployment(replica, idle).bench, slo_ttft_ms, slo_tpot_ms)
        runs[0] += 1
    probes: dict[tuple[int, str], ShapeProbe] = {}
    tried: dict[str, Deployment] = {}  # by label: the deployment behind each probe

    def probe(n: int, policy: str) -> ShapeProbe:
        if (n, policy) not in probes:
            fleet = replace(replica, replicas=n, router=RouterSpec(policy, router_args))
            runs[0] += 1
            probes[n, policy] = _shape_probe(bench_deployment(fleet, at_target), fleet, slo, idle_share)
            tried[fleet.label] = fleet
        return probes[n, policy]

    start = predicted_replicas(target_rps, replica_rps)
    for policy in policies:
        _fewest_holding(start, functools.partial(_holds, probe, policy))
    shapes = sorted(probes.values(), key=lambda s: (policies.index(s.policy), s.replicas))
    for family in pd:
        shapes += _pd_shapes(family, router_args, at_target, slo, idle_share, start, shapes, runs, tried)
    holding = [s for s in shapes if s.holds_target]
    if holding:
        best = min(holding, key=lambda s: (s.gpus, -s.good_share, s.p95_ttft_ms, s.prefill_workers > 0,
                                           s.policy not in policies or policies.index(s.policy)))  # fmt: skip
        chosen = tried[best.label]
        capacity_rps = _capacity(lambda r: bench_deployment(chosen, r).bench, at_target, slo, idle_share, target_rps,
                                 runs)  # fmt: skip
        shapes = [replace(s, chosen=True, capacity_rps_at_slo=capacity_rps) if s is best else s
                  for s in shapes]  # fmt: skip
    return FleetPlan(target_rps, slo_ttft_ms, slo_tpot_ms, len(requests), idle_share, tuple(shapes), runs[0],
                     time.process_time() - started_cpu_s)  # fmt: skip


def _shape_probe(
    result: FleetBenchResult, deployment: Deployment, slo: tuple[float, float], idle_share: float
) -> ShapeProbe:
    share = good_share(result.bench, *slo)
    routed = deployment.prefill_workers or deployment.workers  # a disaggregated shape's shares: its prefill workers'
    return ShapeProbe(
        replicas=deployment.workers,
        policy=deployment.policy,
        gpus=deployment.gpus,
        good_share=share,
        holds_target=idle_share > 0 and share >= MIN_GOOD_SHARE * idle_share,
        hit_rate=cached_share(result.bench),
        p95_ttft_ms=p95_ttft_ms(result.bench),
        max_worker_share=max(result.workers.count(w) for w in range(routed)) / len(result.workers),
        capacity_rps_at_slo=None,
        chosen=False,
        prefill_workers=deployment.prefill_workers,
        decode_workers=deployment.decode_workers,
        decode_ep_size=deployment.decode_ep_size,
        mean_ttft_parts_ms=mean_ttft_parts_ms(result.bench.requests) or None,
    )


def _pd_shapes(
    pd: Deployment,
    router_args: tuple[str, ...],
    at_target: list[BenchRequest],
    slo: tuple[float, float],
    idle_share: float,
    start: int,
    aggregated: Sequence[ShapeProbe],
    runs: list[int],
    tried: dict[str, Deployment],
) -> list[ShapeProbe]:
    """xP+yD shapes of one family: for x = 1, 2, ..., the fewest y that hold (searched from start - x), while x
    prefill and one decode worker cost no more than the cheapest holding shape so far (a tie is worth seeing: same
    price, other latencies); x = 1 always."""
    probes: dict[tuple[int, int], ShapeProbe] = {}

    def gpus(x: int, y: int) -> int:
        return replace(pd, prefill_workers=x, decode_workers=y).gpus

    def probe(x: int, y: int) -> ShapeProbe:
        if (x, y) not in probes:
            shape = replace(pd, prefill_workers=x, decode_workers=y, router=RouterSpec(PD_POLICY, router_args))
            runs[0] += 1
            probes[x, y] = _shape_probe(bench_deployment(shape, at_target), shape, slo, idle_share)
            tried[shape.label] = shape
        return probes[x, y]

    best_gpus = min((s.gpus for s in aggregated if s.holds_target), default=None)
    # A wide decode worker carries what several of the endpoint's would: start its search that many fewer.
    start = max(1, start * pd.gpus_per_worker // pd.gpus_per_decode_worker)
    for x in range(1, MAX_PD_PREFILL_WORKERS + 1):
        if x > 1 and best_gpus is not None and gpus(x, 1) > best_gpus:
            break  # x prefill and one decode worker already cost more than the cheapest found (x = 1 is always
            # tried, so the frontier shows every family, a wide decode worker's at low rates too)
        # More decode workers than the cheapest shape found leaves room for cannot be chosen: the search stops there
        # (a prefill-bound x would otherwise climb to MAX_PLAN_REPLICAS decode workers).
        room = None if best_gpus is None else (best_gpus - x * pd.gpus_per_worker) // pd.gpus_per_decode_worker
        limit = MAX_PLAN_REPLICAS if room is None else max(1, room)
        y = _fewest_holding(min(max(1, start - x), limit), functools.partial(_decode_holds, probe, x), limit)
        if y is not None:
            best_gpus = gpus(x, y) if best_gpus is None else min(best_gpus, gpus(x, y))
    return sorted(probes.values(), key=lambda s: (s.prefill_workers, s.decode_workers))


def _decode_holds(probe: Callable[[int, int], ShapeProbe], prefill_workers: int, decode_workers: int) -> bool:
    return probe(prefill_workers, decode_workers).holds_target


def _holds(probe: Callable[[int, str], ShapeProbe], policy: str, n: int) -> bool:
    return probe(n, policy).holds_target


def _fewest_holding(start: int, holds: Callable[[int], bool], limit: int = MAX_PLAN_REPLICAS) -> int | None:
    """The fewest count in [1, limit] for which `holds` is true, holding being monotone in the
    count (None: not even `limit`): from `start`, steps doubling away from it (down while the counts
    hold, up while they do not) until the verdict flips, then bisecting between the two."""
    failing, holding = 0, None  # 0: no count below is known to fail
    step = 1
    if holds(start):
        holding = start
        while holding > 1:
            trying = max(start - step, 1)
            if not holds(trying):
                failing = trying
                break
            holding, step = trying, step * 2
    else:
        failing = start
        while holding is None:
            trying = min(start + step, limit)
            if holds(trying):
                holding = trying
            elif trying == limit:
                return None
            else:
                failing, step = trying, step * 2
    while holding - failing > 1:
        middle = (failing + holding) // 2
        if holds(middle):
            holding = middle
        else:
            failing = middle
    return holding


def _capacity(
    bench: Callable[[list[BenchRequest]], BenchResult],
    at_target: list[BenchRequest],
    slo: tuple[float, float],
    idle_share: float,
    target_rps: float,
    runs: list[int],
) -> float:
    """The shape's capacity at the SLO on the plan's requests, a lower bound within CAPACITY_STEP: the fastest
    of target x CAPACITY_STEP^k (k = 0, 1, ...) it holds. It held the target, so the first step is above it;
    stepping up rather than doubling keeps the replays off rates the shape is far from (an overloaded replay
    costs the most CPU), and one replay answers when the shape is as tight a fit as the fewest that hold is."""
    held = 0
    for k in range(1, MAX_CAPACITY_STEPS + 1):
        faster = compressed(at_target, CAPACITY_STEP**k)
        runs[0] += 1
        if good_share(bench(faster), *slo) < MIN_GOOD_SHARE * idle_share:
            break
        held = k
    return target_rps * CAPACITY_STEP**held


def _plan_body(plan: FleetPlan) -> dict:
    return {**asdict(plan), "shapes": [asdict(s) for s in plan.shapes]}


def fleet_plan_text(plan: FleetPlan) -> str:
    """The plan as compact JSON, as the lake's runs.fleet_plan_json keeps it (fleet_plans.json's fields)."""
    return json.dumps(_plan_body(plan), separators=(",", ":"))


def write_fleet_plans_json(run_dir: Path, plan: FleetPlan, name: str = FLEET_PLANS_FILE) -> Path:
    return write_bytes_atomically(Path(run_dir) / name, json.dumps(_plan_body(plan), indent=2).encode() + b"\n")


def read_fleet_plans_json(run_dir: Path, name: str = FLEET_PLANS_FILE) -> FleetPlan | None:
    """The plan written for a run, or None when none was."""
    path = Path(run_dir) / name
    if not path.exists():
        return None
    try:
        raw = json.loads(path.read_bytes())
        return FleetPlan(**{**raw, "shapes": tuple(ShapeProbe(**s) for s in raw["shapes"])})
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a costbench fleet_plans.json ({exc})") from None


def measure_fleet_plan(
    endpoint: EndpointSpec,
    workload: Workload,
    target_rps: float,
    slo: tuple[float, float],
    capacity: SloCapacity | None,
    cache_dir: Path | None = None,
    plan_disaggregated: bool = False,
    plan_ep_widths: Sequence[int] = (),
) -> FleetPlan | None:
    """The plan for a twin endpoint (one server or a fleet: its replica's flags and GPUs, its router's flags),
    started from the endpoint's capacity sweep of the same window (its capacity divided by its workers, its
    idle reference); None where no plan applies (not a twin, fewer than two distinct arrivals). Disaggregated
    shapes are tried beside the aggregated ones for a PD endpoint (its roles' flags; its shared flags make the
    aggregated replica) or with `plan_disaggregated` (the endpoint's flags in each role); with `plan_ep_widths`,
    also xP+yD shapes whose decode workers are each one wide expert-parallel server over that many GPUs
    (ep_shapes.py). Raises ValueError when the twin cannot run a width. With `cache_dir`, a plan is made once per
    inputs."""
    if endpoint.mode is not EndpointMode.SIM:
        return None
    fleet = endpoint.fleet
    deployment = deployment_of(endpoint)
    replicas = deployment.workers
    router_args = fleet.router.args if fleet is not None else ()
    flags = deployment.flags
    replica = Deployment(flags, deployment.gpus_per_worker)  # what the aggregated shapes are replicas of
    pd: list[Deployment] = []
    if deployment.disaggregated:
        pd.append(deployment)  # its roles' flags and GPUs; the plan sets the counts and the router
    elif plan_disaggregated or plan_ep_widths:
        roles = [(*flags, "--disaggregation-mode", role) for role in ("prefill", "decode")]
        pd.append(replace(replica, replicas=0, prefill_flags=roles[0], decode_flags=roles[1],
                          decode_gpus_per_worker=replica.gpus_per_worker))  # fmt: skip
    for width in plan_ep_widths:
        try:
            wide = wide_ep_decode_flags(pd[0].decode_flags, width)
        except ValueError as exc:
            raise ValueError(f"plan_ep_widths {width}: the twin cannot run that decode worker ({exc})") from None
        pd.append(replace(pd[0], decode_flags=wide, decode_gpus_per_worker=width, decode_ep_size=width))
    measured = None if capacity is None else capacity.capacity_rps_at_slo
    replica_rps = None if measured is None else measured / replicas
    idle_share = None if capacity is None else capacity.idle_good_share
    count = plan_requests(target_rps, replica_rps)
    key = [workload.content_hash, asdict(replica), list(router_args), target_rps, list(slo), count, replica_rps,
           idle_share, [asdict(f) for f in pd] or None, PLAN_RULES]  # fmt: skip
    cached = sweep_cache_path(cache_dir, key, prefix="plan-")
    if cached is not None and cached.exists():
        return read_fleet_plans_json(cached.parent, cached.name)
    window = replace(workload, table=workload.table.slice(0, count))
    requests = workload_bench_requests(window, count)
    if len(requests) < 2 or arrival_span_s(requests) <= 0:
        return None
    plan = plan_fleet(replica, router_args, requests, target_rps, slo, replica_rps, idle_share, pd=pd)
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        write_fleet_plans_json(cached.parent, plan, cached.name)
    return plan
