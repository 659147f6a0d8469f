"""The engine loop: runs the scheduler's steps on the injected clock and delivers tokens.

It sleeps (no busy loop) while there is nothing to run and wakes when a request arrives. Each step
takes the cost model's time on the clock, so the same engine paces real HTTP streams on a
monotonic clock and runs thousands of requests in a blink on a virtual one.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import replace

from endpoints.sim.clock import Clock
from endpoints.sim.profiles import ModelProfile
from endpoints.sim.scheduler import Scheduler
from endpoints.sim.sim_request import GenerateInput, SimRequest, TokenUpdate, planned_output
from endpoints.sim.step_batch import ForwardMode

GEN_THROUGHPUT_WINDOW_STEPS = 40  # SGLang's --decode-log-interval default


class RequestRejected(ValueError):
    """The request can never run here (too long for the context or the KV pool); becomes HTTP 400."""


class SimEngine:
    def __init__(
        self,
        scheduler: Scheduler,
        clock: Clock,
        model: ModelProfile,
        context_length_tokens: int,
        stream_interval: int = 1,
    ) -> None:
        self.scheduler = scheduler
        self.clock = clock
        self.model = model
        self.context_length_tokens = context_length_tokens
        self._stream_interval = max(1, stream_interval)
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._decode_window: deque[tuple[float, int]] = deque(maxlen=GEN_THROUGHPUT_WINDOW_STEPS)
        self.last_step_end_s: float | None = None
        self.steps = 0

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="sim-engine")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    # -- requests ---------------------------------------------------------------------------------

    def submit(self, spec: GenerateInput) -> SimRequest:
        prompt = len(spec.input_ids)
        if prompt == 0:
            raise RequestRejected("the request has no input tokens")
        if prompt >= self.context_length_tokens:
            raise RequestRejected(
                f"The input ({prompt} tokens) is longer than the model's context length "
                f"({self.context_length_tokens} tokens)."
            )
        # SGLang clips the output budget to what the context leaves.
        max_new = min(spec.max_new_tokens, self.context_length_tokens - prompt - 1)
        capacity = self.scheduler.pool.capacity_tokens
        if prompt + max_new > capacity:
            raise RequestRejected(
                f"the request needs {prompt + max_new} KV tokens (prompt {prompt} + max_new_tokens {max_new}) "
                f"but the KV pool holds {capacity}"
            )
        output_ids, reason = planned_output(
            spec.input_ids, max_new, spec.ignore_eos, self.model.vocab_size, self.model.eos_token_id
        )
        request = SimRequest(replace(spec, max_new_tokens=max_new), output_ids, reason, arrival_s=self.clock.now_s())
        self.scheduler.add(request)
        self._wake.set()
        return request

    async def updates(self, request: SimRequest) -> AsyncIterator[TokenUpdate]:
        """The request's updates until it finishes; aborts it if the consumer stops early."""
        try:
            while True:
                update = await request.updates.get()
                yield update
                if update.finished:
                    return
        finally:
            if not request.finished:
                self.scheduler.abort(request)

    async def generate(self, spec: GenerateInput) -> TokenUpdate:
        """Submit and wait for the final update (the non-streaming path and virtual-time tests)."""
        last = None
        async for update in self.updates(self.submit(spec)):
            last = update
        return last

    # -- the loop ---------------------------------------------------------------------------------

    async def _run(self) -> None:
        busy_until_s: float | None = None  # when the previous step ended on the step timeline
        while True:
            plan = self.scheduler.plan_step()
            if plan is None:
                busy_until_s = None
                self._wake.clear()
                await self._wake.wait()
                continue
            # Back-to-back steps start where the last one ended, so this loop's own Python time is
            # absorbed (as SGLang's overlap scheduler hides CPU work); after idling, or when more
            # than a step behind, the step starts now.
            start_s = self.clock.now_s()
            if busy_until_s is not None and start_s - busy_until_s < plan.duration_s:
                start_s = busy_until_s
            busy_until_s = start_s + plan.duration_s
            await self.clock.sleep_until(busy_until_s)
            now_s = self.clock.now_s()
            progressed = self.scheduler.complete_step(plan, now_s)
            self.steps += 1
            self.last_step_end_s = now_s
            if plan.batch.mode is ForwardMode.DECODE:
                self._decode_window.append((plan.duration_s, len(plan.work)))
            self._deliver(progressed, now_s)

    def _deliver(self, progressed: list[SimRequest], now_s: float) -> None:
        interval = self._stream_interval
        for r in progressed:
            if r.finished:
                r.updates.put_nowait(r.update(now_s))
            elif r.stream and (r.sent_tokens < 0 or r.output_tokens - r.sent_tokens >= interval):
                r.sent_tokens = r.output_tokens
                r.updates.put_nowait(r.update(now_s))

    # -- gauges -----------------------------------------------------------------------------------

    def gen_throughput_tok_s(self) -> float:
        """Decode tokens per second over the last decode steps (SGLang's gen_throughput gauge)."""
        busy_s = sum(d for d, _ in self._decode_window)
        return sum(n for _, n in self._decode_window) / busy_s if busy_s > 0 else 0.0
