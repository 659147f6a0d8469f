"""A disaggregated fleet's capacity at the SLO: the load sweep of slo_capacity.py through P prefill and D decode
twin engines on one virtual clock, joined by their KV transfers (engine/disaggregation.py), with the router's
policy model choosing each request's prefill and decode workers as smg's PD router does.

smg in PD mode picks a prefill worker with its prefill policy and a decode worker with its decode policy (both
`--policy` unless `--prefill-policy`/`--decode-policy` say otherwise), adds the bootstrap host, port and a room
to the body and sends it to both. Here one policy model per role, each over its own workers and their polled
gauges, with the router's in-flight counts. TTFT is the decode's first token, which comes after the prefill
and the transfer; the realised hit rate is the prefill workers' (the decode reports what its prefill held).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from endpoints.router.policy_params import RouterModelParams, parse_router_spec
from endpoints.router.router_spec import RouterSpec
from endpoints.router.routing_policy import build_policy
from endpoints.router.routing_text import routing_text
from endpoints.router.worker_loads import fleet_view
from endpoints.sim.calibration.fleet.fleet_capacity import (
    FLEET_RULES,
    FleetBenchResult,
    FleetCapacity,
    LoadMonitor,
    cached_sweep,
    sweep_bench_capacity,
)
from endpoints.sim.calibration.slo_capacity import SloCapacity, sweepable_requests
from endpoints.sim.calibration.virtual_bench import BenchRequest, BenchResult, RequestTiming, timed_request
from endpoints.sim.engine.clock import VirtualClock
from endpoints.sim.engine.disaggregation import Bootstrap, BootstrapRooms, LocalPrefillPeer
from endpoints.sim.engine.engine_builder import build_engine
from endpoints.sim.server_args import parse_server_args
from endpoints.spec import EndpointMode, EndpointSpec, WorkerRole
from workloads.workload import Workload


@dataclass(frozen=True, slots=True)
class PdShape:
    """xP + yD: how many workers of each role, and each role's full flags."""

    prefill_workers: int
    decode_workers: int
    prefill_flags: tuple[str, ...]
    decode_flags: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"{self.prefill_workers}P{self.decode_workers}D"


def pd_shape(spec: EndpointSpec) -> PdShape:
    """The shape a disaggregated fleet endpoint describes (its shared flags, then each role's)."""
    if spec.fleet is None or not spec.fleet.disaggregated:
        raise ValueError(f"endpoint {spec.name!r} is not a disaggregated fleet")
    groups = {g.role: g for g in spec.fleet.groups}
    prefill, decode = groups[WorkerRole.PREFILL], groups[WorkerRole.DECODE]
    return PdShape(
        prefill.count, decode.count,
        (*spec.server_args, *prefill.server_args, "--disaggregation-mode", "prefill"),
        (*spec.server_args, *decode.server_args, "--disaggregation-mode", "decode"),
    )  # fmt: skip


def run_pd_bench(shape: PdShape, params: RouterModelParams, requests: Sequence[BenchRequest]) -> FleetBenchResult:
    """Open-loop arrivals through the shape's cold engines, in virtual time. `workers` in the result: the prefill
    worker of each request (where its cache hit or missed)."""
    if shape.prefill_workers < 1 or shape.decode_workers < 1:
        raise ValueError("a disaggregated fleet needs at least one prefill and one decode worker")
    clock = VirtualClock()
    prefill_urls = tuple(f"http://prefill-{i}" for i in range(shape.prefill_workers))  # names only
    decode_urls = tuple(f"http://decode-{i}" for i in range(shape.decode_workers))

    async def main() -> FleetBenchResult:
        prefills = [build_engine(parse_server_args(list(shape.prefill_flags)), clock) for _ in prefill_urls]
        decodes = [build_engine(parse_server_args(list(shape.decode_flags)), clock) for _ in decode_urls]
        rooms: dict[int, BootstrapRooms] = {}
        for port, engine in enumerate(prefills):
            assert engine.rooms is not None
            rooms[port] = engine.rooms
        for engine in decodes:
            engine.peer = LocalPrefillPeer(rooms)
        for engine in (*prefills, *decodes):
            engine.start()
        roles = []
        for engines, urls in ((prefills, prefill_urls), (decodes, decode_urls)):
            policy = build_policy(params)
            roles.append((policy, LoadMonitor(engines, policy, params.load_monitor_interval_s, clock), urls))
        in_flight = [[0] * len(prefills), [0] * len(decodes)]
        workers = [0] * len(requests)

        async def client(i: int, request: BenchRequest, start_s: float) -> RequestTiming:
            await clock.sleep_until(start_s + request.arrival_s)
            text = routing_text("/generate", {"input_ids": list(request.input_ids)})
            chosen = []
            for role, (policy, monitor, urls) in enumerate(roles):
                fleet = fleet_view(urls, tuple(in_flight[role]), monitor.loads, params.overload)
                chosen.append(policy.select(text, fleet, clock.now_s()))
            p, d = chosen
            workers[i] = p
            in_flight[0][p] += 1
            in_flight[1][d] += 1
            try:
                room = Bootstrap(prefill_urls[p], p, i)
                return await timed_request(decodes[d], i, request, prefills[p], room)
            finally:
                in_flight[0][p] -= 1
                in_flight[1][d] -= 1

        for _, monitor, _ in roles:
            monitor.start()
        try:
            start_s = clock.now_s()
            timings = await asyncio.gather(*(client(i, r, start_s) for i, r in enumerate(requests)))
        finally:
            for _, monitor, _ in roles:
                monitor.stop()
            for engine in (*prefills, *decodes):
                await engine.stop()
        span_s = clock.now_s() - start_s
        running_s = sum(e.running_request_s for e in decodes)  # the decode batch is what a GPU-hour buys here
        return FleetBenchResult(BenchResult(span_s, tuple(timings), decodes[0]), tuple(workers),
                                running_s / (len(decodes) * span_s) if span_s > 0 else 0.0)  # fmt: skip

    return clock.run(main())


def sweep_pd_capacity(
    shape: PdShape,
    router: RouterSpec,
    requests: Sequence[BenchRequest],
    slo_ttft_ms: float,
    slo_tpot_ms: float,
    start_factor: float = 1.0,
) -> FleetCapacity:
    """The highest rate the shape keeps inside the SLO; worker shares are the prefill workers'."""
    params = parse_router_spec(router)
    return sweep_bench_capacity(
        lambda scaled: run_pd_bench(shape, params, scaled), shape.prefill_workers, router.policy, requests,
        slo_ttft_ms, slo_tpot_ms, start_factor,
    )  # fmt: skip


def cached_pd_capacity(
    content_hash: str,
    shape: PdShape,
    router: RouterSpec,
    requests: Sequence[BenchRequest],
    slo_ttft_ms: float,
    slo_tpot_ms: float,
    cache_dir: Path | None,
    start_factor: float = 1.0,
) -> FleetCapacity:
    """sweep_pd_capacity, done once per (requests, shape, router flags, SLO) with `cache_dir`."""
    key = [content_hash, "pd", shape.prefill_workers, shape.decode_workers, list(shape.prefill_flags),
           list(shape.decode_flags), router.policy, list(router.args), slo_ttft_ms, slo_tpot_ms,
           round(start_factor, 6), FLEET_RULES]  # fmt: skip
    return cached_sweep(
        key, cache_dir, lambda: sweep_pd_capacity(shape, router, requests, slo_ttft_ms, slo_tpot_ms, start_factor)
    )


def measure_pd_capacity(
    endpoint: EndpointSpec,
    workload: Workload,
    slo_ttft_ms: float,
    slo_tpot_ms: float,
    cache_dir: Path | None = None,
) -> SloCapacity | None:
    """measure_slo_capacity for a disaggregated fleet endpoint: its prefill and decode workers behind its router's
    model. None where no sweep applies (not a twin, fewer than two distinct arrivals)."""
    if endpoint.mode is not EndpointMode.SIM:
        return None
    requests = sweepable_requests(workload)
    if requests is None:
        return None
    assert endpoint.fleet is not None
    fleet = cached_pd_capacity(
        workload.content_hash, pd_shape(endpoint), endpoint.fleet.router, requests, slo_ttft_ms, slo_tpot_ms, cache_dir
    )
    return fleet.capacity
