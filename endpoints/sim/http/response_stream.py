"""The one loop that turns a submitted request into its answer, for every route, over HTTP or in-process.

A view (native or OpenAI) decides what the bytes look like; this loop decides when they go out:
streamed chunk by chunk (several pending updates leave in one write, so a slow reader catches up
instead of falling further behind) or as one body at the end, with `data: [DONE]` after the
last chunk. The request's faults (see faults.py) fire here, after its first token.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import Protocol

from aiohttp import web

from endpoints.sim.engine.disaggregation import Bootstrap
from endpoints.sim.engine.engine import SimEngine
from endpoints.sim.engine.faults import RequestFaults
from endpoints.sim.engine.sim_request import SimRequest, TokenUpdate

DONE = b"data: [DONE]\n\n"
FAULT_ERROR_MESSAGE = "Internal server error (injected by --fault-error-rate)."
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


class View(Protocol):
    def chunk(self, update: TokenUpdate) -> bytes: ...

    def full_body(self, update: TokenUpdate) -> dict: ...

    @staticmethod
    def error_event(message: str, status: int) -> bytes: ...

    @staticmethod
    def error_response(message: str, status: int) -> web.Response: ...


class Disconnect(Exception):
    """The injected fault: drop the connection without an answer."""


def engine_spec(spec, faults: RequestFaults, bootstrap: Bootstrap | None = None):
    """What the engine runs: the request, with where its PD halves meet; a faulted request streams inside the
    engine so its first token is seen, whatever the client asked."""
    return replace(spec, stream=spec.stream or faults.any, bootstrap=bootstrap)


@dataclass(frozen=True, slots=True)
class Accepted:
    """A generation request the engine took, and how its answer is shaped (SimTwin.accept_generate)."""

    request: SimRequest
    view: View
    stream: bool
    faults: RequestFaults


@dataclass(frozen=True, slots=True)
class StreamAbort:
    """A streamed request SGLang's scheduler aborted before its first token: 200, this event, [DONE]."""

    event: bytes


class AnswerSink(Protocol):
    """Where a streamed answer's bytes go: an HTTP response (server.py) or an in-process body (in_process.py)."""

    async def open(self) -> None:
        """Status and headers out (200, SSE_HEADERS)."""
        ...

    async def write(self, data: bytes) -> None:
        """Raises ConnectionResetError when the client has gone."""
        ...

    async def end(self, data: bytes) -> None:
        """The last bytes and the clean end of the body."""
        ...


async def answer(
    sink: AnswerSink | None,
    engine: SimEngine,
    request: SimRequest,
    view: View,
    faults: RequestFaults,
    json_response,
) -> web.Response | None:
    """Runs `request` to its end, streamed into `sink` (None: not streamed); returns the whole answer when it was
    not streamed (or a fault's error answer), None when it went into the sink. Raises Disconnect (the request
    aborted) when the injected fault drops the connection, which the caller then drops."""
    if sink is not None:
        await sink.open()
    # The request's channel, read directly (engine.updates' loop, without an async generator per chunk); the
    # finally below aborts it when the answer stops early, as closing engine.updates would.
    get = request.updates.get
    fired = not faults.any
    final: TokenUpdate | None = None
    chunk = view.chunk
    try:
        while final is None:
            update = await get()
            more = request.updates.drain()
            pending = None
            if more:  # a slow reader's backlog: every pending update, up to the final one, in one write
                pending = [update, *more]
                if any(u.finished for u in pending):
                    final = next(u for u in pending if u.finished)
                    pending = pending[: pending.index(final) + 1]
                update = pending[-1]
            elif update.finished:
                final = update
            if sink is not None:
                data = chunk(update) if pending is None else b"".join(map(chunk, pending))
                if final is None:
                    await sink.write(data)
                else:  # the last chunk, [DONE] and the end of the chunked body leave in one write
                    await sink.end(data + DONE)
            if not fired and update.output_tokens > 0 and final is None:
                fired = True
                if faults.error:
                    engine.abort(request, {"type": "abort", "message": FAULT_ERROR_MESSAGE, "status_code": 500})
                    if sink is None:
                        return view.error_response(FAULT_ERROR_MESSAGE, 500)
                    await sink.end(view.error_event(FAULT_ERROR_MESSAGE, 500) + DONE)
                    return None
                if faults.disconnect:
                    raise Disconnect
                if faults.stall_s > 0:
                    await asyncio.sleep(faults.stall_s)
        if sink is None:
            return json_response(view.full_body(final))
        return None
    except Disconnect:
        engine.abort(request)
        raise  # the caller drops the connection: no final chunk, no [DONE], no clean end of the body
    except ConnectionResetError:
        assert sink is not None  # only a streamed write finds the client gone
        return None  # the client went away; closing `updates` aborts the request and frees its KV
    finally:
        engine.abort(request)
