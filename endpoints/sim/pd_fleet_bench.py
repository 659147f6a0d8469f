"""A disaggregated fleet in virtual time: prefill and decode engines on one clock, joined by their KV transfers, with
requests sent to both roles as SGLang's PD router sends them (the same body, a bootstrap room, the decode's stream
back to the client). Which workers get a request is the caller's (`WorkerChoice`): the capacity sweeps pass smg's
routing model (endpoints/capacity/deployment_bench.py), the calibration the published runs' round robin.

Each request's bootstrap room is a random 63-bit number, as SGLang's router draws it (seeded: the same run, the same
rooms); a DP-attention prefill worker runs a request on rank `room % dp_size`, so which rank gets it is random too.

Arrivals are open loop (each request's `arrival_s`) or closed loop behind `max_concurrency`, after `warmups`
unmeasured copies of the first request behind the same cap, as InferenceX's multi-node runs send them (a
request's clock starts when it gets through the cap; virtual_bench.py does the same for one server).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from endpoints.clock import VirtualClock
from endpoints.sim.cost.profiles import CostConstants
from endpoints.sim.engine.disaggregation import Bootstrap, BootstrapRooms, LocalPrefillPeer
from endpoints.sim.engine.engine import SimEngine
from endpoints.sim.engine_builder import build_engine
from endpoints.sim.server_args import parse_server_args
from endpoints.sim.virtual_bench import (
    BenchRequest,
    BenchResult,
    ClosedLoop,
    RequestTiming,
    run_keeping_result,
    timed_request,
)

ROOM_SEED = 0


@dataclass(frozen=True, slots=True)
class PdFleet:
    prefill_flags: tuple[str, ...]
    prefill_workers: int
    decode_flags: tuple[str, ...]
    decode_workers: int

    def role_gpus(self) -> tuple[int, int]:
        """GPUs of the prefill workers and of the decode workers (each worker's --tp-size)."""
        prefill = parse_server_args(list(self.prefill_flags)).tp_size * self.prefill_workers
        return prefill, parse_server_args(list(self.decode_flags)).tp_size * self.decode_workers


class WorkerChoice(Protocol):
    """Picks the prefill and the decode worker of each request; told when the engines exist and when the run ends."""

    def start(self, prefills: Sequence[SimEngine], decodes: Sequence[SimEngine], clock: VirtualClock) -> None: ...

    def choose(self, request: BenchRequest, in_flight: tuple[Sequence[int], Sequence[int]]) -> tuple[int, int]: ...

    def stop(self) -> None: ...


class RoundRobin:
    """Each role's workers in turn (smg's round_robin; with random prompts every cache-blind policy spreads alike)."""

    def __init__(self) -> None:
        self._sent = 0

    def start(self, prefills: Sequence[SimEngine], decodes: Sequence[SimEngine], clock: VirtualClock) -> None:
        self._sizes = (len(prefills), len(decodes))

    def choose(self, request: BenchRequest, in_flight: tuple[Sequence[int], Sequence[int]]) -> tuple[int, int]:
        i, self._sent = self._sent, self._sent + 1
        return i % self._sizes[0], i % self._sizes[1]

    def stop(self) -> None:
        pass


@dataclass(frozen=True, slots=True)
class PdBenchResult:
    bench: BenchResult  # every measured request's timing, in request order (engine: decode worker 0)
    prefill_workers: tuple[int, ...]  # the prefill worker of each measured request
    decode_running_request_s: float  # the decode workers' running requests x seconds, over the measured span


def run_pd_fleet(
    fleet: PdFleet,
    requests: Sequence[BenchRequest],
    choice: WorkerChoice | None = None,
    max_concurrency: int | None = None,
    warmups: int = 0,
    cost_constants: CostConstants | None = None,
) -> PdBenchResult:
    """The requests through the fleet's cold engines, in virtual time (see the module's docstring)."""
    if fleet.prefill_workers < 1 or fleet.decode_workers < 1:
        raise ValueError("a disaggregated fleet needs at least one prefill and one decode worker")
    clock = VirtualClock()
    choice = choice or RoundRobin()
    done: list[PdBenchResult] = []

    async def main() -> None:
        prefills = [build_engine(parse_server_args(list(fleet.prefill_flags)), clock, cost_constants)
                    for _ in range(fleet.prefill_workers)]  # fmt: skip
        decodes = [build_engine(parse_server_args(list(fleet.decode_flags)), clock, cost_constants)
                   for _ in range(fleet.decode_workers)]  # fmt: skip
        rooms: dict[int, BootstrapRooms] = {}
        for port, engine in enumerate(prefills):
            assert engine.rooms is not None
            rooms[port] = engine.rooms
        for engine in decodes:
            engine.peer = LocalPrefillPeer(rooms)
        for engine in (*prefills, *decodes):
            engine.start()
        in_flight = ([0] * len(prefills), [0] * len(decodes))
        workers = [0] * len(requests)
        rooms_drawn = random.Random(ROOM_SEED)

        async def send(i: int, request: BenchRequest) -> RequestTiming:
            p, d = choice.choose(request, in_flight)
            room = rooms_drawn.getrandbits(63)
            if i >= 0:
                workers[i] = p
            in_flight[0][p] += 1
            in_flight[1][d] += 1
            try:
                return await timed_request(decodes[d], i, request, prefills[p], Bootstrap(f"prefill-{p}", p, room))
            finally:
                in_flight[0][p] -= 1
                in_flight[1][d] -= 1

        loop = ClosedLoop(clock, send, max_concurrency, requests)
        choice.start(prefills, decodes, clock)
        try:
            await loop.warm_up(warmups)
            before_s = sum(e.running_request_s for e in decodes)
            start_s, timings = await loop.run()
        finally:
            choice.stop()
            for engine in (*prefills, *decodes):
                await engine.stop()
        running_s = sum(e.running_request_s for e in decodes) - before_s
        done.append(PdBenchResult(BenchResult(clock.now_s() - start_s, timings, decodes[0]), tuple(workers),
                                  running_s))  # fmt: skip

    return run_keeping_result(clock, main(), done)
