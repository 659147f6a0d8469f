"""An in-process answer's body (common/exchange.py) behaves as the socket it stands in for: bytes in the order
written, the end seen once, a dropped connection raised to the reader, a gone reader raised to the writer."""

from __future__ import annotations

import asyncio

import pytest

from common.exchange import StreamBody, full_body


def test_reads_what_was_written_in_order_then_the_end() -> None:
    async def main() -> list[bytes]:
        body, got = StreamBody(), []

        async def reader() -> None:
            while piece := await body.read():
                got.append(piece)

        task = asyncio.create_task(reader())
        await asyncio.sleep(0)  # the reader waits on an empty body
        body.write(b"a")
        body.write(b"b")  # two writes before the reader runs: one read, as a socket would coalesce them
        await asyncio.sleep(0)
        body.end(b"c")
        await task
        return got

    assert asyncio.run(main()) == [b"ab", b"c"]


def test_a_dropped_connection_raises_after_what_was_written() -> None:
    async def main() -> tuple[bytes, bool]:
        body = StreamBody()
        body.write(b"data: 1\n\n")
        body.drop()
        first = await body.read()
        with pytest.raises(ConnectionResetError):
            await body.read()
        return first, body.at_eof()

    assert asyncio.run(main()) == (b"data: 1\n\n", True)


def test_a_gone_reader_makes_the_next_write_fail() -> None:
    body = StreamBody()
    body.write(b"x")
    body.close()
    with pytest.raises(ConnectionResetError):
        body.write(b"y")
    with pytest.raises(ConnectionResetError):
        body.end(b"z")


def test_on_end_runs_once_at_the_first_end() -> None:
    calls: list[str] = []
    body = StreamBody()
    body.on_end(lambda: calls.append("end"))
    body.end(b"last")
    body.close()  # the reader closes after the end: not a second end
    body.drop()
    assert calls == ["end"]
    full = full_body(b"{}")
    full.on_end(lambda: calls.append("already"))  # registered after the end: runs at once
    assert calls == ["end", "already"]
