"""The twin's HTTP layer: SGLang's routes and JSON shapes over the simulated engine (aiohttp).

Routes: /health, /health_generate (503 during the simulated warm-up), /server_info, /model_info,
/v1/models, /metrics (with --enable-metrics), /flush_cache, and native /generate with streaming.
"""

from __future__ import annotations

import asyncio
from contextlib import aclosing

import orjson
from aiohttp import web

from endpoints.sim.clock import Clock, MonotonicClock
from endpoints.sim.engine import RequestRejected, SimEngine
from endpoints.sim.engine_builder import build_engine
from endpoints.sim.generate_request import BadRequest, parse_generate
from endpoints.sim.server_args import SimServerArgs
from endpoints.sim.sim_metrics import CONTENT_TYPE, SimMetrics
from endpoints.sim.sim_request import GenerateInput, SimRequest, TokenUpdate
from endpoints.sim.toy_tokenizer import OutputText

SIM_VERSION = "0.5.6-costbench-sim"  # the SGLang API generation it speaks; "-sim" marks the twin
HEALTH_CHECK_TIMEOUT_S = 20.0  # SGLANG_HEALTH_CHECK_TIMEOUT default
_UNAUTHENTICATED_PATHS = ("/health", "/health_generate", "/metrics")



def _json(data: object, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")


def _error(message: str, status: int = 400) -> web.Response:
    return _json({"error": {"message": message}}, status)


class SimTwin:
    """Engine plus the per-app state the handlers need (no globals: two apps in one process are independent)."""

    def __init__(self, args: SimServerArgs, clock: Clock) -> None:
        self.args = args
        self.clock = clock
        self.engine: SimEngine = build_engine(args, clock)
        self.metrics = SimMetrics(self.engine, args.served_model_name) if args.enable_metrics else None
        self.started_s: float | None = None

    def ready(self) -> bool:
        return self.started_s is not None and self.clock.now_s() >= self.started_s + self.args.warmup_s

    # -- facts ------------------------------------------------------------------------------------

    def server_info(self) -> dict:
        engine, scheduler = self.engine, self.engine.scheduler
        info = self.args.as_server_info()
        info["context_length"] = engine.context_length_tokens
        info.update(
            backend="sim",
            version=SIM_VERSION,
            max_total_num_tokens=scheduler.pool.capacity_tokens,
            scheduler_info={
                "max_total_num_tokens": scheduler.pool.capacity_tokens,
                "max_req_input_len": engine.context_length_tokens - 1,
            },
            internal_states=[{"last_gen_throughput": engine.gen_throughput_tok_s(), "avg_spec_accept_length": None}],
            sim_model_profile=engine.model.name,
        )
        return info

    def model_info(self) -> dict:
        model = self.engine.model
        return {
            "model_path": self.args.model_path,
            "tokenizer_path": self.args.tokenizer_path,
            "is_generation": True,
            "preferred_sampling_params": None,
            "weight_version": "default",
            "has_image_understanding": False,
            "has_audio_understanding": False,
            "model_type": model.model_type,
            "architectures": [model.architecture],
        }

    # -- generation -------------------------------------------------------------------------------

    def meta_info(self, update: TokenUpdate) -> dict:
        meta = {
            "id": update.rid,
            "finish_reason": update.finish_reason,
            "prompt_tokens": update.prompt_tokens,
            "completion_tokens": update.output_tokens,
            "cached_tokens": update.cached_tokens,
            "reasoning_tokens": 0,
            "weight_version": "default",
        }
        if update.finished:
            meta["e2e_latency"] = update.now_s - update.arrival_s
        return meta

    def body(self, request: SimRequest, text: OutputText, update: TokenUpdate) -> dict:
        n = update.output_tokens
        return {"text": text.upto(n), "output_ids": request.output_ids[:n], "meta_info": self.meta_info(update)}


TWIN_KEY = web.AppKey("twin", SimTwin)


@web.middleware
async def _api_key_middleware(request: web.Request, handler):
    key = request.app[TWIN_KEY].args.api_key
    if key and request.path not in _UNAUTHENTICATED_PATHS:
        if request.headers.get("Authorization") != f"Bearer {key}":
            return _json({"error": "Unauthorized"}, 401)
    return await handler(request)


async def _health(request: web.Request) -> web.Response:
    twin: SimTwin = request.app[TWIN_KEY]
    if not twin.ready():
        return web.Response(status=503, text="warming up")
    if twin.engine.scheduler.has_work():
        return web.Response(text="")  # busy and stepping: SGLang answers without generating
    probe = GenerateInput(rid=f"HEALTH_CHECK_{id(request)}", input_ids=(0,), max_new_tokens=1)
    try:
        await asyncio.wait_for(twin.engine.generate(probe), HEALTH_CHECK_TIMEOUT_S)
    except TimeoutError:
        return web.Response(status=503, text="health check timed out")
    return web.Response(text="")


async def _server_info(request: web.Request) -> web.Response:
    return _json(request.app[TWIN_KEY].server_info())


async def _model_info(request: web.Request) -> web.Response:
    return _json(request.app[TWIN_KEY].model_info())


async def _models(request: web.Request) -> web.Response:
    twin: SimTwin = request.app[TWIN_KEY]
    card = {
        "id": twin.args.served_model_name,
        "object": "model",
        "created": 0,
        "owned_by": "sglang",
        "root": twin.args.model_path,
        "max_model_len": twin.engine.context_length_tokens,
    }
    return _json({"object": "list", "data": [card]})


async def _metrics(request: web.Request) -> web.Response:
    twin: SimTwin = request.app[TWIN_KEY]
    return web.Response(body=twin.metrics.render(), headers={"Content-Type": CONTENT_TYPE})


async def _flush_cache(request: web.Request) -> web.Response:
    if request.app[TWIN_KEY].engine.scheduler.flush_cache():
        return web.Response(text="Cache flushed.\n")
    return web.Response(status=400, text="Cache not flushed: requests are running or waiting.\n")


async def _generate(request: web.Request) -> web.StreamResponse:
    twin: SimTwin = request.app[TWIN_KEY]
    engine = twin.engine
    try:
        body = orjson.loads(await request.read())
    except orjson.JSONDecodeError as exc:
        return _error(f"the request body is not valid JSON: {exc}")
    try:
        spec = parse_generate(body, engine.model.vocab_size)
        sim_request = engine.submit(spec)
    except (BadRequest, RequestRejected) as exc:
        return _error(str(exc))
    text = OutputText(sim_request.output_ids, engine.model.eos_token_id)

    if not spec.stream:
        async with aclosing(engine.updates(sim_request)) as updates:
            async for update in updates:
                pass
        if twin.metrics is not None:
            twin.metrics.observe_finished(update)
        return _json(twin.body(sim_request, text, update))

    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    try:
        async with aclosing(engine.updates(sim_request)) as updates:  # closing aborts the request
            async for update in updates:
                await response.write(b"data: " + orjson.dumps(twin.body(sim_request, text, update)) + b"\n\n")
        if twin.metrics is not None:
            twin.metrics.observe_finished(update)
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
    except ConnectionResetError:
        pass  # the client went away; its request was aborted and its KV freed
    return response


async def _on_startup(app: web.Application) -> None:
    twin: SimTwin = app[TWIN_KEY]
    twin.started_s = twin.clock.now_s()
    twin.engine.start()


async def _on_cleanup(app: web.Application) -> None:
    await app[TWIN_KEY].engine.stop()


def create_app(args: SimServerArgs, clock: Clock | None = None) -> web.Application:
    """The twin as an aiohttp app; raises UnknownProfileError or KvSizingError for impossible setups."""
    app = web.Application(middlewares=[_api_key_middleware], client_max_size=64 * 1024**2)
    app[TWIN_KEY] = SimTwin(args, clock or MonotonicClock())
    app.router.add_get("/health", _health)
    app.router.add_get("/health_generate", _health)
    for path in ("/server_info", "/get_server_info"):
        app.router.add_get(path, _server_info)
    for path in ("/model_info", "/get_model_info"):
        app.router.add_get(path, _model_info)
    app.router.add_get("/v1/models", _models)
    if args.enable_metrics:
        app.router.add_get("/metrics", _metrics)
    app.router.add_route("GET", "/flush_cache", _flush_cache)
    app.router.add_route("POST", "/flush_cache", _flush_cache)
    app.router.add_route("POST", "/generate", _generate)
    app.router.add_route("PUT", "/generate", _generate)
    app.on_startup.append(_on_startup)
    app.on_cleanup.append(_on_cleanup)
    return app
