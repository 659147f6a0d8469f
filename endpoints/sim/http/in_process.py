"""The twin's generation routes answered in-process (common/exchange.py), for a replay on the same virtual clock.

The same code as over HTTP decides everything in the answer: SimTwin.gate (API key, warm-up, outage),
SimTwin.accept_* (parsing, the engine's submit, the view) and response_stream.answer (when each chunk goes out,
the faults that act on bytes). What is skipped is aiohttp on both ends and the loopback socket. Every other route
(/server_info, /metrics, /health, /flush_cache) stays on HTTP, and so does every request to a twin whose injected
faults act on the connection itself (--fault-disconnect-rate drops it, --fault-crash-after closes the server):
`twin_exchange` returns None for those.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from aiohttp import web

from common.exchange import ExchangeAnswer, StreamBody, full_body
from endpoints.sim.http.native_view import json_response
from endpoints.sim.http.openai_view import Route
from endpoints.sim.http.response_stream import DONE, SSE_HEADERS, Accepted, StreamAbort, answer
from endpoints.sim.http.server import TWIN_KEY, SimTwin

_Accept = Callable[[SimTwin, bytes], "Accepted | StreamAbort | web.Response"]
_ROUTES: dict[str, _Accept] = {
    "/generate": SimTwin.accept_generate,
    "/v1/chat/completions": lambda twin, raw: twin.accept_openai(raw, Route.CHAT),
    "/v1/completions": lambda twin, raw: twin.accept_openai(raw, Route.COMPLETION),
}


def whole_answer(response: web.Response) -> ExchangeAnswer:
    """An aiohttp answer built in full (JSON, an error, a 503) as the exchange hands it over."""
    body = response.body
    if body is not None and not isinstance(body, bytes):
        raise TypeError(f"an in-process answer must be bytes, not {type(body).__name__}")
    return ExchangeAnswer(response.status, response.headers, full_body(body or b""))


class _BodySink:
    """A streamed answer into a StreamBody; `opened` gets the answer when its headers would have gone out."""

    def __init__(self, body: StreamBody, opened: asyncio.Future[ExchangeAnswer]) -> None:
        self._body = body
        self._opened = opened

    async def open(self) -> None:
        self._opened.set_result(ExchangeAnswer(200, SSE_HEADERS, self._body))

    async def write(self, data: bytes) -> None:
        self._body.write(data)

    async def end(self, data: bytes) -> None:
        self._body.end(data)


class TwinExchange:
    """One twin app's generation routes at `base_url`, in-process."""

    def __init__(self, app: web.Application, base_url: str) -> None:
        self._twin = app[TWIN_KEY]
        self._base_url = base_url.rstrip("/")
        self._streams: set[asyncio.Task[None]] = set()  # answers being written (a task is held only weakly)

    async def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> ExchangeAnswer | None:
        path = url[len(self._base_url) :] if url.startswith(self._base_url) else ""
        accept = _ROUTES.get(path)
        if accept is None:
            return None
        twin = self._twin
        refused = twin.gate(path, headers)
        if refused is not None:
            return whole_answer(refused)
        accepted = accept(twin, body)
        if isinstance(accepted, web.Response):
            return whole_answer(accepted)
        if isinstance(accepted, StreamAbort):
            return ExchangeAnswer(200, SSE_HEADERS, full_body(accepted.event + DONE))
        if not accepted.stream:
            whole = await answer(None, twin.engine, accepted.request, accepted.view, accepted.faults, json_response)
            assert whole is not None  # not streamed: answer returns it whole
            return whole_answer(whole)
        loop = asyncio.get_running_loop()
        opened: asyncio.Future[ExchangeAnswer] = loop.create_future()
        stream = StreamBody()
        task = loop.create_task(self._stream(_BodySink(stream, opened), stream, opened, accepted))
        self._streams.add(task)
        task.add_done_callback(self._streams.discard)
        return await opened

    async def _stream(
        self, sink: _BodySink, stream: StreamBody, opened: asyncio.Future[ExchangeAnswer], accepted: Accepted
    ) -> None:
        try:
            await answer(sink, self._twin.engine, accepted.request, accepted.view, accepted.faults, json_response)
        finally:
            stream.drop()  # a no-op after a clean end; otherwise the reader learns the answer broke off
            if not opened.done():  # cancelled before its headers (the loop closing)
                opened.set_exception(ConnectionResetError("the twin stopped before answering"))


def twin_exchange(app: web.Application, base_url: str) -> TwinExchange | None:
    """The in-process exchange for the twin `app` serves at `base_url`, or None when its faults need a socket."""
    faults = app[TWIN_KEY].args.faults
    if faults.disconnect_rate > 0 or faults.crash_after_requests is not None:
        return None
    return TwinExchange(app, base_url)
