"""The one loop that turns a submitted request into an HTTP answer, for every route.

A view (native or OpenAI) decides what the bytes look like; this loop decides when they go out:
streamed chunk by chunk (several pending updates leave in one write, so a slow reader catches up
instead of falling further behind) or as one body at the end, with `data: [DONE]` after the
last chunk. The request's faults (see faults.py) fire here, after its first token.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
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


async def answer(
    http: web.Request,
    engine: SimEngine,
    request: SimRequest,
    view: View,
    stream: bool,
    faults: RequestFaults,
    json_response,
) -> web.StreamResponse:
    response: web.StreamResponse | None = None
    if stream:
        response = web.StreamResponse(headers=SSE_HEADERS)
        await response.prepare(http)
    updates = engine.updates(request)
    fired = not faults.any
    final: TokenUpdate | None = None
    chunk = view.chunk
    try:
        while final is None:
            update = await anext(updates)
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
            if response is not None:
                data = chunk(update) if pending is None else b"".join(map(chunk, pending))
                if final is None:
                    await response.write(data)
                else:  # the last chunk, [DONE] and the end of the chunked body leave in one write
                    await response.write_eof(data + DONE)
            if not fired and update.output_tokens > 0 and final is None:
                fired = True
                if faults.error:
                    engine.abort(request, {"type": "abort", "message": FAULT_ERROR_MESSAGE, "status_code": 500})
                    if response is None:
                        return view.error_response(FAULT_ERROR_MESSAGE, 500)
                    await response.write(view.error_event(FAULT_ERROR_MESSAGE, 500) + DONE)
                    await response.write_eof()
                    return response
                if faults.disconnect:
                    raise Disconnect
                if faults.stall_s > 0:
                    await asyncio.sleep(faults.stall_s)
        if response is None:
            return json_response(view.full_body(final))
        return response
    except Disconnect:
        engine.abort(request)
        if http.transport is not None:
            http.transport.abort()  # no final chunk, no [DONE], no clean end of the chunked body
        raise asyncio.CancelledError from None  # aiohttp drops a cancelled handler quietly
    except ConnectionResetError:
        assert response is not None  # only a streamed write finds the client gone
        return response  # the client went away; closing `updates` aborts the request and frees its KV
    finally:
        await updates.aclose()
