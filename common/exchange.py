"""An HTTP request answered inside the process that sends it, without a socket: how a replay on a virtual clock
reaches the twin it serves on the same event loop (docs/twin.md, "A twin on a virtual clock").

The server side's own code writes the answer's bytes (status, headers, the SSE chunks a socket would carry), in
the order and at the virtual instants it would write them; the client's own code reads and parses them. What is
left out is what a loopback socket adds on a virtual clock: HTTP framing, two aiohttp stacks and the syscalls, none
of which moves a timing (virtual time does not pass between a write and its read).

    answer = await exchange.post(url, body, headers)  # None: not served in-process; send it over HTTP
    while piece := await answer.body.read(): ...
    answer.body.close()  # the reader is done (or gone): a later write raises ConnectionResetError
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol


class StreamBody:
    """One answer's body between the task that writes it and the one that reads it, on one event loop."""

    __slots__ = ("_pieces", "_waiter", "_ended", "_error", "_reader_gone", "_on_end", "_finished_once")

    def __init__(self) -> None:
        self._pieces: deque[bytes] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._ended = False
        self._error: BaseException | None = None
        self._reader_gone = False
        self._on_end: list[Callable[[], None]] = []
        self._finished_once = False

    # -- the writer's side ------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        """Queue `data` for the reader; raises ConnectionResetError once the reader has gone (as a socket's
        write does once its peer closed)."""
        if self._reader_gone:
            raise ConnectionResetError("the reader of this answer has gone")
        if self._ended:
            raise RuntimeError("write after the end of the answer")
        if data:
            self._pieces.append(data)
            waiter = self._waiter  # _wake, inline: once per streamed chunk
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    def end(self, data: bytes = b"") -> None:
        """The last bytes and the end of the body."""
        self.write(data)
        self._ended = True
        self._wake()
        self._finished()

    def drop(self) -> None:
        """The connection goes without an end: the reader's next read past what was written raises."""
        if self._ended:
            return
        self._error = ConnectionResetError("the server dropped the connection before the end of its answer")
        self._ended = True
        self._wake()
        self._finished()

    # -- the reader's side ------------------------------------------------------------------------

    async def read(self) -> bytes:
        """Every byte written since the last read, waiting for some; b"" at the end."""
        while not self._pieces:
            if self._ended:
                if self._error is not None:
                    raise self._error
                return b""
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        if len(self._pieces) == 1:
            return self._pieces.popleft()
        data = b"".join(self._pieces)
        self._pieces.clear()
        return data

    def at_eof(self) -> bool:
        return self._ended and not self._pieces

    def close(self) -> None:
        """The reader is done with it, at the end or before (a timeout, a bound): what is unread is dropped."""
        self._reader_gone = True
        self._pieces.clear()
        self._finished()

    def on_end(self, callback: Callable[[], None]) -> None:
        """Call `callback` once, at the first of: the writer ends or drops it, the reader closes it (now, if one
        of those has happened)."""
        if self._finished_once:
            callback()
        else:
            self._on_end.append(callback)

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _finished(self) -> None:
        self._finished_once = True
        callbacks, self._on_end = self._on_end, []
        for callback in callbacks:
            callback()


def full_body(data: bytes) -> StreamBody:
    """A body written in full at once (a JSON answer, an error)."""
    body = StreamBody()
    body.end(data)
    return body


@dataclass(frozen=True, slots=True)
class ExchangeAnswer:
    status: int
    headers: Mapping[str, str]
    body: StreamBody


class Exchange(Protocol):
    async def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> ExchangeAnswer | None:
        """The answer to a POST of `body` to `url`, as soon as its status and headers would arrive; None when `url`
        is not served here (the caller sends it over HTTP)."""
        ...
