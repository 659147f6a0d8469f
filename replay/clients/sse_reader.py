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


class SseParser:
    """The reader's framing without the I/O: `feed` each read's bytes, get the `data:` payloads it completed.

    Once `stopped`, nothing more is read: `saw_done`, `end_s` and `cut` say why (as on SseStream). The
    streaming clients call it straight from their read loop (stream_request.py), one call a read, instead of
    stacking an async generator per layer over every event.
    """

    __slots__ = (
        "_max_line", "_max_event", "_max_events", "_pending", "_data_lines", "_event_bytes", "_events",
        "stopped", "saw_done", "end_s", "cut",
    )  # fmt: skip

    def __init__(self, bounds: SseBounds | None = None) -> None:
        bounds = bounds or SseBounds()
        self._max_line, self._max_event, self._max_events = (
            bounds.max_line_bytes, bounds.max_event_bytes, bounds.max_events
        )  # fmt: skip
        self._pending = bytearray()  # bytes of a line not yet terminated
        self._data_lines: list[bytes] = []
        self._event_bytes = 0  # of the open event's data: lines so far
        self._events = 0
        self.stopped = False
        self.saw_done = False
        self.end_s: float | None = None  # arrival of the read holding [DONE], or of the end of the body
        self.cut: str | None = None

    def _stop(self, arrival_s: float, cut: str | None = None) -> None:
        self.stopped = True
        self.end_s = arrival_s
        self.cut = cut

    def _cut_line(self, arrival_s: float) -> None:
        self._stop(arrival_s, f"an event-stream line passed {byte_size(self._max_line)} without a newline")

    def _cut_event(self, arrival_s: float) -> None:
        self._stop(arrival_s, f"an event's data: lines passed {byte_size(self._max_event)} without a blank line")

    def feed(self, chunk: bytes, arrival_s: float) -> list[bytes]:
        """The payloads of the events this read completed, in order (arrival_s: when the read arrived)."""
        pending = self._pending
        if b"\n" not in chunk:
            pending += chunk  # a long event split over reads: append, no re-scan
            if len(pending) > self._max_line:
                self._cut_line(arrival_s)
            return []
        end = len(chunk) - 2
        if (
            not pending
            and not self._data_lines
            and chunk.startswith(b"data:")
            and chunk.endswith(b"\n\n")
            and chunk.find(b"\n", 0, end) < 0
            and chunk[end - 1] != 13  # b"\r"
            and end <= self._max_line
        ):
            # The usual read: exactly one single-line event. The same steps as below, without the split.
            if end > self._max_event:
                self._cut_event(arrival_s)
                return []
            data = chunk[6:end] if chunk[5] == 32 else chunk[5:end]  # b" "
            if data == DONE_PAYLOAD:
                self.saw_done = True
                self._stop(arrival_s)
                return []
            self._events += 1
            if self._events > self._max_events:
                self._stop(arrival_s, f"the event stream passed {self._max_events} events")
                return []
            return [data]
        if pending:
            pending += chunk
            buffer = bytes(pending)
        else:
            buffer = chunk
        lines = buffer.split(b"\n")
        self._pending = bytearray(lines.pop())
        # Only a read past the bound can hold a line past it: one test a read, not one a line.
        if len(buffer) > self._max_line and lines and max(map(len, lines)) > self._max_line:
            self._cut_line(arrival_s)
            return []
        out: list[bytes] = []
        data_lines = self._data_lines
        for line in lines:
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line:
                if data_lines:
                    data = data_lines[0] if len(data_lines) == 1 else b"\n".join(data_lines)
                    data_lines = self._data_lines = []
                    self._event_bytes = 0
                    if data == DONE_PAYLOAD:
                        self.saw_done = True
                        self._stop(arrival_s)
                        return out
                    self._events += 1
                    if self._events > self._max_events:
                        self._stop(arrival_s, f"the event stream passed {self._max_events} events")
                        return out
                    out.append(data)
                continue
            if line.startswith(b"data:"):
                self._event_bytes += len(line)  # the event's data: lines as sent, prefixes and all
                if self._event_bytes > self._max_event:
                    self._cut_event(arrival_s)
                    return out
                value = line[5:]
                data_lines.append(value[1:] if value.startswith(b" ") else value)
            # ':' comments and other fields fall through: nothing to do.
        if len(self._pending) > self._max_line:
            self._cut_line(arrival_s)
        return out

    def finish(self, end_s: float, last_arrival_s: float) -> list[bytes]:
        """At the end of the body (end_s: now; last_arrival_s: the last read's arrival): what an unterminated
        final event carried."""
        self.stopped = True
        self.end_s = end_s
        tail = bytes(self._pending).rstrip(b"\r")
        data_lines = self._data_lines
        if tail.startswith(b"data:"):
            value = tail[5:]
            data_lines.append(value[1:] if value.startswith(b" ") else value)
        if not data_lines:
            return []
        data = b"\n".join(data_lines)
        if data == DONE_PAYLOAD:
            self.saw_done = True
            self.end_s = last_arrival_s
            return []
        if len(data) > self._max_event:
            self._cut_event(last_arrival_s)
            return []
        return [data]


class SseStream:
    """Iterate `SseEvent`s; afterwards `saw_done` says whether the stream ended with `[DONE]`, `end_s` when,
    and `cut` why the reading stopped early (a bound passed), None when it did not."""

    __slots__ = ("_chunks", "_now_s", "_bounds", "saw_done", "end_s", "cut")

    def __init__(
        self, chunks: AsyncIterable[bytes], now_s: Callable[[], float], bounds: SseBounds | None = None
    ) -> None:
        self._chunks = chunks
        self._now_s = now_s
        self._bounds = bounds
        self.saw_done = False
        self.end_s: float | None = None  # arrival of the read holding [DONE], or of the end of the body
        self.cut: str | None = None

    def __aiter__(self) -> AsyncIterator[SseEvent]:
        return self._events()

    def _ended(self, parser: SseParser) -> None:
        # Told only once every event before the end was taken, as a lazy reader would tell it.
        self.saw_done, self.end_s, self.cut = parser.saw_done, parser.end_s, parser.cut

    async def _events(self) -> AsyncIterator[SseEvent]:
        parser = SseParser(self._bounds)
        arrival_s = 0.0
        async for chunk in self._chunks:
            arrival_s = self._now_s()
            for data in parser.feed(chunk, arrival_s):
                yield SseEvent(arrival_s, data)
            if parser.stopped:
                self._ended(parser)
                return
        tail = parser.finish(self._now_s(), arrival_s)
        self._ended(parser)
        for data in tail:
            yield SseEvent(arrival_s, data)


def iter_sse(chunks: AsyncIterable[bytes], now_s: Callable[[], float], bounds: SseBounds | None = None) -> SseStream:
    """`async for event in iter_sse(response.content.iter_any(), clock.now_s)`."""
    return SseStream(chunks, now_s, bounds)
