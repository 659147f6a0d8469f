"""The one Server-Sent-Events reader every streaming client shares (STYLE.md 5).

It turns the raw byte chunks of a response body into the `data:` payload of each event, stamped with
the arrival time of the network read that completed the event. Stamping per read, not per event, is
both cheaper (one clock call per read) and truer: events that arrived in the same read arrived at the
same moment.

Framing follows the SSE spec as servers use it: lines end in LF or CRLF; `:` lines are comments
(keep-alive pings); a blank line ends an event; several `data:` lines in one event join with LF;
other fields (`event:`, `id:`, `retry:`) are ignored. `data: [DONE]` ends the stream. An event cut off
by the end of the body is still delivered, because the caller decides whether a stream ended cleanly.

What the reader holds is bounded (`SseBounds`, docs/endpoints.md "Bounds on what an endpoint sends"): a
line longer than `max_line_bytes` (a stream with no newline), an event whose `data:` lines add up past
`max_event_bytes` (`data:` lines with no blank line) or more than `max_events` events end the reading
there, with `cut` saying which bound was passed; the caller records the request as failed. Time is the
caller's bound (the request's deadline).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable
from dataclasses import dataclass

DONE_PAYLOAD = b"[DONE]"
# SGLang's cumulative events repeat all text and output ids so far: about 12 bytes a token, so 1.6 MB
# for 128k tokens. Past these a response is not SGLang's.
MAX_LINE_BYTES = 4 * 1024 * 1024
MAX_EVENT_BYTES = 8 * 1024 * 1024
MAX_EVENTS = 1_000_000  # at most one event a token (--stream-interval 1), and no model writes 1M tokens


@dataclass(frozen=True, slots=True)
class SseBounds:
    max_line_bytes: int = MAX_LINE_BYTES
    max_event_bytes: int = MAX_EVENT_BYTES
    max_events: int = MAX_EVENTS


@dataclass(frozen=True, slots=True)
class SseEvent:
    arrival_s: float  # clock time of the read that completed this event
    data: bytes  # the joined `data:` payload, without the `data:` prefix


def byte_size(n: int) -> str:
    """4 MiB, 64 KiB or 100 bytes: a bound as a reader of an error message wants it."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} bytes"


class SseStream:
    """Iterate `SseEvent`s; afterwards `saw_done` says whether the stream ended with `[DONE]`, `end_s` when,
    and `cut` why the reading stopped early (a bound passed), None when it did not."""

    __slots__ = ("_chunks", "_now_s", "_bounds", "saw_done", "end_s", "cut")

    def __init__(
        self, chunks: AsyncIterable[bytes], now_s: Callable[[], float], bounds: SseBounds | None = None
    ) -> None:
        self._chunks = chunks
        self._now_s = now_s
        self._bounds = bounds or SseBounds()
        self.saw_done = False
        self.end_s: float | None = None  # arrival of the read holding [DONE], or of the end of the body
        self.cut: str | None = None

    def __aiter__(self) -> AsyncIterator[SseEvent]:
        return self._events()

    def _cut_line(self, arrival_s: float) -> None:
        self.end_s = arrival_s
        self.cut = f"an event-stream line passed {byte_size(self._bounds.max_line_bytes)} without a newline"

    def _cut_event(self, arrival_s: float) -> None:
        self.end_s = arrival_s
        self.cut = f"an event's data: lines passed {byte_size(self._bounds.max_event_bytes)} without a blank line"

    async def _events(self) -> AsyncIterator[SseEvent]:
        bounds = self._bounds
        max_line, max_event, max_events = bounds.max_line_bytes, bounds.max_event_bytes, bounds.max_events
        pending = bytearray()  # bytes of a line not yet terminated
        data_lines: list[bytes] = []
        event_bytes = 0  # of the open event's data: lines so far
        events = 0
        arrival_s = 0.0
        async for chunk in self._chunks:
            arrival_s = self._now_s()
            if b"\n" not in chunk:
                pending += chunk  # a long event split over reads: append, no re-scan
                if len(pending) > max_line:
                    self._cut_line(arrival_s)
                    return
                continue
            if pending:
                pending += chunk
                buffer = bytes(pending)
            else:
                buffer = chunk
            lines = buffer.split(b"\n")
            pending = bytearray(lines.pop())
            # Only a read past the bound can hold a line past it: one test a read, not one a line.
            if len(buffer) > max_line and lines and max(map(len, lines)) > max_line:
                self._cut_line(arrival_s)
                return
            for line in lines:
                if line.endswith(b"\r"):
                    line = line[:-1]
                if not line:
                    if data_lines:
                        data = data_lines[0] if len(data_lines) == 1 else b"\n".join(data_lines)
                        data_lines = []
                        event_bytes = 0
                        if data == DONE_PAYLOAD:
                            self.saw_done = True
                            self.end_s = arrival_s
                            return
                        events += 1
                        if events > max_events:
                            self.end_s, self.cut = arrival_s, f"the event stream passed {max_events} events"
                            return
                        yield SseEvent(arrival_s, data)
                    continue
                if line.startswith(b"data:"):
                    event_bytes += len(line)  # the event's data: lines as sent, prefixes and all
                    if event_bytes > max_event:
                        self._cut_event(arrival_s)
                        return
                    value = line[5:]
                    data_lines.append(value[1:] if value.startswith(b" ") else value)
                # ':' comments and other fields fall through: nothing to do.
            if len(pending) > max_line:
                self._cut_line(arrival_s)
                return
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
            if len(data) > max_event:
                self._cut_event(arrival_s)
                return
            yield SseEvent(arrival_s, data)


def iter_sse(chunks: AsyncIterable[bytes], now_s: Callable[[], float], bounds: SseBounds | None = None) -> SseStream:
    """`async for event in iter_sse(response.content.iter_any(), clock.now_s)`."""
    return SseStream(chunks, now_s, bounds)
