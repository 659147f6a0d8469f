"""One way to bench a deployment (deployment.py) in virtual time: open-loop arrivals through its cold twin engines
on one clock, with the router's policy model choosing each request's worker where there is a router.

One server is the engine alone (virtual_bench.run_bench). Replicas: each request's routing text (what smg routes
a /generate with input_ids on: the ids as decimals joined by spaces) goes to the policy (endpoints/router/: smg
1.13.0's routing as costbench models it) with what smg knows of the fleet: its own in-flight count per worker,
always current, and each engine's gauges (running, queued, KV usage, generation throughput) as last polled, every
--load-monitor-interval seconds from a first poll before any request. A disaggregated fleet: smg in PD mode picks
a prefill worker with its prefill policy and a decode worker with its decode policy (both `--policy` unless
`--prefill-policy`/`--decode-policy` say otherwise), adds the bootstrap host, port and a room to the body and sends
it to both; here one policy model per role, each over its own workers and their polled gauges, with the router's
in-flight counts, the engines joined by their KV transfers (engine/disaggregation.py). TTFT is the decode's first
token, which comes after the prefill and the transfer; the realised hit rate is the prefill workers' (the decode
reports what its prefill held).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from endpoints.capacity.deployment import Deployment
from endpoints.clock import VirtualClock
from endpoints.router.policy_params import RouterModelParams, parse_router_spec
from endpoints.router.routing_policy import RoutingPolicy, build_policy
from endpoints.router.routing_text import routing_text
from endpoints.router.worker_loads import EngineLoad, fleet_view
from endpoints.sim.engine.engine import SimEngine
from endpoints.sim.engine_builder import build_engine
from endpoints.sim.pd_fleet_bench import PdFleet, run_pd_fleet
from endpoints.sim.server_args import parse_server_args
from endpoints.sim.virtual_bench import BenchRequest, BenchResult, RequestTiming, run_bench, timed_request


@dataclass(frozen=True, slots=True)
class FleetBenchResult:
    bench: BenchResult  # every request's timing, in request order (engine: worker 0's)
    workers: tuple[int, ...]  # the worker each request was routed to, in request order
    mean_running_per_replica: float  # time-weighted mean running batch, over the replicas (requests)


def bench_deployment(deployment: Deployment, requests: Sequence[BenchRequest]) -> FleetBenchResult:
    """Open-loop arrivals (request.arrival_s from the start) through the deployment's cold engines, in virtual time.
    A policy or flag the model does not implement is refused by name."""
    if deployment.router is None:
        if deployment.replicas != 1 or deployment.disaggregated:
            raise ValueError(f"{deployment.label}: more than one server needs a router")
        result = run_bench(list(deployment.flags), list(requests))
        return FleetBenchResult(result, (0,) * len(requests), result.mean_running_requests)
    params = parse_router_spec(deployment.router)
    if deployment.disaggregated:
        return _pd_bench(deployment, params, requests)
    return _replicas_bench(list(deployment.flags), deployment.replicas, params, requests)


def cached_share(result: BenchResult) -> float:
    """Cached ÷ prompt tokens of a bench's requests (ratio 0-1)."""
    prompt = sum(r.prompt_tokens for r in result.requests)
    return sum(r.cached_tokens for r in result.requests) / prompt if prompt else 0.0


def engine_load(engine: SimEngine) -> EngineLoad:
    """The gauges smg's load monitor reads from a worker's SGLang /metrics (sim_metrics.py serves the same)."""
    scheduler = engine.scheduler
    return EngineLoad(
        running_reqs=len(scheduler.running),
        waiting_reqs=scheduler.queued,
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


def _replicas_bench(
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


class _RouterChoice:
    """smg in PD mode: one policy model per role, each over its own workers, their polled gauges and the router's
    in-flight counts."""

    def __init__(self, params: RouterModelParams, prefill_urls: tuple[str, ...], decode_urls: tuple[str, ...]):
        self._params, self._urls = params, (prefill_urls, decode_urls)
        self._roles: list[tuple[RoutingPolicy, LoadMonitor]] = []

    def start(self, prefills: Sequence[SimEngine], decodes: Sequence[SimEngine], clock: VirtualClock) -> None:
        self._clock = clock
        for engines in (prefills, decodes):
            policy = build_policy(self._params)
            self._roles.append((policy, LoadMonitor(engines, policy, self._params.load_monitor_interval_s, clock)))
        for _, monitor in self._roles:
            monitor.start()

    def choose(self, request: BenchRequest, in_flight: tuple[Sequence[int], Sequence[int]]) -> tuple[int, int]:
        text = routing_text("/generate", {"input_ids": list(request.input_ids)})
        p, d = (
            policy.select(
                text, fleet_view(urls, tuple(counts), monitor.loads, self._params.overload), self._clock.now_s()
            )
            for (policy, monitor), urls, counts in zip(self._roles, self._urls, in_flight)
        )
        return p, d

    def stop(self) -> None:
        for _, monitor in self._roles:
            monitor.stop()


def _pd_bench(shape: Deployment, params: RouterModelParams, requests: Sequence[BenchRequest]) -> FleetBenchResult:
    """Open-loop arrivals through the shape's cold engines, in virtual time. `workers` in the result: the prefill
    worker of each request (where its cache hit or missed)."""
    if shape.prefill_workers < 1 or shape.decode_workers < 1:
        raise ValueError("a disaggregated fleet needs at least one prefill and one decode worker")
    prefill_urls = tuple(f"http://prefill-{i}" for i in range(shape.prefill_workers))  # names only
    decode_urls = tuple(f"http://decode-{i}" for i in range(shape.decode_workers))
    fleet = PdFleet(shape.prefill_flags, shape.prefill_workers, shape.decode_flags, shape.decode_workers)
    result = run_pd_fleet(fleet, requests, _RouterChoice(params, prefill_urls, decode_urls))
    span_s = result.bench.duration_s
    # The decode batch is what a GPU-hour buys here.
    running = result.decode_running_request_s / (shape.decode_workers * span_s) if span_s > 0 else 0.0
    return FleetBenchResult(result.bench, result.prefill_workers, running)
