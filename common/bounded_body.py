"""Reading an HTTP body without trusting its size: the one helper the replay's client and the endpoint probes share
(an endpoint may send a body of any length, slowly or not at all; docs/endpoints.md, "Bounds on what an endpoint
sends")."""

from __future__ import annotations

import aiohttp


async def read_at_most(response: aiohttp.ClientResponse, max_bytes: int) -> tuple[bytes, bool]:
    """Up to `max_bytes` of the body, and whether there was more (left unread: never held in memory)."""
    body = bytearray()
    while len(body) <= max_bytes:
        chunk = await response.content.read(max_bytes + 1 - len(body))
        if not chunk:
            return bytes(body), False
        body += chunk
    return bytes(body[:max_bytes]), True
