"""The open-loop scheduler: request i goes out at t0 + offset_i, whatever the server does.

It sleeps to each absolute deadline on the injected clock (never by summing deltas, so lateness
cannot accumulate), then starts the request as its own task and moves on; a slow server makes
requests overlap, it never delays the schedule. Only two things may hold a request back past its
time (docs/replay.md, "Honest timing"), and both are recorded on it as `held_s`/`held_by`:
- session order: a turn waits until the previous turn of its session has finished;
- the concurrency cap: at most `max_concurrency` requests in flight, released in schedule order.
Schedule lag is then sent − (scheduled + held): what the client itself added.

Cancelling the run records every request of the window it has not finished as `cancelled`: those
in flight or held, and those not yet due. So a stopped run still accounts for every request.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Sequence

from replay.clock import Clock
from replay.prepared_request import PreparedRequest
from replay.recording.progress_counters import ReplayProgress
from replay.recording.records import RequestRecord, RequestStatus
from replay.schedule.session_order import session_predecessors

Dispatch = Callable[[PreparedRequest], Awaitable[RequestRecord]]

HELD_BY_SESSION = "session"
HELD_BY_CONCURRENCY = "concurrency"
STOPPED_UNFINISHED = "the replay was stopped before this request finished"
STOPPED_NOT_DUE = "the replay was stopped before this request was due"


def cancelled_record(
    request: PreparedRequest, run_id: str, held_s: float, held_by: str | None, message: str = STOPPED_UNFINISHED
) -> RequestRecord:
    """A request the run stopped before it finished: nothing measured beyond its schedule."""
    return RequestRecord(
        run_id=run_id, request_id=request.request_id, session_id=request.session_id, turn=request.turn,
        input_tokens=request.input_tokens, output_tokens=request.output_tokens, scheduled_mono_s=request.offset_s,
        sent_mono_s=None, first_token_mono_s=None, first_answer_mono_s=None, finish_mono_s=None, chunk_mono_s=(),
        prompt_tokens=None, completion_tokens=None, cached_tokens=None, reasoning_tokens=None, finish_reason=None,
        http_status=None, status=RequestStatus.CANCELLED, error_kind="cancelled",
        error_message=message,
        is_warmup=request.is_warmup, held_s=held_s, held_by=held_by,
    )  # fmt: skip


async def run_open_loop(
    requests: Sequence[PreparedRequest],
    dispatch: Dispatch,
    clock: Clock,
    t0_s: float,
    on_record: Callable[[RequestRecord], None],
    max_concurrency: int | None = None,
    run_id: str = "",
    progress: ReplayProgress | None = None,
) -> int:
    """Send `requests` (sorted by offset_s) on schedule; `on_record` gets each record as it completes.

    Returns the number of records delivered. If cancelled, in-flight, held and not yet due requests
    are recorded as cancelled and the cancellation propagates.
    """
    if max_concurrency is not None and max_concurrency <= 0:
        raise ValueError(f"max_concurrency must be > 0, got {max_concurrency}")
    predecessors = session_predecessors(requests)
    # Only requests someone waits for need an event.
    finished_events = {p: asyncio.Event() for p in predecessors if p is not None}
    slots = asyncio.Semaphore(max_concurrency) if max_concurrency is not None else None
    in_flight: set[asyncio.Task] = set()
    failures: list[BaseException] = []
    delivered = 0
    started = 0  # requests[:started] got a task; the rest were not due when the run stopped

    async def one(index: int, request: PreparedRequest) -> None:
        nonlocal delivered
        held_by: str | None = None
        held_s = 0.0
        acquired = False
        try:
            before = predecessors[index]
            if before is not None and not finished_events[before].is_set():
                await finished_events[before].wait()
                held_by = HELD_BY_SESSION
            if slots is not None:
                if slots.locked():
                    held_by = HELD_BY_CONCURRENCY
                await slots.acquire()
                acquired = True
            if held_by is not None:
                held_s = max(0.0, clock.now_s() - t0_s - request.offset_s)
            if progress is not None:
                progress.on_sent()
            record = await dispatch(request)
        except asyncio.CancelledError:
            on_record(cancelled_record(request, run_id, held_s, held_by))
            delivered += 1
            raise
        finally:
            if acquired and slots is not None:
                slots.release()
            event = finished_events.get(index)
            if event is not None:
                event.set()
        if held_by is not None or request.is_warmup:
            record = dataclasses.replace(record, held_s=held_s, held_by=held_by, is_warmup=request.is_warmup)
        on_record(record)
        delivered += 1

    def finished(task: asyncio.Task) -> None:
        # Finished tasks leave the set, so a long run does not hold every completed task.
        in_flight.discard(task)
        if not task.cancelled() and (failure := task.exception()) is not None:
            failures.append(failure)

    def raise_failure() -> None:
        # Clients record errors as data, so a failing dispatch is a bug: end the run loudly.
        if failures:
            raise failures[0]

    try:
        for index, request in enumerate(requests):
            await clock.sleep_until(t0_s + request.offset_s)
            raise_failure()
            task = asyncio.create_task(one(index, request), name=f"request {request.request_id}")
            in_flight.add(task)
            task.add_done_callback(finished)
            started = index + 1
        while in_flight:
            await asyncio.wait(set(in_flight), return_when=asyncio.FIRST_EXCEPTION)
            raise_failure()
        raise_failure()
    finally:
        for task in in_flight:
            task.cancel()
        if in_flight:
            await asyncio.gather(*in_flight, return_exceptions=True)
        for request in requests[started:]:
            on_record(cancelled_record(request, run_id, 0.0, None, STOPPED_NOT_DUE))
            delivered += 1
    return delivered
