"""The router in PD mode on the virtual clock: smg's `--pd-disaggregation` as costbench models it, in front of
prefill and decode twins.

As smg 1.13.0's PD router does (model_gateway/src/routers/http/pd_router.rs, read in the PyPI sdist), each request
gets a prefill worker from the prefill policy and a decode worker from the decode policy (one policy model per
role, each a FleetRouter over its own workers: its polled loads, in-flight counts and counters). The body gains
`bootstrap_host` (the prefill worker's host), `bootstrap_port` (its bootstrap port) and `bootstrap_room` (a
63-bit number, seeded here so a replay repeats), and goes to both workers at once; the prefill's answer is read
to its end and dropped, and the decode's is the client's, streamed as it comes, with the decode worker named in
x-smg-routed-worker-id (what smg 1.13.0 sends in PD mode, tried on /generate and chat, streamed or not).

    router = PdFleetRouter(prefill_urls, bootstrap_ports, decode_urls, params, clock)
    runner = web.AppRunner(router.app()); ...
"""

from __future__ import annotations

import asyncio
import random
from urllib.parse import urlsplit

import orjson
from aiohttp import web

from endpoints.clock import Clock
from endpoints.router.fleet_router import ROUTED_PATHS, FleetRouter, forwarded_headers, parsed_body
from endpoints.router.policy_params import RouterModelParams

ROOM_SEED = 0  # the model's rooms are drawn from a seeded generator: the same replay, the same rooms


class PdFleetRouter:
    def __init__(
        self,
        prefill_urls: tuple[str, ...],
        bootstrap_ports: tuple[int, ...],
        decode_urls: tuple[str, ...],
        params: RouterModelParams,
        clock: Clock,
    ) -> None:
        if len(bootstrap_ports) != len(prefill_urls):
            raise ValueError("every prefill worker needs its bootstrap port")
        self.prefill = FleetRouter(prefill_urls, params, clock)
        self.decode = FleetRouter(decode_urls, params, clock)
        self.bootstrap_ports = bootstrap_ports
        self._rooms = random.Random(ROOM_SEED)

    @property
    def worker_urls(self) -> tuple[str, ...]:
        return (*self.prefill.worker_urls, *self.decode.worker_urls)

    def routed_counts(self) -> dict[str, int]:
        return {**self.prefill.routed_counts(), **self.decode.routed_counts()}

    def app(self) -> web.Application:
        app = web.Application(client_max_size=1 << 30)
        for path in ROUTED_PATHS:
            app.router.add_post(path, self._route)
        app.router.add_get("/health", self.prefill._health)
        app.router.add_get("/health_generate", self.prefill._health)
        for path in ("/v1/models", "/get_server_info", "/get_model_info"):
            app.router.add_get(path, self.decode._first_worker)
        app.router.add_get("/metrics", self._metrics)
        app.on_startup.append(self._start)
        app.on_cleanup.append(self._stop)
        return app

    async def _start(self, _app: web.Application) -> None:
        await self.prefill._start(None)
        await self.decode._start(None)

    async def _stop(self, _app: web.Application) -> None:
        await self.decode._stop(None)
        await self.prefill._stop(None)

    async def _metrics(self, request: web.Request) -> web.Response:
        prefill, decode = await self.prefill._metrics(request), await self.decode._metrics(request)
        assert prefill.text is not None and decode.text is not None
        # Both roles' series in one exposition, each family once (its TYPE line first, then both roles' samples).
        families: dict[str, list[str]] = {}
        for text in (prefill.text, decode.text):
            name = ""
            for line in text.splitlines():
                if line.startswith("# TYPE "):
                    name = line.split()[2]
                    families.setdefault(name, [line])
                else:
                    families[name].append(line)
        body = "\n".join(line for lines in families.values() for line in lines)
        return web.Response(text=body + "\n", content_type="text/plain")

    async def _route(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        parsed = parsed_body(body)
        p = self.prefill.pick(request.path, parsed)
        d = self.decode.pick(request.path, parsed)
        try:
            prefill_url = self.prefill.worker_urls[p]
            routed = {
                **parsed,
                "bootstrap_host": urlsplit(prefill_url).hostname,
                "bootstrap_port": self.bootstrap_ports[p],
                "bootstrap_room": self._rooms.getrandbits(63),
            }
            data = orjson.dumps(routed)
            prefilled = asyncio.get_running_loop().create_task(self._drain(request, prefill_url, data))
            try:
                return await self.decode._proxy(request, d, data)
            finally:
                await prefilled
        finally:
            self.prefill.done(p)
            self.decode.done(d)

    async def _drain(self, request: web.Request, url: str, data: bytes) -> None:
        session = self.prefill._session
        assert session is not None
        try:
            async with session.request(request.method, f"{url}{request.path_qs}", data=data,
                                       headers=forwarded_headers(request)) as upstream:  # fmt: skip
                async for _ in upstream.content.iter_any():
                    pass
        except (OSError, asyncio.TimeoutError):
            pass  # the decode's answer says what the client gets: it fails too without its KV
