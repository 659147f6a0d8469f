"""bench_serving in virtual time: run a request list through the twin's engine, in-process, and
measure it the way `sglang.bench_serving` does (throughput over wall time, mean TTFT, TPOT, ITL).
Arrivals follow bench_serving at `--request-rate inf`: every request is started at once behind a
`max_concurrency` semaphore, and a request's clock (TTFT, latency) starts when it gets through the
semaphore, so the first `max_concurrency` requests hit an idle server as one burst. Warm-ups, where a
benchmark runs them, go first and are not measured: `warmups` copies of the first request behind the
same semaphore (InferenceX's benchmark_serving.py `--num-warmups`; SGLang's bench_serving
`--warmup-requests`), all finished before the measured run starts.

Used by bench/twin_calibration.py (the published setups) and by tests and capacity what-ifs: an
hour of simulated serving takes seconds, and the engine, scheduler and cost model are exactly the
ones behind HTTP.
"""

from __future__ import annotations

import asyncio
import operator
import random
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from statistics import fmean, median, quantiles
from typing import Any, TypeVar

from endpoints.clock import VirtualClock
from endpoints.sim.cost.profiles import CostConstants
from endpoints.sim.engine.disaggregation import Bootstrap
from endpoints.sim.engine.engine import SimEngine
from endpoints.sim.engine.sim_request import GenerateInput
from endpoints.sim.engine.ttft_parts import PART_NAMES, TtftParts
from endpoints.sim.engine_builder import build_engine
from endpoints.sim.server_args import parse_server_args

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class BenchRequest:
    input_ids: tuple[int, ...]
    output_tokens: int
    arrival_s: float = 0.0  # open-loop arrival; 0 for all means "as fast as the concurrency cap allows"


@dataclass(frozen=True, slots=True)
class RequestTiming:
    prompt_tokens: int
    output_tokens: int
    cached_tokens: int
    num_retractions: int
    sent_s: float
    ttft_s: float
    e2e_s: float
    chunk_gaps_s: tuple[float, ...]  # between consecutive chunks (stream interval 1: per token)
    ttft_parts: TtftParts | None = None  # where ttft_s went, by stage; they add up to it (None: no first token)


@dataclass(frozen=True, slots=True)
class BenchResult:
    duration_s: float
    requests: tuple[RequestTiming, ...]
    engine: SimEngine

    @property
    def mean_running_requests(self) -> float:
        """The time-weighted mean running batch over the run (warm-ups included: the sweeps run none)."""
        return self.engine.running_request_s / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def output_tok_s(self) -> float:
        return sum(r.output_tokens for r in self.requests) / self.duration_s

    @property
    def total_tok_s(self) -> float:
        return sum(r.output_tokens + r.prompt_tokens for r in self.requests) / self.duration_s

    @property
    def mean_ttft_s(self) -> float:
        return fmean(r.ttft_s for r in self.requests)

    @property
    def median_ttft_s(self) -> float:
        return median(r.ttft_s for r in self.requests)

    @property
    def p99_ttft_s(self) -> float:
        """numpy's default (linear) 99th percentile, as bench_serving prints it."""
        ttfts = [r.ttft_s for r in self.requests]
        return quantiles(ttfts, n=100, method="inclusive")[98] if len(ttfts) > 1 else ttfts[0]

    @property
    def mean_tpot_s(self) -> float:
        """bench_serving's TPOT: (latency − TTFT) / (output − 1), over requests with > 1 token."""
        return fmean(self._tpots_s())

    @property
    def median_tpot_s(self) -> float:
        return median(self._tpots_s())

    def _tpots_s(self) -> list[float]:
        return [(r.e2e_s - r.ttft_s) / (r.output_tokens - 1) for r in self.requests if r.output_tokens > 1]

    @property
    def mean_itl_s(self) -> float:
        gaps = [g for r in self.requests for g in r.chunk_gaps_s]
        return fmean(gaps) if gaps else 0.0

    @property
    def max_itl_s(self) -> float:
        return max((g for r in self.requests for g in r.chunk_gaps_s), default=0.0)

    @property
    def first_wave_ttft_s(self) -> tuple[float, ...]:
        """TTFTs of the requests sent at the very start (bench_serving sends min(concurrency, N) at once)."""
        start_s = min(r.sent_s for r in self.requests)
        return tuple(r.ttft_s for r in self.requests if r.sent_s == start_s)

    @property
    def retractions(self) -> int:
        return self.engine.scheduler.retractions.requests


_FIRST_ID, _END_ID = 3, 128_000  # ids drawn in [3, 128000): 0-2 are BOS/EOS/PAD
_ID_WIDTH = _END_ID - _FIRST_ID
_ID_BITS = _ID_WIDTH.bit_length()


def random_ids(n: int, rng: random.Random) -> tuple[int, ...]:
    """`n` draws of rng.randrange(3, 128000), draw for draw: randrange takes getrandbits(bits of the width) until one
    falls below the width (CPython's _randbelow_with_getrandbits); done here inline, as prompts run to thousands of
    ids and randrange's own checks cost more than the draw (tests/endpoints/sim/test_sim_random_ids.py)."""
    draw = rng.getrandbits
    ids: list[int] = []
    append = ids.append
    for _ in range(n):
        r = draw(_ID_BITS)
        while r >= _ID_WIDTH:
            r = draw(_ID_BITS)
        append(r + _FIRST_ID)
    return tuple(ids)


def random_requests(
    count: int, input_len: int, output_len: int, range_ratio: float, seed: int = 1
) -> list[BenchRequest]:
    """bench_serving's `random` dataset lengths: uniform in [max(len × ratio, 1), len]."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        n_in = rng.randint(max(int(input_len * range_ratio), 1), input_len)
        n_out = rng.randint(max(int(output_len * range_ratio), 1), output_len)
        out.append(BenchRequest(random_ids(n_in, rng), n_out))
    return out


async def timed_request(
    engine: SimEngine, i: int, request: BenchRequest, prefill: SimEngine | None = None, room: Bootstrap | None = None
) -> RequestTiming:
    """The request on `engine`, timed as a client sees it. Disaggregated: `engine` is the decode engine, and the
    request is sent to `prefill` too with the same `room`, as SGLang's router sends it to both."""
    clock = engine.clock
    sent_s = clock.now_s()
    spec = GenerateInput(f"bench-{i}", request.input_ids, request.output_tokens, ignore_eos=True, stream=True,
                         bootstrap=room)  # fmt: skip
    prefilled = None if prefill is None else asyncio.ensure_future(_drained(prefill, spec))
    # Only the final update comes through the channel; the engine times every chunk in request.chunk_times.
    submitted = engine.submit(spec, record_chunk_times=True)
    async for update in engine.updates(submitted):
        last = update
    times = submitted.chunk_times
    assert times is not None
    if prefilled is not None:
        await prefilled  # the router reads the prefill's answer to its end, and drops it
    return RequestTiming(
        prompt_tokens=last.prompt_tokens,
        output_tokens=last.output_tokens,
        cached_tokens=last.cached_tokens,
        num_retractions=last.num_retractions,
        sent_s=sent_s,
        ttft_s=times[0] - sent_s,
        e2e_s=times[-1] - sent_s,
        chunk_gaps_s=tuple(map(operator.sub, times[1:], times)),  # each chunk's time less the one before
        ttft_parts=last.ttft_parts,
    )


def mean_ttft_parts_ms(requests: Sequence[RequestTiming]) -> dict[str, float]:
    """Where a bench's TTFT goes: {part: mean ms over the requests with parts} for every part any of them passed
    (engine/ttft_parts.py), in the order a request passes them; a request that did not pass a part counts 0 there, so
    the means add up to the mean TTFT of those requests. Empty when none has parts."""
    named = [r.ttft_parts.named() for r in requests if r.ttft_parts is not None]
    seen = {name for parts in named for name in parts}
    return {name: fmean(parts.get(name, 0.0) for parts in named) for name in PART_NAMES if name in seen}


async def _drained(engine: SimEngine, spec: GenerateInput) -> None:
    async for _ in engine.updates(engine.submit(spec, record_chunk_times=True)):
        pass


def run_bench(
    flags: list[str],
    requests: list[BenchRequest],
    max_concurrency: int | None = None,
    cost_constants: CostConstants | None = None,
    warmups: int = 0,
) -> BenchResult:
    """Run the requests against a twin built from SGLang `flags`, in virtual time (with the cost model's
    constants injected, e.g. by the fit; default: the fitted ones), after `warmups` unmeasured copies of
    the first request. Arrival times count from the end of the warm-ups."""
    clock = VirtualClock()
    done: list[BenchResult] = []

    async def main() -> None:
        engine = build_engine(parse_server_args(flags), clock, cost_constants)
        engine.start()
        loop = ClosedLoop(clock, lambda i, request: timed_request(engine, i, request), max_concurrency, requests)
        try:
            await loop.warm_up(warmups)
            start_s, timings = await loop.run()
        finally:
            await engine.stop()
        done.append(BenchResult(clock.now_s() - start_s, timings, engine))

    return run_keeping_result(clock, main(), done)


def run_keeping_result(clock: VirtualClock, main: Coroutine[Any, Any, None], done: list[T]) -> T:
    """Run `main` on the clock and return what it put in `done`. It returns nothing itself because asyncio.Runner,
    as it closes, formats its main task's repr (result included) when it checks its SIGINT handler: a bench's
    result, every chunk gap of every request, would be turned into text for nothing."""
    clock.run(main)
    return done[0]


class ClosedLoop:
    """bench_serving's arrivals on a virtual clock: every request started at once (or at its `arrival_s`) behind a
    `max_concurrency` semaphore, after warm-ups (copies of the first request, index -1, -2, ...) behind the same
    semaphore. `send(index, request)` runs one request and times it; run_bench and pd_fleet_bench share this."""

    def __init__(
        self,
        clock: VirtualClock,
        send: Callable[[int, BenchRequest], Awaitable[RequestTiming]],
        max_concurrency: int | None,
        requests: Sequence[BenchRequest],
    ) -> None:
        self._clock, self._send, self._requests = clock, send, requests
        self._limit = asyncio.Semaphore(max_concurrency or max(len(requests), 1))

    async def _limited(self, i: int, request: BenchRequest) -> RequestTiming:
        async with self._limit:
            return await self._send(i, request)

    async def warm_up(self, warmups: int) -> None:
        """`warmups` unmeasured copies of the first request, all finished before this returns."""
        await asyncio.gather(*(self._limited(-1 - i, self._requests[0]) for i in range(warmups)))

    async def run(self) -> tuple[float, tuple[RequestTiming, ...]]:
        """The measured requests; returns when they started (s on the clock) and their timings, in request order."""
        start_s = self._clock.now_s()

        async def client(i: int, request: BenchRequest) -> RequestTiming:
            await self._clock.sleep_until(start_s + request.arrival_s)
            return await self._limited(i, request)

        timings = await asyncio.gather(*(client(i, r) for i, r in enumerate(self._requests)))
        return start_s, tuple(timings)
