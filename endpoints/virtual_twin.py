"""A twin endpoint on a virtual clock (`clock: virtual` in endpoints.yaml): served inside the replay's own
process and event loop, so a window of traffic costs the CPU time its events take, not its length.

The twin and the replay client share one VirtualClock loop (the loop polls sockets; when every task waits on a
timer, time jumps to it). The replay's generation requests reach the twin in-process (`RunningEndpoint.exchange`,
common/exchange.py): the twin's own code writes each answer's bytes at the virtual instant it would write them,
and the client's own code reads them; only the socket and the two aiohttp stacks are skipped, which on a virtual
clock move no timing. Everything else is real HTTP over loopback, and so is every request to a twin whose
faults act on the connection (endpoints/sim/http/in_process.py). Nothing else changes: the
server's facts, the cache preparation and the /metrics probes are the same code a launched server gets,
run in a thread (asyncio.to_thread) while time holds, and the probes tick at the same intervals of
virtual time. Timings are virtual: what the modelled GPUs took, without the twin's or the client's own
CPU time (which a wall-clock twin adds to every latency when the host is busy). The run records it
(runs.replay_clock, server_facts.json "clock").

A fleet (`replicas`, `router` in endpoints.yaml) on a virtual clock is N twin apps and the router's model
(endpoints/router/fleet_router.py: smg 1.13.0's policy as costbench models it, not the smg binary) on the same
loop, each on a loopback port of its own; the replay talks to the router's URL, the probes scrape every
worker (role worker) and the model's /metrics (role router), and server_facts.json's router entry says the
router was modelled. Which worker served a request is the model's x-smg-routed-worker-id header. A disaggregated
fleet is its prefill twins (each with a bootstrap port on loopback), its decode twins and the router's PD model
(endpoints/router/pd_fleet_router.py).

    info = replay_on_virtual_twin(spec, run_dir, run_id, cold_start, replay)
    # replay(endpoint, clock) -> awaitable RunInfo: run_replay_async(..., clock, exchange=endpoint.exchange)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from aiohttp import web

from common.run_folder import SERVER_LOG_FILE, WORKER_LOG_FILE
from endpoints.clock import VirtualClock
from endpoints.fleet_commands import fleet_workers, worker_extra_args
from endpoints.probes.cache_prep import prepare_cache
from endpoints.probes.probe_session import probe_session
from endpoints.provision import LOOPBACK, describe_served, free_port, server_flags
from endpoints.router.fleet_router import FleetRouter, RouterExchange
from endpoints.router.pd_fleet_router import PdFleetRouter
from endpoints.router.policy_params import parse_router_spec
from endpoints.running_endpoint import RunningEndpoint
from endpoints.sim.http.in_process import TwinExchange, twin_exchange
from endpoints.sim.http.server import create_app
from endpoints.sim.server_args import parse_server_args
from endpoints.spec import EndpointClock, EndpointMode, EndpointSpec, FleetSpec, WorkerRole

T = TypeVar("T")
ROUTER_MODEL = "costbench FleetRouter: a model of smg 1.13.0's routing (endpoints/router/), not the smg binary"


class VirtualTime:
    """The replay's and the probes' clock on a VirtualClock: monotonic = virtual seconds; epoch = the
    real epoch when the run started plus the virtual seconds since (so run.json's times read as dates)."""

    def __init__(self, clock: VirtualClock, epoch_at_start_s: float) -> None:
        self._clock = clock
        self._start_s = clock.now_s()
        self._epoch_at_start_s = epoch_at_start_s

    def now_s(self) -> float:
        return self._clock.now_s()

    def wall_s(self) -> float:
        return self._epoch_at_start_s + (self._clock.now_s() - self._start_s)

    async def sleep_until(self, t_s: float) -> None:
        await self._clock.sleep_until(t_s)


def replay_on_virtual_twin(
    spec: EndpointSpec,
    run_dir: Path,
    run_id: str,
    cold_start: bool,
    replay: Callable[[RunningEndpoint, VirtualTime], Awaitable[T]],
) -> T:
    """Serves the twin `spec` describes on a virtual clock for as long as `replay` runs; returns its result."""
    if spec.mode is not EndpointMode.SIM or spec.clock is not EndpointClock.VIRTUAL:
        raise ValueError(f"endpoint {spec.name!r} is not a twin on a virtual clock")
    clock = VirtualClock(allow_real_io=True)
    time_source = VirtualTime(clock, time.time())
    return clock.run(_serve_and_replay(spec, Path(run_dir), run_id, cold_start, replay, clock, time_source))


async def _serve_and_replay(
    spec: EndpointSpec,
    run_dir: Path,
    run_id: str,
    cold_start: bool,
    replay: Callable[[RunningEndpoint, VirtualTime], Awaitable[T]],
    clock: VirtualClock,
    time_source: VirtualTime,
) -> T:
    run_dir.mkdir(parents=True, exist_ok=True)
    flags = server_flags(spec, 0)
    runners: list[web.AppRunner] = []
    try:
        if spec.fleet is None:
            log_path = run_dir / SERVER_LOG_FILE.format(spec.name)
            log_path.write_text(f"# costbench: the twin in-process on a virtual clock: {' '.join(flags)}\n")
            url, exchange = await _serve_twin(flags, clock, runners)
            endpoint = await asyncio.to_thread(describe_served, spec, url, run_dir, log_path, flags)
            endpoint = replace(endpoint, exchange=exchange)
            logs: tuple[tuple[Path, str], ...] = ((log_path, url),)
        else:
            endpoint, logs = await _serve_fleet(spec, spec.fleet, flags, run_dir, clock, runners)
        cache = await asyncio.to_thread(prepare_cache, endpoint, cold_start)
        for log_path, url in logs:
            with log_path.open("a") as log:
                log.write(f"costbench-sim listening on {url} (virtual clock); {cache.note}\n")
        probes = probe_session(endpoint, run_dir, run_id, clock=time_source)
        stop = asyncio.Event()
        ticks = asyncio.create_task(probes.tick_on(stop), name=f"probes-{run_id}")
        try:
            return await replay(endpoint, time_source)
        finally:
            stop.set()
            await ticks
            await asyncio.to_thread(probes.stop, True)  # one last sample (the counters after the replay), the files
    finally:
        for runner in reversed(runners):  # the router first: it holds sessions to the twins
            await runner.cleanup()


async def _listen(app: web.Application, runners: list[web.AppRunner]) -> str:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    runners.append(runner)  # cleaned up by the caller, however the rest goes
    await web.TCPSite(runner, LOOPBACK, 0).start()
    return f"http://{LOOPBACK}:{runner.addresses[0][1]}"


async def _serve_twin(
    flags: list[str], clock: VirtualClock, runners: list[web.AppRunner]
) -> tuple[str, TwinExchange | None]:
    """One twin app on a free loopback port: its base URL, and its generation routes in-process (None: HTTP only)."""
    box: list[web.AppRunner] = []

    def crash() -> None:  # --fault-crash-after: the server goes away, the replay's process does not
        if box:
            asyncio.get_running_loop().create_task(box[0].cleanup())

    app = create_app(parse_server_args(flags), clock, on_crash=crash)
    url = await _listen(app, runners)
    box.append(runners[-1])
    return url, twin_exchange(app, url)


async def _serve_fleet(
    spec: EndpointSpec,
    fleet: FleetSpec,
    flags: list[str],
    run_dir: Path,
    clock: VirtualClock,
    runners: list[web.AppRunner],
) -> tuple[RunningEndpoint, tuple[tuple[Path, str], ...]]:
    """N twins and the router's model in front of them, on this loop; the endpoint as the replay sees it."""
    params = parse_router_spec(fleet.router)  # refused by name if the policy or a flag is not modelled
    logs: list[tuple[Path, str]] = []
    worker_urls: list[str] = []
    exchanges: list[TwinExchange | None] = []
    bootstrap_ports: list[int] = []
    for worker in fleet_workers(fleet):
        index = worker.index
        bootstrap = free_port(LOOPBACK) if worker.group.role is WorkerRole.PREFILL else None
        if bootstrap is not None:
            bootstrap_ports.append(bootstrap)
        worker_flags = [*flags, *worker_extra_args(spec, worker, bootstrap)]
        log_path = run_dir / WORKER_LOG_FILE.format(spec.name, index)
        log_path.write_text(f"# costbench: twin {index} in-process on a virtual clock: {' '.join(worker_flags)}\n")
        url, exchange = await _serve_twin(worker_flags, clock, runners)
        worker_urls.append(url)
        exchanges.append(exchange)
        logs.append((log_path, url))
    router: FleetRouter | PdFleetRouter
    if fleet.disaggregated:
        prefills = len(bootstrap_ports)  # fleet_workers puts the prefill workers first
        router = PdFleetRouter(
            tuple(worker_urls[:prefills]), tuple(bootstrap_ports), tuple(worker_urls[prefills:]), params, clock
        )
    else:
        router = FleetRouter(tuple(worker_urls), params, clock)
    router_url = await _listen(router.app(), runners)  # its startup polls every worker's /metrics once
    router_log = run_dir / SERVER_LOG_FILE.format(spec.name)
    router_log.write_text(
        f"# costbench: {ROUTER_MODEL}; --policy {fleet.router.policy} {' '.join(fleet.router.args)} in front of "
        f"{' '.join(worker_urls)} at {router_url}\n"
    )
    router_facts = {
        "pd_disaggregation": fleet.disaggregated,
        "policy": fleet.router.policy,
        "args": list(fleet.router.args),
        "modelled": True,
        "model": ROUTER_MODEL,
        "command": None,  # nothing was launched: the router is code in the replay's process
        "metrics_url": f"{router_url}/metrics",
        "log_file": router_log.name,
    }
    endpoint = await asyncio.to_thread(
        describe_served, spec, router_url, run_dir, router_log, flags, tuple(worker_urls), router_facts
    )
    # In-process through the router's pick to each worker's exchange; a PD fleet's hand-off between its prefill and
    # decode twins (bootstrap rooms, the decode's fetch) is HTTP through and through, and so are its requests.
    if isinstance(router, FleetRouter) and all(e is not None for e in exchanges):
        workers = tuple(e for e in exchanges if e is not None)
        endpoint = replace(endpoint, exchange=RouterExchange(router, router_url, workers))
    return endpoint, ((router_log, router_url), *logs)
