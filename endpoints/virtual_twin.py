"""A twin endpoint on a virtual clock (`clock: virtual` in endpoints.yaml): served inside the replay's own
process and event loop, so a window of traffic costs the CPU time its events take, not its length.

The twin and the replay client share one VirtualClock loop and talk real HTTP over a loopback socket (the
loop polls sockets; when every task waits on a timer, time jumps to it). Nothing else changes: the
server's facts, the cache preparation and the /metrics probes are the same code a launched server gets,
run in a thread (asyncio.to_thread) while time holds, and the probes tick at the same intervals of
virtual time. Timings are virtual: what the modelled GPUs took, without the twin's or the client's own
CPU time (which a wall-clock twin adds to every latency when the host is busy). The run records it
(runs.replay_clock, server_facts.json "clock").

    info = replay_on_virtual_twin(spec, run_dir, run_id, cold_start, replay)
    # replay(endpoint, clock) -> awaitable RunInfo: run_replay_async(..., clock=clock) at endpoint.url
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from aiohttp import web

from endpoints.probes.cache_prep import prepare_cache
from endpoints.probes.probe_session import probe_session
from endpoints.provision import LOOPBACK, RunningEndpoint, describe_served, server_flags
from endpoints.sim.engine.clock import VirtualClock
from endpoints.sim.http.server import create_app
from endpoints.sim.server_args import parse_server_args
from endpoints.spec import EndpointClock, EndpointMode, EndpointSpec

T = TypeVar("T")


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
    log_path = run_dir / f"{spec.name}.server.log"
    log_path.write_text(f"# costbench: the twin in-process on a virtual clock: {' '.join(flags)}\n")
    runner: web.AppRunner | None = None

    def crash() -> None:  # --fault-crash-after: the server goes away, the replay's process does not
        if runner is not None:
            asyncio.get_running_loop().create_task(runner.cleanup())

    runner = web.AppRunner(create_app(parse_server_args(flags), clock, on_crash=crash), access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, LOOPBACK, 0)
        await site.start()
        port = runner.addresses[0][1]
        url = f"http://{LOOPBACK}:{port}"
        endpoint = await asyncio.to_thread(describe_served, spec, url, run_dir, log_path, flags)
        cache = await asyncio.to_thread(prepare_cache, endpoint, cold_start)
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
        await runner.cleanup()
