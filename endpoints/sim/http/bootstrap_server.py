"""Where a disaggregated request's two halves meet: the prefill server's bootstrap port, and the decode's client for it.

SGLang's router adds bootstrap_host, bootstrap_port and bootstrap_room to the body it sends both servers. A real
prefill server's bootstrap port is where the decode ranks register and the transfer engines exchange addresses;
the twin's serves its own two routes there instead (a decode twin is the only client), under /sim/:
`POST /sim/rooms/{room}/ready` (the decode took KV slots for the room) and `GET /sim/rooms/{room}/kv` (answers
once the room's KV has arrived at the decode server, with the prefill's cached tokens, the KV's bytes, the
transfer's seconds and the prefill's own parts of the TTFT, its waiting queue and its prefill, in seconds; 409 if the
prefill failed the room).
"""

from __future__ import annotations

import aiohttp
from aiohttp import web

from endpoints.sim.bad_request import BadRequest
from endpoints.sim.engine.disaggregation import Bootstrap, BootstrapRooms, RoomDone, TransferFailed

# How long a decode waits for its prefill's KV; SGLang's decode gives up on a bootstrap after 300 s
# (SGLANG_DISAGGREGATION_WAITING_TIMEOUT's default).
KV_WAIT_TIMEOUT_S = 300.0
ROOMS_KEY = web.AppKey("rooms", BootstrapRooms)


def parse_bootstrap(body: dict) -> Bootstrap | None:
    """The router's three fields, or None when the body has none (a unified server's request)."""
    host, port, room = body.get("bootstrap_host"), body.get("bootstrap_port"), body.get("bootstrap_room")
    if host is None and room is None:
        return None
    if not isinstance(host, str) or not host:
        raise BadRequest(f"bootstrap_host must be a host name with bootstrap_room, got {host!r}")
    if type(port) is not int or not 0 < port <= 65535:
        raise BadRequest(f"bootstrap_port must be a port number with bootstrap_room, got {port!r}")
    if type(room) is not int or room < 0:
        raise BadRequest(f"bootstrap_room must be a non-negative integer, got {room!r}")
    return Bootstrap(host, port, room)


def _room(request: web.Request) -> int:
    try:
        return int(request.match_info["room"])
    except ValueError:
        raise web.HTTPBadRequest(text="the room must be an integer") from None


async def _ready(request: web.Request) -> web.Response:
    request.app[ROOMS_KEY].mark_ready(_room(request))
    return web.json_response({"ok": True})


async def _kv(request: web.Request) -> web.Response:
    try:
        done = await request.app[ROOMS_KEY].wait_done(_room(request))
    except TransferFailed as exc:
        return web.json_response({"error": str(exc)}, status=409)
    return web.json_response(
        {"cached_tokens": done.cached_tokens, "kv_bytes": done.kv_bytes, "transfer_s": done.transfer_s,
         "prefill_queue_s": done.prefill_queue_s, "prefill_forward_s": done.prefill_forward_s}
    )  # fmt: skip


async def _health(_request: web.Request) -> web.Response:
    return web.Response(text="OK")


def bootstrap_app(rooms: BootstrapRooms) -> web.Application:
    app = web.Application()
    app[ROOMS_KEY] = rooms
    app.router.add_post("/sim/rooms/{room}/ready", _ready)
    app.router.add_get("/sim/rooms/{room}/kv", _kv)
    app.router.add_get("/health", _health)
    return app


class HttpPrefillPeer:
    """A decode twin's way to its prefill twins, over their bootstrap ports."""

    def __init__(self, session: aiohttp.ClientSession) -> None:
        self._session = session

    @staticmethod
    def _url(bootstrap: Bootstrap, what: str) -> str:
        return f"http://{bootstrap.host}:{bootstrap.port}/sim/rooms/{bootstrap.room}/{what}"

    async def ready(self, bootstrap: Bootstrap) -> None:
        async with self._session.post(self._url(bootstrap, "ready")) as response:
            if response.status != 200:
                raise TransferFailed(f"the prefill's bootstrap port answered {response.status}")

    async def done(self, bootstrap: Bootstrap) -> RoomDone:
        timeout = aiohttp.ClientTimeout(total=KV_WAIT_TIMEOUT_S)
        async with self._session.get(self._url(bootstrap, "kv"), timeout=timeout) as response:
            body = await response.json()
            if response.status != 200:
                raise TransferFailed(body.get("error", f"the prefill's bootstrap port answered {response.status}"))
        return RoomDone(int(body["cached_tokens"]), int(body["kv_bytes"]), float(body["transfer_s"]),
                        float(body["prefill_queue_s"]), float(body["prefill_forward_s"]))  # fmt: skip
