"""A real aiohttp server on 127.0.0.1 in a background thread, for tests of blocking endpoint code
(provision, probes, cache preparation) against peers that are not the twin."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from aiohttp import web


@contextmanager
def serve_in_thread(app: web.Application) -> Iterator[str]:
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    box: dict = {}

    async def start() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        box["runner"] = runner
        box["url"] = "http://127.0.0.1:%d" % runner.addresses[0][1]

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        ready.set()
        loop.run_forever()
        loop.run_until_complete(box["runner"].cleanup())
        loop.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    ready.wait(10)
    try:
        yield box["url"]
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
