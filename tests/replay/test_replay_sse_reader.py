"""The shared SSE reader: framing across arbitrary chunk boundaries, comments, [DONE], arrival stamps."""

from __future__ import annotations

import asyncio

from replay.clients.sse_reader import iter_sse

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


def _read(parts: list[bytes]):
    ticks = iter(range(1000))

    async def main():
        stream = iter_sse(_chunks(parts), lambda: float(next(ticks)))
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
