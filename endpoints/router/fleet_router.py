"""The router on the virtual clock: an aiohttp app in front of N worker base URLs that routes each request
with the policy model, as smg would, and proxies it unchanged (a stream stays a stream, chunk by chunk).

It runs on whatever clock it is given (the VirtualClock loop the virtual twins share, or a monotonic one in
real time) and talks real HTTP to its workers. Like smg it tells the client which worker served the request
in the `x-smg-routed-worker-id` response header (smg 1.13.0 sends the worker's URL there), counts requests
per worker (`routed_counts`, and `/metrics` as `costbench_router_requests_total{worker}` and smg's
`smg_worker_requests_total{worker}`, with `smg_worker_requests_active`), polls every
worker's SGLang /metrics gauges every --load-monitor-interval seconds of its clock (the first poll before
any request; each bounded by WORKER_METRICS_MAX_BYTES and WORKER_METRICS_LIMIT_S, past which that worker keeps
its last load), and counts a request in flight from dispatch until its answer's last byte.

    router = FleetRouter(worker_urls, parse_router_spec(spec), clock)
    runner = web.AppRunner(router.app()); ...

On a virtual clock its routed POSTs can also be answered in-process (RouterExchange, common/exchange.py): the
same pick and in-flight count, the worker's own in-process answer passed through with the same header.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Mapping

import orjson
from aiohttp import ClientError, ClientSession, ClientTimeout, TCPConnector, web

from common.bounded_body import read_at_most
from common.exchange import Exchange, ExchangeAnswer
from endpoints.clock import Clock
from endpoints.router.policy_params import RouterModelParams
from endpoints.router.routing_policy import RoutingPolicy, build_policy
from endpoints.router.routing_text import routing_text
from endpoints.router.worker_loads import EngineLoad, fleet_view

ROUTED_WORKER_HEADER = "x-smg-routed-worker-id"  # smg 1.13.0's header, the worker's URL as its value
ROUTED_PATHS = ("/generate", "/v1/chat/completions", "/v1/completions")
_HOP_BY_HOP = {"content-length", "transfer-encoding", "connection", "keep-alive", "date", "server"}
WORKER_METRICS_MAX_BYTES = 4 * 1024 * 1024  # of a worker's /metrics, as the probes read it
WORKER_METRICS_LIMIT_S = 5.0  # one worker's /metrics, connecting to the last byte (the router's clock)
_GAUGE = re.compile(r"^sglang:(num_running_reqs|num_queue_reqs|token_usage|gen_throughput)(?:\{[^}]*\})? (\S+)$")


def engine_load_from_metrics(text: str) -> EngineLoad | None:
    """The load smg reads from one worker's SGLang /metrics, or None when the gauges are missing."""
    seen: dict[str, float] = {}
    for line in text.splitlines():
        match = _GAUGE.match(line)
        if match:
            seen[match.group(1)] = seen.get(match.group(1), 0.0) + float(match.group(2))
    if "num_queue_reqs" not in seen:
        return None
    return EngineLoad(
        running_reqs=int(seen.get("num_running_reqs", 0)),
        waiting_reqs=int(seen["num_queue_reqs"]),
        token_usage=seen.get("token_usage", 0.0),
        gen_throughput_tok_s=seen.get("gen_throughput", 0.0),
    )


def parsed_body(body: bytes) -> dict:
    """The request's JSON object, or {} (the routing text of a body that is none)."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def forwarded_headers(request: web.Request) -> dict[str, str]:
    return {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}


class FleetRouter:
    def __init__(self, worker_urls: tuple[str, ...], params: RouterModelParams, clock: Clock) -> None:
        if not worker_urls:
            raise ValueError("a fleet router needs at least one worker URL")
        self.worker_urls = tuple(u.rstrip("/") for u in worker_urls)
        self.params = params
        self._clock = clock
        self._policy: RoutingPolicy = build_policy(params)
        self._in_flight = [0] * len(self.worker_urls)
        self._routed = [0] * len(self.worker_urls)
        self._loads: dict[int, EngineLoad] = {}
        self._session: ClientSession | None = None
        self._poller: asyncio.Task[None] | None = None

    def routed_counts(self) -> dict[str, int]:
        return dict(zip(self.worker_urls, self._routed, strict=True))

    def app(self) -> web.Application:
        app = web.Application(client_max_size=1 << 30)
        for path in ROUTED_PATHS:
            app.router.add_post(path, self._route)
        app.router.add_get("/health", self._health)
        # The GET routes smg 1.13.0 answers from a worker (tried: /server_info and /model_info are 404 there,
        # the get_ aliases 200); the replay reads /get_server_info through it before t0.
        for path in ("/v1/models", "/get_server_info", "/get_model_info"):
            app.router.add_get(path, self._first_worker)
        app.router.add_get("/health_generate", self._health)
        app.router.add_get("/metrics", self._metrics)
        app.on_startup.append(self._start)
        app.on_cleanup.append(self._stop)
        return app

    async def _start(self, _app: web.Application | None) -> None:
        # No cap on connections to the workers, as smg's HTTP client has none. aiohttp's default (100) queued the
        # 101st request in flight inside the model, and its pool hands a freed connection to a waiting host chosen
        # by an unseeded random draw: an overloaded replay came out different on every run.
        connector = TCPConnector(limit=0)
        self._session = ClientSession(connector=connector, timeout=ClientTimeout(total=None, sock_connect=30))
        await self._poll_once()
        self._poller = asyncio.get_running_loop().create_task(self._poll_forever(), name="router-load-poll")

    async def _stop(self, _app: web.Application | None) -> None:
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
        if self._session is not None:
            await self._session.close()

    async def _poll_forever(self) -> None:
        next_s = self._clock.now_s()
        while True:
            next_s += self.params.load_monitor_interval_s
            await self._clock.sleep_until(next_s)
            await self._poll_once()

    async def _poll_once(self) -> None:
        assert self._session is not None
        polled: dict[int, EngineLoad] = {}
        for i, url in enumerate(self.worker_urls):
            try:
                async with self._session.get(
                    f"{url}/metrics", timeout=ClientTimeout(total=WORKER_METRICS_LIMIT_S)
                ) as resp:
                    body, more = await read_at_most(resp, WORKER_METRICS_MAX_BYTES)
                ok = resp.status == 200 and not more
                load = engine_load_from_metrics(body.decode("utf-8", "replace")) if ok else None
            except (OSError, asyncio.TimeoutError, ClientError):
                load = None  # a worker that does not answer keeps its last load, as smg's monitor does
            if load is not None:
                polled[i] = load
        self._loads.update(polled)
        self._policy.update_loads(polled)

    async def _health(self, _request: web.Request) -> web.Response:
        return web.Response(text="OK")

    async def _first_worker(self, request: web.Request) -> web.StreamResponse:
        return await self._proxy(request, 0, await request.read())

    async def _metrics(self, _request: web.Request) -> web.Response:
        # smg's own family names for what the model counts, so the probes keep them as they keep smg's
        # (role router); costbench_router_requests_total also names the policy.
        lines = ["# TYPE costbench_router_requests_total counter"]
        for url, n in self.routed_counts().items():
            lines.append(f'costbench_router_requests_total{{worker="{url}",policy="{self.params.policy}"}} {n}')
        lines.append("# TYPE smg_worker_requests_total counter")
        lines.extend(f'smg_worker_requests_total{{worker="{url}"}} {n}' for url, n in self.routed_counts().items())
        lines.append("# TYPE smg_worker_requests_active gauge")
        lines.extend(
            f'smg_worker_requests_active{{worker="{url}"}} {n}' for url, n in zip(self.worker_urls, self._in_flight)
        )
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    async def _route(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        worker = self.pick(request.path, parsed_body(body))
        try:
            return await self._proxy(request, worker, body)
        finally:
            self.done(worker)

    def pick(self, path: str, parsed: dict) -> int:
        """The policy's worker for a request, counted as routed and in flight until `done`."""
        fleet = fleet_view(self.worker_urls, tuple(self._in_flight), self._loads, self.params.overload)
        worker = self._policy.select(routing_text(path, parsed), fleet, self._clock.now_s())
        self._routed[worker] += 1
        self._in_flight[worker] += 1
        return worker

    def done(self, worker: int) -> None:
        self._in_flight[worker] -= 1

    async def _proxy(self, request: web.Request, worker: int, body: bytes) -> web.StreamResponse:
        assert self._session is not None
        url = self.worker_urls[worker]
        headers = forwarded_headers(request)
        try:
            target = f"{url}{request.path_qs}"
            upstream = await self._session.request(request.method, target, data=body, headers=headers)
        except (OSError, asyncio.TimeoutError) as err:
            return web.json_response({"error": {"message": f"worker {url} unreachable: {err}"}}, status=502)
        async with upstream:
            out = web.StreamResponse(status=upstream.status)
            for key, value in upstream.headers.items():
                if key.lower() not in _HOP_BY_HOP:
                    out.headers[key] = value
            out.headers[ROUTED_WORKER_HEADER] = url
            await out.prepare(request)
            async for chunk in upstream.content.iter_any():
                await out.write(chunk)
            await out.write_eof()
            return out


class RouterExchange:
    """The router's routed POSTs at `base_url`, in-process: `router` picks the worker and counts it in flight until
    the answer's body ends (its last byte written, or the reader gone), and that worker's exchange answers."""

    def __init__(self, router: FleetRouter, base_url: str, workers: tuple[Exchange, ...]) -> None:
        if len(workers) != len(router.worker_urls):
            raise ValueError("a router exchange needs one worker exchange per worker URL")
        self._router = router
        self._base_url = base_url.rstrip("/")
        self._workers = workers

    async def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> ExchangeAnswer | None:
        path = url[len(self._base_url) :] if url.startswith(self._base_url) else None
        if path not in ROUTED_PATHS:
            return None
        router = self._router
        worker = router.pick(path, parsed_body(body))
        worker_url = router.worker_urls[worker]
        try:
            upstream = await self._workers[worker].post(worker_url + path, body, headers)
        except BaseException:
            router.done(worker)
            raise
        if upstream is None:
            router.done(worker)
            raise RuntimeError(f"worker {worker_url} does not answer {path} in-process")
        upstream.body.on_end(lambda: router.done(worker))
        out = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP_BY_HOP}
        out[ROUTED_WORKER_HEADER] = worker_url
        return ExchangeAnswer(upstream.status, out, upstream.body)
