"""The one Server-Sent-Events reader every streaming client shares (STYLE.md 5).

It turns the raw byte chunks of a response body into the `data:` payload of each event, stamped with
the arrival time of the network read that completed the event. Stamping per read, not per event, is
both cheaper (one clock call per read) and truer: events that arrived in the same read arrived at the
same moment.

Framing follows the SSE spec as servers use it: lines end in LF or CRLF; `:` lines are comments
(keep-alive pings); a blank line ends an event; several `data:` lines in one event join with LF;
other fields (`event:`, `id:`, `retry:`) are ignored. `data: [DONE]` ends the stream. An event cut off
by the end of the body is still delivered, because the caller decides whether a stream ended cleanly.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable
from dataclasses import dataclass

DONE_PAYLOAD = b"[DONE]"


@dataclass(frozen=True, slots=True)
class SseEvent:
    arrival_s: float  # clock time of the read that completed this event
    data: bytes  # the joined `data:` payload, without the `data:` prefix


class SseStream:
    """Iterate `SseEvent`s; afterwards `saw_done` says whether the stream ended with `[DONE]`, `end_s` when."""

    __slots__ = ("_chunks", "_now_s", "saw_done", "end_s")

    def __init__(self, chunks: AsyncIterable[bytes], now_s: Callable[[], float]) -> None:
        self._chunks = chunks
        self._now_s = now_s
        self.saw_done = False
        self.end_s: float | None = None  # arrival of the read holding [DONE], or of the end of the body

    def __aiter__(self) -> AsyncIterator[SseEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[SseEvent]:
        pending = bytearray()  # bytes of a line not yet terminated
        data_lines: list[bytes] = []
        arrival_s = 0.0
        async for chunk in self._chunks:
            arrival_s = self._now_s()
            if b"\n" not in chunk:
                pending += chunk  # a long event split over reads: append, no re-scan
                continue
            if pending:
                pending += chunk
                lines = bytes(pending).split(b"\n")
            else:
                lines = chunk.split(b"\n")
            pending = bytearray(lines.pop())
            for line in lines:
                if line.endswith(b"\r"):
                    line = line[:-1]
                if not line:
                    if data_lines:
                        data = data_lines[0] if len(data_lines) == 1 else b"\n".join(data_lines)
                        data_lines = []
                        if data == DONE_PAYLOAD:
                            self.saw_done = True
                            self.end_s = arrival_s
                            return
                        yield SseEvent(arrival_s, data)
                    continue
                if line.startswith(b"data:"):
                    value = line[5:]
                    data_lines.append(value[1:] if value.startswith(b" ") else value)
                # ':' comments and other fields fall through: nothing to do.
        # End of body: deliver what an unterminated final event carried.
        self.end_s = self._now_s()
        tail = bytes(pending).rstrip(b"\r")
        if tail.startswith(b"data:"):
            value = tail[5:]
            data_lines.append(value[1:] if value.startswith(b" ") else value)
        if data_lines:
            data = b"\n".join(data_lines)
            if data == DONE_PAYLOAD:
                self.saw_done = True
                self.end_s = arrival_s
                return
            yield SseEvent(arrival_s, data)


def iter_sse(chunks: AsyncIterable[bytes], now_s: Callable[[], float]) -> SseStream:
    """`async for event in iter_sse(response.content.iter_any(), clock.now_s)`."""
    return SseStream(chunks, now_s)
