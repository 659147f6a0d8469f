"""Reading an HTTP body without trusting its size: the one helper the replay's client and the endpoint probes share
(an endpoint may send a body of any length, slowly or not at all; docs/endpoints.md, "Bounds on what an endpoint
sends")."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import aiohttp


async def read_at_most(response: aiohttp.ClientResponse, max_bytes: int) -> tuple[bytes, bool]:
    """Up to `max_bytes` of the body, and whether there was more (left unread: never held in memory)."""
    return await gather_at_most(response.content.read, max_bytes)


async def gather_at_most(read: Callable[[int], Awaitable[bytes]], max_bytes: int) -> tuple[bytes, bool]:
    """read_at_most over any body: `read(n)` returns some bytes (n at most, where the body can say), b"" at its end."""
    body = bytearray()
    while len(body) <= max_bytes:
        chunk = await read(max_bytes + 1 - len(body))
        if not chunk:
            return bytes(body), False
        body += chunk
    return bytes(body[:max_bytes]), True
