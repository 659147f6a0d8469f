"""The shared SSE reader: framing across arbitrary chunk boundaries, comments, [DONE], arrival stamps."""

from __future__ import annotations

import asyncio

from replay.clients.sse_reader import SseBounds, byte_size, iter_sse

STREAM = (
    b": keep-alive\n\n"
    b'data: {"text": "a", "meta_info": {"completion_tokens": 1}}\n\n'
    b"event: message\r\n"
    b'data: {"text": "ab"}\r\n\r\n'
    b"data: line one\n"
    b"data: line two\n\n"
    b"data: [DONE]\n\n"
    b"data: after done\n\n"
)
EXPECTED = [
    b'{"text": "a", "meta_info": {"completion_tokens": 1}}',
    b'{"text": "ab"}',
    b"line one\nline two",
]


async def _chunks(parts: list[bytes]):
    for part in parts:
        yield part


def _read(parts: list[bytes], bounds: SseBounds | None = None):
    ticks = iter(range(100_000))

    async def main():
        stream = iter_sse(_chunks(parts), lambda: float(next(ticks)), bounds)
        events = [event async for event in stream]
        return events, stream

    return asyncio.run(main())


def test_whole_body_in_one_read():
    events, stream = _read([STREAM])
    assert [e.data for e in events] == EXPECTED
    assert stream.saw_done
    assert [e.arrival_s for e in events] == [0.0, 0.0, 0.0]  # all arrived in the same read
    assert stream.end_s == 0.0


def test_every_split_point_gives_the_same_events():
    for cut in range(1, len(STREAM)):
        events, stream = _read([STREAM[:cut], STREAM[cut:]])
        assert [e.data for e in events] == EXPECTED, cut
        assert stream.saw_done


def test_byte_at_a_time_stamps_each_event_with_the_read_that_completed_it():
    parts = [STREAM[i : i + 1] for i in range(len(STREAM))]
    events, stream = _read(parts)
    assert [e.data for e in events] == EXPECTED
    # The blank line that ends event k is byte index end_k; reads are numbered from 0.
    ends = [STREAM.index(b"\n\n", STREAM.index(d)) + 1 for d in (b'{"text": "a"', b'{"text": "ab"}', b"line two")]
    ends[1] = STREAM.index(b"\r\n\r\n") + 3
    assert [e.arrival_s for e in events] == [float(i) for i in ends]


def test_body_ending_without_done_or_blank_line_still_delivers_the_last_event():
    events, stream = _read([b"data: one\n\n", b"data: two"])
    assert [e.data for e in events] == [b"one", b"two"]
    assert not stream.saw_done
    assert stream.end_s == 2.0  # clock read at the end of the body


def test_empty_body():
    events, stream = _read([])
    assert events == [] and not stream.saw_done


# Bounds: what a hostile endpoint sends is cut where it passes one, and `cut` says which (the defaults are
# exercised against a real server in test_replay_hostile_endpoint.py).
SMALL = SseBounds(max_line_bytes=100, max_event_bytes=250, max_events=3)


def _split(body: bytes, size: int) -> list[bytes]:
    return [body[i : i + size] for i in range(0, len(body), size)]


def test_a_line_with_no_newline_is_cut_at_the_line_bound_whatever_the_reads():
    for size in (1, 7, 64, 1000):
        events, stream = _read(_split(b"data: ok\n\n" + b"x" * 10_000, size), SMALL)
        assert [e.data for e in events] == [b"ok"], size
        assert stream.cut == "an event-stream line passed 100 bytes without a newline" and not stream.saw_done
        assert stream.end_s is not None


def test_a_line_at_the_bound_is_read_and_one_past_it_is_cut():
    at = b"data: " + b"a" * 94  # 100 bytes
    events, stream = _read([at + b"\n\n"], SMALL)
    assert [e.data for e in events] == [b"a" * 94] and stream.cut is None
    events, stream = _read([at + b"a\n\n"], SMALL)
    assert events == [] and stream.cut is not None


def test_data_lines_with_no_blank_line_are_cut_at_the_event_bound():
    for size in (1, 50, 4096):
        events, stream = _read(_split(b"data: 0123456789\n" * 1000, size), SMALL)
        assert events == [], size
        assert stream.cut == "an event's data: lines passed 250 bytes without a blank line"


def test_an_unterminated_last_event_past_the_event_bound_is_cut_too():
    # 15 lines of 16 bytes (240) are within 250; with the unended 96-byte line the event is 255 bytes of data.
    events, stream = _read([b"data: 0123456789\n" * 15 + b"data: " + b"t" * 90], SMALL)
    assert events == [] and stream.cut == "an event's data: lines passed 250 bytes without a blank line"


def test_comments_do_not_count_towards_an_event():
    events, stream = _read([b": ping\n" * 1000 + b"data: ok\n\ndata: [DONE]\n\n"], SMALL)
    assert [e.data for e in events] == [b"ok"] and stream.saw_done and stream.cut is None


def test_more_events_than_the_bound_are_cut():
    events, stream = _read([b"data: e\n\n" * 10], SMALL)
    assert len(events) == 3 and stream.cut == "the event stream passed 3 events"


def test_the_default_bounds_are_named_in_binary_units():
    assert (byte_size(SseBounds().max_line_bytes), byte_size(SseBounds().max_event_bytes)) == ("4 MiB", "8 MiB")
    assert byte_size(64 * 1024) == "64 KiB" and byte_size(100) == "100 bytes"
