"""A fleet's capacity at the SLO: the same load sweep as slo_capacity.py, through N twin engines on one
virtual clock with the router's policy model choosing each request's engine.

Each probe builds N cold engines from the replica's flags and one fresh policy (endpoints/router/: smg
1.13.0's routing as costbench models it). At its arrival a request's routing text (what smg routes a
/generate with input_ids on: the ids as decimals joined by spaces) goes to the policy with what smg knows
of the fleet: its own in-flight count per worker, always current, and each engine's gauges (running,
queued, KV usage, generation throughput) as last polled, every --load-monitor-interval seconds from a first
poll before any request. The realised fleet hit rate is the cached share of prompt tokens at the capacity
probe (the fastest sustained rate), so it is the hit rate the fleet has when it carries its capacity.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from common.atomic_file import write_bytes_atomically
from endpoints.router.policy_params import RouterModelParams, parse_router_spec
from endpoints.router.router_spec import RouterSpec
from endpoints.router.routing_policy import RoutingPolicy, build_policy
from endpoints.router.routing_text import routing_text
from endpoints.router.worker_loads import EngineLoad, fleet_view
from endpoints.sim.calibration.slo_capacity import (
    SWEEP_RULES,
    CapacityProbe,
    SloCapacity,
    good_share,
    search_capacity,
    sweep_cache_path,
    sweepable_requests,
)
from endpoints.sim.calibration.virtual_bench import BenchRequest, BenchResult, RequestTiming, timed_request
from endpoints.sim.engine.clock import VirtualClock
from endpoints.sim.engine.engine import SimEngine
from endpoints.sim.engine.engine_builder import build_engine
from endpoints.sim.server_args import parse_server_args
from endpoints.spec import EndpointMode, EndpointSpec
from workloads.workload import Workload

FLEET_RULES = (SWEEP_RULES, "fleet", 2)  # what changes a fleet sweep's answer besides its inputs (cache key)


@dataclass(frozen=True, slots=True)
class FleetBenchResult:
    bench: BenchResult  # every request's timing, in request order (engine: worker 0's)
    workers: tuple[int, ...]  # the worker each request was routed to, in request order
    mean_running_per_replica: float  # time-weighted mean running batch, over the replicas (requests)


@dataclass(frozen=True, slots=True)
class FleetCapacity:
    replicas: int  # workers behind the router (count)
    policy: str  # smg's --policy
    capacity: SloCapacity  # the sweep, its rates the fleet's (requests/s)
    hit_rate: float | None  # cached ÷ prompt tokens at the capacity probe (ratio 0-1; None: no rate sustained)
    worker_shares: tuple[float, ...]  # share of requests each worker served at the capacity probe (ratio 0-1)
    p95_ttft_ms: float | None  # TTFT from arrival at the capacity probe, 95th percentile (ms)


def engine_load(engine: SimEngine) -> EngineLoad:
    """The gauges smg's load monitor reads from a worker's SGLang /metrics (sim_metrics.py serves the same)."""
    scheduler = engine.scheduler
    return EngineLoad(
        running_reqs=len(scheduler.running),
        waiting_reqs=len(scheduler.waiting),
        token_usage=scheduler.token_usage(),
        gen_throughput_tok_s=engine.gen_throughput_tok_s(),
    )


class LoadMonitor:
    """smg's load monitor over in-process engines: each engine's gauges, polled once before any request and then
    every --load-monitor-interval seconds of the clock, handed to the policy."""

    def __init__(self, engines: Sequence[SimEngine], policy: RoutingPolicy, interval_s: float, clock: VirtualClock):
        self.loads: dict[int, EngineLoad] = {}
        self._engines, self._policy, self._interval_s, self._clock = engines, policy, interval_s, clock
        self._task: asyncio.Task | None = None

    def poll(self) -> None:
        polled = {i: engine_load(e) for i, e in enumerate(self._engines)}
        self.loads.update(polled)
        self._policy.update_loads(polled)

    async def _forever(self) -> None:
        next_s = self._clock.now_s()
        while True:
            next_s += self._interval_s
            await self._clock.sleep_until(next_s)
            self.poll()

    def start(self) -> None:
        self.poll()  # smg polls once before it routes anything
        self._task = asyncio.get_running_loop().create_task(self._forever())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()


def run_fleet_bench(
    flags: list[str], replicas: int, params: RouterModelParams, requests: Sequence[BenchRequest]
) -> FleetBenchResult:
    """Open-loop arrivals (request.arrival_s from the start) through `replicas` cold twins built from `flags`
    and the policy model, in virtual time."""
    if replicas < 1:
        raise ValueError("a fleet needs at least one replica")
    clock = VirtualClock()
    urls = tuple(f"http://worker-{i}" for i in range(replicas))  # names only: nothing listens

    async def main() -> FleetBenchResult:
        engines = [build_engine(parse_server_args(flags), clock) for _ in range(replicas)]
        for engine in engines:
            engine.start()
        policy = build_policy(params)
        monitor = LoadMonitor(engines, policy, params.load_monitor_interval_s, clock)
        in_flight = [0] * replicas
        workers = [0] * len(requests)

        async def client(i: int, request: BenchRequest, start_s: float) -> RequestTiming:
            await clock.sleep_until(start_s + request.arrival_s)
            text = routing_text("/generate", {"input_ids": list(request.input_ids)})
            fleet = fleet_view(urls, tuple(in_flight), monitor.loads, params.overload)
            worker = policy.select(text, fleet, clock.now_s())
            workers[i] = worker
            in_flight[worker] += 1
            try:
                return await timed_request(engines[worker], i, request)
            finally:
                in_flight[worker] -= 1

        monitor.start()
        try:
            start_s = clock.now_s()
            timings = await asyncio.gather(*(client(i, r, start_s) for i, r in enumerate(requests)))
        finally:
            monitor.stop()
            for engine in engines:
                await engine.stop()
        span_s = clock.now_s() - start_s
        running_s = sum(e.running_request_s for e in engines)
        return FleetBenchResult(BenchResult(span_s, tuple(timings), engines[0]), tuple(workers),
                                running_s / (replicas * span_s) if span_s > 0 else 0.0)  # fmt: skip

    return clock.run(main())


def cached_share(result: BenchResult) -> float:
    prompt = sum(r.prompt_tokens for r in result.requests)
    return sum(r.cached_tokens for r in result.requests) / prompt if prompt else 0.0


def sweep_fleet_capacity(
    flags: list[str],
    replicas: int,
    router: RouterSpec,
    requests: Sequence[BenchRequest],
    slo_ttft_ms: float,
    slo_tpot_ms: float,
    start_factor: float = 1.0,
) -> FleetCapacity:
    """The highest rate the fleet keeps inside the SLO (slo_capacity's sweep and verdict), with its hit rate,
    per-worker shares and p95 TTFT there; the bracket starts at `start_factor` (search_capacity). A policy or
    flag the model does not implement is refused by name."""
    params = parse_router_spec(router)
    return sweep_bench_capacity(
        lambda scaled: run_fleet_bench(flags, replicas, params, scaled), replicas, router.policy, requests,
        slo_ttft_ms, slo_tpot_ms, start_factor,
    )  # fmt: skip


def sweep_bench_capacity(
    bench: Callable[[list[BenchRequest]], FleetBenchResult],
    workers: int,
    policy: str,
    requests: Sequence[BenchRequest],
    slo_ttft_ms: float,
    slo_tpot_ms: float,
    start_factor: float = 1.0,
) -> FleetCapacity:
    """The sweep over any fleet model `bench` runs (replicas here, prefill and decode workers in pd_capacity.py):
    `workers` routed to, the hit rate, shares and p95 TTFT at the capacity probe."""
    seen: list[tuple[float, tuple[float, ...], float]] = []  # (hit rate, worker shares, p95 TTFT), probe order

    def share_of(scaled: list[BenchRequest]) -> tuple[float, float]:
        result = bench(scaled)
        counts = [result.workers.count(w) for w in range(workers)]
        ttfts_ms = sorted(r.ttft_s * 1000 for r in result.bench.requests)
        p95_ms = ttfts_ms[min(len(ttfts_ms) - 1, math.ceil(0.95 * len(ttfts_ms)) - 1)]  # nearest rank
        seen.append((cached_share(result.bench), tuple(c / len(scaled) for c in counts), p95_ms))
        return good_share(result.bench, slo_ttft_ms, slo_tpot_ms), result.mean_running_per_replica

    capacity = search_capacity(requests, share_of, start_factor=start_factor)
    at = capacity.capacity_probe
    found = None if at is None else seen[at]
    return FleetCapacity(
        replicas=workers,
        policy=policy,
        capacity=capacity,
        hit_rate=None if found is None else found[0],
        worker_shares=() if found is None else found[1],
        p95_ttft_ms=None if found is None else found[2],
    )


def write_fleet_capacity_json(path: Path, fleet: FleetCapacity) -> Path:
    body = {
        "replicas": fleet.replicas,
        "policy": fleet.policy,
        "hit_rate": fleet.hit_rate,
        "worker_shares": list(fleet.worker_shares),
        "p95_ttft_ms": fleet.p95_ttft_ms,
        "capacity": {**asdict(fleet.capacity), "probes": [asdict(p) for p in fleet.capacity.probes]},
    }
    return write_bytes_atomically(path, json.dumps(body, indent=2).encode() + b"\n")


def read_fleet_capacity_json(path: Path) -> FleetCapacity:
    try:
        raw = json.loads(Path(path).read_bytes())
        cap = raw["capacity"]
        capacity = SloCapacity(**{**cap, "probes": tuple(CapacityProbe(**p) for p in cap["probes"])})
        return FleetCapacity(
            raw["replicas"], raw["policy"], capacity, raw["hit_rate"], tuple(raw["worker_shares"]), raw["p95_ttft_ms"]
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a costbench fleet capacity file ({exc})") from None


def cached_fleet_capacity(
    content_hash: str,
    flags: list[str],
    replicas: int,
    router: RouterSpec,
    requests: Sequence[BenchRequest],
    slo_ttft_ms: float,
    slo_tpot_ms: float,
    cache_dir: Path | None,
    start_factor: float = 1.0,
) -> FleetCapacity:
    """sweep_fleet_capacity, done once per (requests, flags, fleet shape, router flags, SLO) with `cache_dir`:
    the twin and the policy model are deterministic (the model's draws are seeded)."""
    key_parts = [content_hash, flags, replicas, router.policy, list(router.args), slo_ttft_ms, slo_tpot_ms]
    return cached_sweep(
        key_parts + [round(start_factor, 6), FLEET_RULES], cache_dir,
        lambda: sweep_fleet_capacity(flags, replicas, router, requests, slo_ttft_ms, slo_tpot_ms, start_factor),
    )  # fmt: skip


def cached_sweep(key: list, cache_dir: Path | None, sweep: Callable[[], FleetCapacity]) -> FleetCapacity:
    """A fleet sweep read from `cache_dir` under `key`, else run and written there (None: always run)."""
    cached = sweep_cache_path(cache_dir, key, prefix="fleet-")
    if cached is not None and cached.exists():
        return read_fleet_capacity_json(cached)
    fleet = sweep()
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        write_fleet_capacity_json(cached, fleet)
    return fleet


def measure_fleet_capacity(
    endpoint: EndpointSpec,
    workload: Workload,
    slo_ttft_ms: float,
    slo_tpot_ms: float,
    cache_dir: Path | None = None,
) -> SloCapacity | None:
    """measure_slo_capacity for a fleet of replicas: each with the endpoint's flags, behind its router's model.
    None where no sweep applies (not a twin, fewer than two distinct arrivals)."""
    if endpoint.mode is not EndpointMode.SIM or endpoint.fleet is None:
        return None
    requests = sweepable_requests(workload)
    if requests is None:
        return None
    if endpoint.fleet.disaggregated:
        raise ValueError(f"endpoint {endpoint.name!r} is disaggregated: pd_capacity.measure_pd_capacity sweeps it")
    fleet = cached_fleet_capacity(
        workload.content_hash, list(endpoint.server_args), endpoint.fleet.replicas, endpoint.fleet.router,
        requests, slo_ttft_ms, slo_tpot_ms, cache_dir,
    )  # fmt: skip
    return fleet.capacity
