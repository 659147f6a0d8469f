"""The twin over real HTTP on loopback, its engine on a virtual clock (sockets are polled, waits jump)."""

from __future__ import annotations

from aiohttp.test_utils import TestClient, TestServer

from endpoints.clock import VirtualClock
from endpoints.sim.http.server import create_app
from endpoints.sim.server_args import parse_server_args


def serve(flags: list[str], scenario):
    """Runs `await scenario(client)` against a twin started with SGLang `flags`; returns its result."""
    clock = VirtualClock(allow_real_io=True)

    async def main():
        app = create_app(parse_server_args(flags), clock)
        async with TestServer(app, host="127.0.0.1", port=0) as server, TestClient(server) as client:
            return await scenario(client)

    return clock.run(main())
