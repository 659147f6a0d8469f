"""The open-loop scheduler: request i goes out at t0 + offset_i, whatever the server does.

It sleeps to each absolute deadline on the injected clock (never by summing deltas, so lateness
cannot accumulate), then starts the request as its own task and moves on; a slow server makes
requests overlap, it never delays the schedule. How late each request really left is measured by
the client (`sent_mono_s`), so lag caused here or in the event loop shows up in the records.

Session order and a concurrency cap (DESIGN.md, "Replay") will hold requests back here, later.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from replay.clock import Clock
from replay.prepared_request import PreparedRequest
from replay.records import RequestRecord

Dispatch = Callable[[PreparedRequest], Awaitable[RequestRecord]]


async def run_open_loop(
    requests: Sequence[PreparedRequest],
    dispatch: Dispatch,
    clock: Clock,
    t0_s: float,
    on_record: Callable[[RequestRecord], None],
) -> int:
    """Send `requests` (sorted by offset_s) on schedule; `on_record` gets each record as it completes.

    Returns the number of records delivered. If cancelled, in-flight requests are cancelled too.
    """
    in_flight: set[asyncio.Task] = set()
    failures: list[BaseException] = []
    delivered = 0

    async def one(request: PreparedRequest) -> None:
        nonlocal delivered
        record = await dispatch(request)
        on_record(record)
        delivered += 1

    def finished(task: asyncio.Task) -> None:
        # Finished tasks leave the set, so a long run does not hold every completed task.
        in_flight.discard(task)
        if not task.cancelled() and task.exception() is not None:
            failures.append(task.exception())

    def raise_failure() -> None:
        # Clients record errors as data, so a failing dispatch is a bug: end the run loudly.
        if failures:
            raise failures[0]

    try:
        for request in requests:
            await clock.sleep_until(t0_s + request.offset_s)
            raise_failure()
            task = asyncio.create_task(one(request), name=f"request {request.request_id}")
            in_flight.add(task)
            task.add_done_callback(finished)
        while in_flight:
            await asyncio.wait(set(in_flight), return_when=asyncio.FIRST_EXCEPTION)
            raise_failure()
        raise_failure()
    finally:
        for task in in_flight:
            task.cancel()
        if in_flight:
            await asyncio.gather(*in_flight, return_exceptions=True)
    return delivered
