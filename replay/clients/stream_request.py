"""The one streaming loop every client shares: POST a body (over HTTP, or in-process to a twin on the replay's own
virtual clock), read SSE, fold events, classify failure.

A client supplies the body and a `StreamFold` that understands its API's events; this module owns
what is common: the per-request deadline, the send time, non-2xx answers, the SSE reader, dropped
connections and bad payloads, each turned into data (`StreamOutcome.error`) rather than an exception.
Only cancellation propagates.

What is read is bounded (docs/endpoints.md, "Bounds on what an endpoint sends"): the whole request by its
deadline, an event stream by the SSE reader's bounds, and an error answer's body by ERROR_BODY_MAX_BYTES,
of which the rest is never read (leaving the response then closes its connection).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

import aiohttp

from common.bounded_body import gather_at_most, read_at_most
from common.exchange import Exchange, ExchangeAnswer
from replay.clients.sse_reader import SseParser, byte_size
from replay.clock import Clock
from replay.recording.error_kinds import ErrorKind
from replay.recording.records import RequestStatus

Failure = tuple[RequestStatus, ErrorKind, str]
# SGLang's router (smg 1.13.0) names the worker it sent a request to in this response header (its URL).
ROUTED_WORKER_HEADER = "x-smg-routed-worker-id"
ERROR_BODY_MAX_BYTES = 64 * 1024  # of a non-200 answer's body, for its message (itself clipped to 2,000 characters)


class StreamFold(Protocol):
    def on_event(self, data: bytes, at_s: float) -> str | None:
        """Decode and fold one SSE payload (at_s: seconds after t0). Returns an error message when the
        event reports an error; raises ValueError/TypeError when the payload is not the promised JSON."""
        ...

    def end_error(self, saw_done: bool) -> Failure | None:
        """After the body ended cleanly: what, if anything, was wrong with how the stream ended."""
        ...


@dataclass(frozen=True, slots=True)
class StreamOutcome:
    sent_s: float | None  # seconds after t0 when the request was handed to the connection
    finish_s: float | None  # arrival of the last byte ([DONE] or end of body); None on timeout
    http_status: int | None
    error: Failure | None
    worker: str | None = None  # the worker a router says served it (ROUTED_WORKER_HEADER)


async def stream_request(
    session: aiohttp.ClientSession,
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    clock: Clock,
    t0_s: float,
    timeout_s: float,
    fold: StreamFold,
    exchange: Exchange | None = None,
) -> StreamOutcome:
    """POST `body` to `url` and fold its answer; over `session`, or in-process through `exchange` when it serves
    `url` (a twin on the replay's own virtual clock, common/exchange.py)."""
    sent_s: float | None = None
    finish_s: float | None = None
    http_status: int | None = None
    error: Failure | None = None
    worker: str | None = None
    completed = False  # [DONE] seen: a failure after it (while draining) does not undo the request
    try:
        async with asyncio.timeout(timeout_s):
            sent_s = clock.now_s() - t0_s
            async with _answered(session, exchange, url, body, headers) as response:
                http_status = response.status
                worker = response.headers.get(ROUTED_WORKER_HEADER)
                if response.status != 200:
                    text = await response.error_text()
                    finish_s = clock.now_s() - t0_s
                    error = (RequestStatus.ERROR, ErrorKind.HTTP_STATUS, f"HTTP {response.status}{text}")
                else:
                    stream, error, end_s = await _read_events(response.read, clock.now_s, t0_s, fold)
                    finish_s = (end_s if end_s is not None else clock.now_s()) - t0_s
                    if error is None and stream.cut is not None:
                        error = (RequestStatus.ERROR, ErrorKind.RESPONSE_TOO_LARGE, stream.cut)
                    if error is None:
                        error = fold.end_error(stream.saw_done)
                    if stream.saw_done and error is None:
                        # The response is complete at [DONE]; read the (empty) rest of the body so the
                        # connection goes back to the pool instead of being closed, a reconnect per
                        # request otherwise (see bench/replay_overhead.py).
                        completed = True
                        await _drain(response)
    except TimeoutError:
        if not completed:
            error = (RequestStatus.TIMEOUT, ErrorKind.TIMEOUT, f"no complete response within {timeout_s:g} s")
    except (aiohttp.ClientError, OSError) as exc:
        if not completed:
            error = (RequestStatus.ERROR, ErrorKind.CONNECTION, f"{type(exc).__name__}: {exc}")
    return StreamOutcome(sent_s, finish_s, http_status, error, worker)


class _Answer(Protocol):
    """An answer as the loop above reads it, whichever way it came."""

    @property
    def status(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    async def read(self) -> bytes:
        """What arrived since the last read, waiting for some; b"" at the end of the body."""
        ...

    def at_eof(self) -> bool: ...

    async def error_text(self) -> str:
        """read_error_body's text of a non-200 answer's body."""
        ...


class _HttpAnswer:
    __slots__ = ("_response", "status", "headers", "read", "at_eof")

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.status = response.status
        self.headers = response.headers
        self.read = response.content.readany
        self.at_eof = response.content.at_eof

    async def error_text(self) -> str:
        return await read_error_body(self._response)


class _InProcessAnswer:
    __slots__ = ("_body", "status", "headers", "read", "at_eof")

    def __init__(self, answer: ExchangeAnswer) -> None:
        self._body = answer.body
        self.status = answer.status
        self.headers = answer.headers
        self.read = answer.body.read
        self.at_eof = answer.body.at_eof

    async def error_text(self) -> str:
        body = self._body
        data, more = await gather_at_most(lambda _most: body.read(), ERROR_BODY_MAX_BYTES)
        return _error_text(data, more, "utf-8")


@contextlib.asynccontextmanager
async def _answered(
    session: aiohttp.ClientSession, exchange: Exchange | None, url: str, body: bytes, headers: Mapping[str, str]
) -> AsyncIterator[_Answer]:
    answer = await exchange.post(url, body, headers) if exchange is not None else None
    if answer is None:
        async with session.post(url, data=body, headers=headers) as response:
            yield _HttpAnswer(response)
        return
    try:
        yield _InProcessAnswer(answer)
    finally:
        answer.body.close()  # read to the end or not: the twin's next write finds the reader gone


async def _read_events(
    read: Callable[[], Awaitable[bytes]], now_s: Callable[[], float], t0_s: float, fold: StreamFold
) -> tuple[SseParser, Failure | None, float | None]:
    """Feed every read of the body to the SSE reader and each event it completes to `fold`, until [DONE], a bound,
    the end of the body or an event that fails: (the reader, that failure, when the stream ended: None when an
    event failed before it ended).

    One await a read and no async generator between the socket and the fold: a twin's replay makes ~30 reads a
    request. Events are stamped with their read's arrival, as `iter_sse` stamps them.
    """
    parser = SseParser()
    arrival_s = 0.0
    while chunk := await read():
        arrival_s = now_s()
        at_s = arrival_s - t0_s
        for data in parser.feed(chunk, arrival_s):
            failure = _fold_event(fold, data, at_s)
            if failure is not None:
                return parser, failure, None
        if parser.stopped:
            return parser, None, parser.end_s
    tail = parser.finish(now_s(), arrival_s)
    for data in tail:
        failure = _fold_event(fold, data, arrival_s - t0_s)
        if failure is not None:
            return parser, failure, parser.end_s
    return parser, None, parser.end_s


def _fold_event(fold: StreamFold, data: bytes, at_s: float) -> Failure | None:
    try:
        message = fold.on_event(data, at_s)
    except (ValueError, TypeError, AttributeError) as exc:  # orjson errors are ValueErrors
        return RequestStatus.ERROR, ErrorKind.BAD_PAYLOAD, f"{exc}: {data[:200]!r}"
    if message is not None:
        return RequestStatus.ERROR, ErrorKind.STREAM_ERROR, message
    return None


async def read_error_body(response: aiohttp.ClientResponse, max_bytes: int = ERROR_BODY_MAX_BYTES) -> str:
    """`: <body>` of a non-200 answer, at most `max_bytes` of it, said when cut: ` (body cut at 64 KiB): <body>`."""
    body, more = await read_at_most(response, max_bytes)
    return _error_text(body, more, response.charset or "utf-8", max_bytes)


def _error_text(body: bytes, more: bool, charset: str, max_bytes: int = ERROR_BODY_MAX_BYTES) -> str:
    try:
        text = body.decode(charset, errors="replace")
    except LookupError:  # a charset Python does not know
        text = body.decode("utf-8", errors="replace")
    return f" (body cut at {byte_size(max_bytes)}): {text}" if more else f": {text}"


DRAIN_LIMIT_S = 1.0  # a server that keeps a finished response open this long loses the connection instead


async def _drain(response: _Answer) -> None:
    if response.at_eof():
        return
    try:
        async with asyncio.timeout(DRAIN_LIMIT_S):
            while await response.read():
                pass
    except TimeoutError:
        pass  # leaving the `async with` closes the connection; the request itself is complete


def int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def float_or_none(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)
