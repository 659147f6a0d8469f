"""The engine loop: runs the scheduler's steps on the injected clock and delivers tokens.

It sleeps (no busy loop) while there is nothing to run and wakes when a request arrives. Each step
takes the cost model's time on the clock, so the same engine paces real HTTP streams on a
monotonic clock and runs thousands of requests in a blink on a virtual one.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncGenerator, Callable
from dataclasses import replace
from typing import Protocol

from endpoints.clock import Clock, VirtualClock
from endpoints.sim.cost.cost_model import uniform_decode_of
from endpoints.sim.cost.profiles import ModelProfile
from endpoints.sim.cost.step_batch import ForwardMode
from endpoints.sim.engine.disaggregation import (
    BootstrapRooms,
    Disaggregation,
    DisaggregationMode,
    PrefillPeer,
    RoomDone,
    TransferFailed,
)
from endpoints.sim.engine.gpu_counters import GpuCounters
from endpoints.sim.engine.scheduler import Scheduler
from endpoints.sim.engine.sim_request import HEALTH_CHECK_PREFIX, GenerateInput, SimRequest, TokenUpdate, planned_output
from endpoints.sim.structured.grammar_backend import GrammarBackend

LOG_INTERVAL_STEPS = 40  # SGLang's --decode-log-interval default: the window of the throughput gauges


class RequestRejected(ValueError):
    """The request can never run here (too long for the context or the KV pool); becomes HTTP 400."""


class UpdateObserver(Protocol):
    """Told about every update the engine delivers (the metrics); must be cheap, it runs per chunk."""

    def observe(self, request: SimRequest, update: TokenUpdate, prev_tokens: int, prev_s: float | None) -> None: ...


class SimEngine:
    def __init__(
        self,
        scheduler: Scheduler,
        clock: Clock,
        model: ModelProfile,
        context_length_tokens: int,
        stream_interval: int = 1,
        grammar: GrammarBackend | None = None,
        disaggregation: Disaggregation | None = None,
        gpu: GpuCounters | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.grammar = grammar or GrammarBackend("xgrammar")
        self.clock = clock
        self.model = model
        self.context_length_tokens = context_length_tokens
        self.observer: UpdateObserver | None = None
        self._stream_interval = max(1, stream_interval)
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._decode_window: deque[tuple[float, int]] = deque(maxlen=LOG_INTERVAL_STEPS)
        self._retract_window: deque[int] = deque(maxlen=LOG_INTERVAL_STEPS)
        # SGLang's overlap scheduler plans step k+1 while step k runs, so a request that arrives
        # during step k is first seen when step k+1 is planned... and can run in step k+2 at the
        # earliest. Arrivals wait in the inbox for one step boundary, then in staged for one more.
        self._busy = False
        self._inbox: list[SimRequest] = []
        self._staged: list[SimRequest] = []
        # Requests waiting for their grammar to compile (SGLang's grammar queue): (ready time, request).
        self._compiling: list[tuple[float, SimRequest]] = []
        self.last_step_end_s: float | None = None
        self.steps = 0
        self.loop_cpu_s = 0.0  # Python time spent planning, completing and delivering (the twin's own overhead)
        # Requests in the running batch x the steps' seconds: / a span, the time-weighted mean running batch
        # (what sglang:num_running_reqs, sampled, averages to).
        self.running_request_s = 0.0
        self.gpu = gpu  # what its GPUs would report to NVML and DCGM (gpu_counters.py); None: not counted
        # PD disaggregation (disaggregation.py). A prefill server's rooms are served on its bootstrap port; a
        # decode server reaches its prefills through `peer` (both set by the HTTP layer).
        self.disaggregation = disaggregation
        self.mode = DisaggregationMode.NULL if disaggregation is None else disaggregation.mode
        self.rooms: BootstrapRooms | None = BootstrapRooms() if self.mode is DisaggregationMode.PREFILL else None
        self.peer: PrefillPeer | None = None
        self.bootstrapping = 0  # prefill: requests waiting for their decode to be ready (bootstrap queue)
        self.inflight = 0  # prefill: KV transfers under way (inflight queue)
        self.prealloc: deque[SimRequest] = deque()  # decode: waiting for KV slots (prealloc queue)
        self._arrived: list[tuple[SimRequest, RoomDone | None]] = []  # decode: KV landed (None: the transfer failed)
        self._pd_tasks: set[asyncio.Task] = set()
        self.transfer_observer: Callable[[RoomDone], None] | None = None  # told of each KV transfer a prefill sends
        # Runs of quiet decode steps (_decode_quietly) go without the loop's round trips: on a virtual clock, with a
        # cost model that has a closed form of a plain decode step.
        self._uniform_decode = uniform_decode_of(scheduler.cost_model) if isinstance(clock, VirtualClock) else None

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="sim-engine")

    async def stop(self) -> None:
        for task in list(self._pd_tasks):
            task.cancel()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    # -- requests ---------------------------------------------------------------------------------

    def submit(self, spec: GenerateInput, record_chunk_times: bool = False) -> SimRequest:
        """Queue a request. `record_chunk_times`: its consumer reads only the final update and the time of every
        update (request.chunk_times), so the updates before the last are not built or sent, just timed (with no
        observer, the scheduler's decode cohort fills in a decoding request's times: set `observer` before submits)."""
        prompt = len(spec.input_ids)
        if prompt == 0:
            raise RequestRejected("the request has no input tokens")
        if (
            self.mode is not DisaggregationMode.NULL
            and spec.bootstrap is None
            and not spec.rid.startswith(HEALTH_CHECK_PREFIX)
        ):
            raise RequestRejected(
                f"this is a {self.mode.value} server (--disaggregation-mode {self.mode.value}): send requests "
                "through a PD router, which adds bootstrap_host, bootstrap_port and bootstrap_room"
            )
        if prompt >= self.context_length_tokens:
            raise RequestRejected(
                f"The input ({prompt} tokens) is longer than the model's context length "
                f"({self.context_length_tokens} tokens)."
            )
        # SGLang clips the output budget to what the context leaves.
        max_new = min(spec.max_new_tokens, self.context_length_tokens - prompt - 1)
        capacity = self.scheduler.rank_capacity_tokens  # a request's KV lives in its own rank's pool
        if prompt + max_new > capacity:
            raise RequestRejected(
                f"the request needs {prompt + max_new} KV tokens (prompt {prompt} + max_new_tokens {max_new}) "
                f"but the KV pool holds {capacity}"
            )
        model = self.model
        plan = planned_output(
            spec.input_ids, max_new, spec.ignore_eos, model.vocab_size, model.eos_token_id,
            model.think_end_token_id, model.reasoning_share, spec.reasoning_tokens, spec.answer,
        )  # fmt: skip
        if self.mode is DisaggregationMode.PREFILL and spec.bootstrap is not None:
            # The prefill server samples the first token only; its decode server produces the rest.
            plan = replace(plan, output_ids=plan.output_ids.head(1), finish_reason={"type": "length", "length": 1})
        now_s = self.clock.now_s()
        request = SimRequest(replace(spec, max_new_tokens=max_new), plan, arrival_s=now_s)
        if record_chunk_times:
            request.chunk_times = []
            if self.observer is None and spec.stream:
                request.chunk_stride = self._stream_interval  # nobody sees its updates: its chunks may be timed later
        wait_s = self.grammar.wait_s(spec.grammar_key, now_s) if spec.grammar_key is not None else 0.0
        if wait_s > 0:
            self._compiling.append((now_s + wait_s, request))  # scheduled once its grammar is compiled
        else:
            self._enqueue(request)
        self._wake.set()
        return request

    def _enqueue(self, request: SimRequest) -> None:
        if request.bootstrap is not None and self.mode is DisaggregationMode.DECODE:
            self.scheduler.dispatch_transfer(request)
            self.prealloc.append(request)  # its KV comes from the prefill, once slots for it are taken (_run)
        elif request.bootstrap is not None and self.mode is DisaggregationMode.PREFILL:
            self._spawn(self._bootstrap(request))
        else:
            self._schedule(request)

    def _schedule(self, request: SimRequest) -> None:
        if self._busy:
            self._inbox.append(request)  # joins the scheduler's queue at the next step boundary (see _run)
        else:
            self.scheduler.add(request)

    def _spawn(self, coroutine) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._pd_tasks.add(task)
        task.add_done_callback(self._pd_tasks.discard)

    # -- PD disaggregation ------------------------------------------------------------------------

    async def _bootstrap(self, request: SimRequest) -> None:
        """Prefill: the request waits in the bootstrap queue until its decode server has taken KV slots for it."""
        assert self.rooms is not None and request.bootstrap is not None
        self.bootstrapping += 1
        try:
            await self.rooms.wait_ready(request.bootstrap.room)
        finally:
            self.bootstrapping -= 1
        if request.aborted:
            return
        request.queued_s = self.clock.now_s()  # its bootstrap queue ends: it joins the waiting queue
        self._schedule(request)
        self._wake.set()

    async def _send_kv(self, request: SimRequest) -> None:
        """Prefill: the first token is sampled; the prompt's KV crosses the link to the decode server."""
        assert self.rooms is not None and self.disaggregation is not None and request.bootstrap is not None
        room = request.bootstrap.room
        if request.aborted:
            self.rooms.fail(room, f"the prefill aborted the request: {request.abort_reason}")
            return
        kv_bytes = request.prompt_tokens * self.disaggregation.kv_bytes_per_token
        transfer_s = self.disaggregation.link.transfer_s(kv_bytes)
        self.inflight += 1
        try:
            await self.clock.sleep_until(self.clock.now_s() + transfer_s)
        finally:
            self.inflight -= 1
            self.scheduler.transfer_done(request)
            self._wake.set()  # its request slot is free: an idle loop may admit the next
        # The prefill's parts of the TTFT travel with the KV (ttft_parts.py): its wait queue and its prefill.
        assert request.admitted_s is not None and request.first_token_s is not None
        queued_s = request.arrival_s if request.queued_s is None else request.queued_s
        outcome = RoomDone(request.cached_tokens, kv_bytes, transfer_s, request.admitted_s - queued_s,
                           request.first_token_s - request.admitted_s)  # fmt: skip
        if self.transfer_observer is not None:
            self.transfer_observer(outcome)
        self.rooms.finish(room, outcome)

    async def _receive_kv(self, request: SimRequest) -> None:
        """Decode: slots are taken; tell the prefill, and wait for the KV (the transfer queue)."""
        assert self.peer is not None and request.bootstrap is not None
        outcome: RoomDone | None = None
        try:
            await self.peer.ready(request.bootstrap)
            outcome = await self.peer.done(request.bootstrap)
            request.kv_arrived_s, request.kv_done = self.clock.now_s(), outcome
        except (TransferFailed, OSError, TimeoutError) as exc:
            request.abort_reason = {"type": "abort", "message": f"KV transfer failed: {exc}"}
        self._arrived.append((request, outcome))
        self._wake.set()

    def _pd_decode_boundary(self, now_s: float) -> None:
        """Decode, at a step boundary: requests whose KV arrived join the batch; waiting ones take free slots."""
        scheduler, reserved = self.scheduler, self.disaggregation.reserved_decode_tokens if self.disaggregation else 0
        arrived, self._arrived = self._arrived, []
        for request, outcome in arrived:
            if outcome is None:
                scheduler.drop_transfer(request)
                self._tell_aborted(request)
                continue
            scheduler.add_transferred(request, outcome.cached_tokens)
        self._deliver(scheduler.admit_prebuilt(now_s), now_s)
        if self.prealloc:
            for request in scheduler.preallocate(self.prealloc, reserved):
                request.preallocated_s = now_s  # its prealloc queue ends: the transfer queue's starts
                self._spawn(self._receive_kv(request))

    async def updates(self, request: SimRequest) -> AsyncGenerator[TokenUpdate, None]:
        """The request's updates until it finishes; aborts it if the consumer stops early."""
        try:
            while True:
                update = await request.updates.get()
                yield update
                if update.finished:
                    return
        finally:
            self.abort(request)

    def abort(self, request: SimRequest, reason: dict | None = None) -> None:
        """Stop a request now (client gone, or a fault); it gets a final update if it had none."""
        if request.finished or request.aborted:
            return
        self.scheduler.abort(request, reason)
        if self.rooms is not None and request.bootstrap is not None:
            self.rooms.fail(request.bootstrap.room, f"the prefill aborted the request: {request.abort_reason}")
        self._tell_aborted(request)
        self._wake.set()

    def _tell_aborted(self, request: SimRequest) -> None:
        update = request.update(self.clock.now_s())
        if self.observer is not None:
            self.observer.observe(request, update, max(request.sent_tokens, 0), request.last_sent_s)
        if request.chunk_times is not None:
            request.chunk_times.append(update.now_s)
        request.updates.put_nowait(update)

    async def generate(self, spec: GenerateInput) -> TokenUpdate:
        """Submit and wait for the final update (the non-streaming path and virtual-time tests)."""
        last = None
        async for update in self.updates(self.submit(spec)):
            last = update
        if last is None:
            raise RuntimeError("sim engine: a request ended without a final update")
        return last

    # -- the loop ---------------------------------------------------------------------------------

    async def _run(self) -> None:
        busy_until_s: float | None = None  # when the previous step ended on the step timeline
        scheduler, clock = self.scheduler, self.clock
        while True:
            cpu_start = time.perf_counter()
            if self._staged:
                for r in self._staged:
                    if not r.aborted:
                        scheduler.add(r)
                self._staged = []
            if self._inbox:
                self._staged, self._inbox = [r for r in self._inbox if not r.aborted], []
            if self._compiling:
                self._admit_compiled(clock.now_s())
            if self.mode is DisaggregationMode.DECODE:
                self._pd_decode_boundary(clock.now_s())
            elif busy_until_s is not None and self._uniform_decode and not (self._compiling or self.observer):
                # Staged arrivals join the queue at the next boundary: one step can go before they do.
                staged = bool(self._staged)
                busy_until_s, ran = self._decode_quietly(busy_until_s, 1 if staged else None)
                if staged and ran:
                    self.loop_cpu_s += time.perf_counter() - cpu_start
                    continue
            plan = scheduler.plan_step(clock.now_s())
            if scheduler.dropped:
                for r in scheduler.dropped:
                    self._tell_aborted(r)
                scheduler.dropped.clear()
            if plan is None:
                self.loop_cpu_s += time.perf_counter() - cpu_start
                if self._staged:
                    continue  # idle GPU: nothing to overlap with, staged arrivals are scheduled now
                busy_until_s = None
                self._busy = False
                self._wake.clear()
                if self._compiling:  # idle until a grammar compile ends (or a request arrives)
                    next_ready_s = min(t for t, _ in self._compiling)
                    try:
                        await asyncio.wait_for(self._wake.wait(), max(next_ready_s - clock.now_s(), 0.0))
                    except TimeoutError:
                        pass
                    continue
                await self._wake.wait()
                continue
            self._busy = True
            if plan.retracted:
                self._retract_window.append(len(plan.retracted))
            # Back-to-back steps start where the last one ended, so this loop's own Python time is
            # absorbed (as SGLang's overlap scheduler hides CPU work); after idling, or when more
            # than a step behind, the step starts now.
            start_s = clock.now_s()
            if busy_until_s is not None and start_s - busy_until_s < plan.duration_s:
                start_s = busy_until_s
            busy_until_s = start_s + plan.duration_s
            self.running_request_s += len(scheduler.running) * plan.duration_s
            if self.gpu is not None:
                self.gpu.add_step(start_s, busy_until_s, scheduler.cost_model.step_work(plan.batch))
            self.loop_cpu_s += time.perf_counter() - cpu_start
            await clock.sleep_until(busy_until_s)
            cpu_start = time.perf_counter()
            now_s = clock.now_s()
            progressed = scheduler.complete_step(plan, now_s)
            self.steps += 1
            self.last_step_end_s = now_s
            if plan.batch.mode is ForwardMode.DECODE:
                self._decode_window.append((plan.duration_s, plan.gained_tokens))
                if not plan.retracted:
                    self._retract_window.append(0)
            self._deliver(progressed, now_s)
            self.loop_cpu_s += time.perf_counter() - cpu_start

    def _decode_quietly(self, busy_until_s: float, most_steps: int | None) -> tuple[float, int]:
        """Runs, back to back, the decode steps that would go through this loop with nothing to decide and nobody to
        tell (Scheduler.quiet_decode), while each step's sleep would skip the event loop (VirtualClock.sleep_skipper):
        nothing else runs meanwhile, so each step's time, clock, GPU counters and gauges come out of the same
        operations on the same floats as the loop's, in the same order. Stops before the first step that needs the
        loop, or after `most_steps`. Returns when the last step run ends on the step timeline, and the steps run."""
        assert self.mode is not DisaggregationMode.DECODE and self._uniform_decode is not None
        scheduler, clock, gpu, uniform_decode = self.scheduler, self.clock, self.gpu, self._uniform_decode
        assert isinstance(clock, VirtualClock)
        quiet = scheduler.quiet_decode()
        if quiet is None:
            return busy_until_s, 0
        skip = clock.sleep_skipper()
        if skip is None:
            return busy_until_s, 0
        requests, context_tokens, steps = quiet
        if most_steps is not None:
            steps = min(steps, most_steps)
        running = len(scheduler.running)
        decode_window, retract_window = self._decode_window, self._retract_window
        end_times: list[float] = []
        for _ in range(steps):
            duration_s, compute_s, hbm_bytes = uniform_decode(requests, context_tokens)
            start_s = clock.now_s()
            if start_s - busy_until_s < duration_s:
                start_s = busy_until_s
            end_s = start_s + duration_s
            if not skip(end_s):
                break  # something else runs first, or the sleep is not a plain one: the loop plans this step
            self.running_request_s += running * duration_s
            if gpu is not None:
                gpu.add_step_s(start_s, end_s, compute_s, hbm_bytes)
            end_times.append(clock.now_s())
            decode_window.append((duration_s, requests))
            retract_window.append(0)
            busy_until_s = end_s
            context_tokens += requests
        if end_times:
            scheduler.quiet_decode_done(end_times)
            self.steps += len(end_times)
            self.last_step_end_s = end_times[-1]
        return busy_until_s, len(end_times)

    def _admit_compiled(self, now_s: float) -> None:
        """Requests whose grammar is ready join the scheduler's queue (aborted ones are dropped)."""
        ready = [r for t, r in self._compiling if t <= now_s]
        if not ready:
            return
        self._compiling = [(t, r) for t, r in self._compiling if t > now_s]
        for r in ready:
            if not r.aborted:
                self._enqueue(r)

    def compiling_requests(self) -> int:
        """Requests waiting for their grammar (SGLang's num_grammar_queue_reqs gauge)."""
        return sum(1 for _, r in self._compiling if not r.aborted)

    def _deliver(self, progressed: list[SimRequest], now_s: float) -> None:
        interval = self._stream_interval
        observer = self.observer
        for r in progressed:
            finished = r.finished
            if finished:
                output = r.output_tokens
            elif not r.stream:
                continue
            else:
                output, sent = r.output_tokens, r.sent_tokens
                if sent >= 0 and output - sent < interval:
                    continue  # within the stream interval: no chunk this step
            times = r.chunk_times
            if times is not None and not finished:
                # A timed-only consumer: the chunk is timed, and only the observer (if any) sees an update.
                times.append(now_s)
                if observer is not None:
                    observer.observe(r, r.update(now_s), max(r.sent_tokens, 0), r.last_sent_s)
                r.sent_tokens = output
                r.last_sent_s = now_s
                continue
            update = r.update(now_s)
            if observer is not None:
                observer.observe(r, update, max(r.sent_tokens, 0), r.last_sent_s)
            r.sent_tokens = output
            r.last_sent_s = now_s
            if times is not None:
                times.append(now_s)
            r.updates.put_nowait(update)
            if finished and r.bootstrap is not None and self.mode is DisaggregationMode.PREFILL:
                self.scheduler.hold_for_transfer(r)
                self._spawn(self._send_kv(r))

    def has_work(self) -> bool:
        pd = self.bootstrapping or self.inflight or self.prealloc or self._arrived
        return bool(self._inbox or self._staged or self.compiling_requests() or pd) or self.scheduler.has_work()

    def flush_cache(self) -> bool:
        """SGLang's /flush_cache: refused (False) while any request runs or waits; it empties the grammar
        cache too (the next request with any constraint compiles it again)."""
        if self.has_work() or not self.scheduler.flush_cache():
            return False
        self.grammar.reset()
        return True

    # -- gauges -----------------------------------------------------------------------------------

    def gen_throughput_tok_s(self) -> float:
        """Decode tokens per second over the last decode steps (SGLang's gen_throughput gauge)."""
        busy_s = sum(d for d, _ in self._decode_window)
        return sum(n for _, n in self._decode_window) / busy_s if busy_s > 0 else 0.0

    def recent_retractions(self) -> int:
        """Requests retracted over the last log interval (SGLang's num_retracted_reqs gauge)."""
        return sum(self._retract_window)
