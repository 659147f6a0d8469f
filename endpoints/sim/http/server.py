"""The twin's HTTP layer: SGLang's routes and JSON shapes over the simulated engine (aiohttp).

Routes: /health, /health_generate (503 during the simulated warm-up), /server_info, /model_info,
/v1/models, /metrics (with --enable-metrics), /flush_cache, native /generate, and the OpenAI
/v1/chat/completions and /v1/completions, streaming or not. Twin-only: its GPUs' counters as dcgm-exporter
shows them, at /sim/dcgm/metrics (dcgm_view). What the answers look like is in
native_view and openai_view; when they go out (and the injected faults) in response_stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import NoReturn

import aiohttp
import orjson
from aiohttp import web

from endpoints.clock import Clock, MonotonicClock
from endpoints.sim.bad_request import BadRequest
from endpoints.sim.cost.profiles import cost_constants_for, hardware_profile_for
from endpoints.sim.engine.disaggregation import DisaggregationMode
from endpoints.sim.engine.engine import RequestRejected, SimEngine
from endpoints.sim.engine.faults import CRASH_EXIT_STATUS, FaultInjector, RequestFaults
from endpoints.sim.engine.kv_pool import static_bytes_per_gpu
from endpoints.sim.engine.sim_metrics import CONTENT_TYPE, SimMetrics
from endpoints.sim.engine.sim_request import HEALTH_CHECK_PREFIX, GenerateInput, SimRequest
from endpoints.sim.engine_builder import build_engine
from endpoints.sim.http.bootstrap_server import HttpPrefillPeer, bootstrap_app, parse_bootstrap
from endpoints.sim.http.dcgm_view import DCGM_PATH, DcgmView
from endpoints.sim.http.generate_request import parse_generate
from endpoints.sim.http.native_view import NativeView, json_response
from endpoints.sim.http.openai_request import parse_chat, parse_completion
from endpoints.sim.http.openai_view import OpenAIView, Route, error_body
from endpoints.sim.http.response_stream import DONE, SSE_HEADERS, Accepted, Disconnect, StreamAbort, answer, engine_spec
from endpoints.sim.http.structured_request import native_abort_chunk, prompt_text, with_answer
from endpoints.sim.server_args import SimServerArgs
from endpoints.sim.structured.grammar_backend import GrammarError
from endpoints.sim.structured.output_constraint import from_openai_body, from_sampling_params
from endpoints.sim.toy_tokenizer import OutputText

SIM_VERSION = "0.5.6-costbench-sim"  # the SGLang API generation it speaks; "-sim" marks the twin
HEALTH_CHECK_TIMEOUT_S = 20.0  # SGLANG_HEALTH_CHECK_TIMEOUT default
CRASH_FLUSH_WAIT_S = 1.0  # how long the crash waits for the last answer's bytes to leave for the socket
REASONING_PARSERS_WITH_EFFECT = ("deepseek-r1",)  # the parser the R1 profile's output is shaped for
_UNAUTHENTICATED_PATHS = ("/health", "/health_generate", "/metrics", DCGM_PATH)
_GENERATION_PATHS = ("/generate", "/v1/chat/completions", "/v1/completions", "/health", "/health_generate")


def _exit_now() -> None:
    os._exit(CRASH_EXIT_STATUS)  # a crash: no cleanup, open connections drop


class SimTwin:
    """Engine plus the per-app state the handlers need (no globals: two apps in one process are independent)."""

    def __init__(self, args: SimServerArgs, clock: Clock, on_crash: Callable[[], None]) -> None:
        self.args = args
        self.clock = clock
        self.engine: SimEngine = build_engine(args, clock)
        self.metrics = SimMetrics(self.engine, args.served_model_name) if args.enable_metrics else None
        self.engine.observer = self.metrics
        self.faults = FaultInjector(args.faults)
        self.dcgm = self._dcgm_view()
        self.reasoning = (
            args.reasoning_parser in REASONING_PARSERS_WITH_EFFECT and self.engine.model.reasoning_share is not None
        )
        self.started_s: float | None = None
        self.pd_runner: web.AppRunner | None = None  # a prefill's bootstrap port
        self.pd_session: aiohttp.ClientSession | None = None  # a decode's client for its prefills' ports
        self._on_crash = on_crash
        self._crashed = asyncio.Event()

    def _dcgm_view(self) -> DcgmView:
        hardware = hardware_profile_for(self.args.sim_hardware.value)
        assert self.engine.gpu is not None  # build_engine always counts
        return DcgmView(
            self.engine.gpu,
            self.args.tp_size // self.args.nnodes,  # this host's GPUs
            f"{hardware.name} (costbench twin)",
            static_bytes_per_gpu(hardware, self.args.mem_fraction_static),
            hardware.hbm_bytes,
        )

    def since_ready_s(self) -> float | None:
        if self.started_s is None:
            return None
        since = self.clock.now_s() - self.started_s - self.args.warmup_s
        return since if since >= 0 else None

    def unavailable(self, health: bool) -> bool:
        """503 time: the injected outage for every generation route; the warm-up for health only
        (SGLang serves /generate while it warms up: its own warm-up request is one)."""
        since = self.since_ready_s()
        if since is None:
            return health
        return self.faults.unavailable(since)

    def crash(self) -> None:
        self._crashed.set()  # requests held past the N-th are dropped if on_crash returns (tests)
        self._on_crash()

    async def held_until_crash(self, http: web.Request) -> NoReturn:
        """A request past --fault-crash-after's N: it waits, as it would in a real server's queue, and the
        crash drops its connection (with the default on_crash the process is gone before this resumes)."""
        await self._crashed.wait()
        if http.transport is not None:
            http.transport.abort()
        raise asyncio.CancelledError  # aiohttp drops a cancelled handler quietly

    def structured(
        self, spec: GenerateInput, constraint, text: str | None, after_reasoning: bool, client_rid: object
    ) -> GenerateInput:
        """`spec` with its response format (structured_request.py); raises GrammarError (SGLang's abort)."""
        return with_answer(
            spec, constraint, text, after_reasoning, self.engine.grammar, self.args.sim_unconstrained_failure_rate,
            client_rid,
        )  # fmt: skip

    def text(self, request) -> OutputText:
        model = self.engine.model
        return OutputText(
            request.output_ids, model.eos_token_id, model.think_end_token_id, request.answer_pieces,
            request.reasoning_target,
        )  # fmt: skip

    def gate(self, path: str, headers: Mapping[str, str]) -> web.Response | None:
        """The answer a request gets before any route sees it (a missing API key, the warm-up's or an outage's
        503), or None: let it through."""
        key = self.args.api_key
        if key and path not in _UNAUTHENTICATED_PATHS:
            if headers.get("Authorization") != f"Bearer {key}":
                return json_response({"error": "Unauthorized"}, 401)
        if path in _GENERATION_PATHS and self.unavailable(path.startswith("/health")):
            if path.startswith("/health"):
                return web.Response(status=503)
            message = "The server is not ready (warming up or unavailable)."
            if path.startswith("/v1/"):
                return json_response(error_body(message, 503), 503)
            return json_response({"error": {"message": message}}, 503)
        return None

    # -- generation: what the engine takes (the answer is response_stream.answer's) ----------------

    def accept_generate(self, raw: bytes) -> Accepted | StreamAbort | web.Response:
        """Native /generate: the submitted request, a stream SGLang aborts at once, or a whole answer (400)."""
        engine = self.engine
        try:
            body = _body(raw)
            ask = parse_generate(body, engine.model.vocab_size)
            constraint = from_sampling_params(body.get("sampling_params") or {})
            after_reasoning = self.reasoning and ask.require_reasoning  # SGLang defers the grammar only then
            text = prompt_text(body, chat=False)
            sim_request, faults = self._submitted(body, ask.spec, constraint, text, after_reasoning)
        except (BadRequest, RequestRejected) as exc:
            return NativeView.error_response(str(exc), 400)
        except GrammarError as exc:
            if not ask.spec.stream:
                return NativeView.error_response(str(exc), 400)
            return StreamAbort(native_abort_chunk(ask.spec.rid, len(ask.spec.input_ids), str(exc)))
        report_reasoning = ask.require_reasoning and self.reasoning
        epoch_offset_s = time.time() - self.clock.now_s() if self.args.enable_metrics else None
        incremental = self.args.incremental_streaming_output
        view = NativeView(sim_request, self.text(sim_request), incremental, report_reasoning, epoch_offset_s)
        return Accepted(sim_request, view, ask.spec.stream, faults)

    def accept_openai(self, raw: bytes, route: Route) -> Accepted | StreamAbort | web.Response:
        """/v1/chat/completions and /v1/completions, as accept_generate."""
        engine, args = self.engine, self.args
        vocab = engine.model.vocab_size
        try:
            body = _body(raw)
            if route is Route.CHAT:
                unlimited = engine.context_length_tokens  # engine.submit clips it to what the context leaves
                ask = parse_chat(body, vocab, unlimited, self.reasoning, args.stream_response_default_include_usage)
            else:
                ask = parse_completion(body, vocab, args.stream_response_default_include_usage)
            chat = route is Route.CHAT
            constraint = from_openai_body(body, completions=not chat)
            after_reasoning = chat and self.reasoning  # chat's thinking mode: the grammar starts after `</think>`
            sim_request, faults = self._submitted(body, ask.spec, constraint, prompt_text(body, chat), after_reasoning)
        except (BadRequest, RequestRejected) as exc:
            return OpenAIView.error_response(str(exc), 400)
        except GrammarError as exc:
            if not ask.spec.stream:
                return OpenAIView.error_response(str(exc), 400)
            return StreamAbort(OpenAIView.error_event(str(exc), 400))
        view = OpenAIView(route, sim_request, ask, self.text(sim_request), self.reasoning, args.enable_cache_report)
        return Accepted(sim_request, view, ask.spec.stream, faults)

    def _submitted(
        self, body: dict, spec: GenerateInput, constraint, text: str | None, after_reasoning: bool
    ) -> tuple[SimRequest, RequestFaults]:
        """The request with its response format, its faults drawn, handed to the engine (both routes)."""
        spec = self.structured(spec, constraint, text, after_reasoning, body.get("rid"))
        faults = self.faults.draw()
        return self.engine.submit(engine_spec(spec, faults, parse_bootstrap(body))), faults

    # -- facts ------------------------------------------------------------------------------------

    def server_info(self) -> dict:
        engine, scheduler = self.engine, self.engine.scheduler
        spec = scheduler.speculative
        info = self.args.as_server_info()
        info["context_length"] = engine.context_length_tokens
        info.update(
            backend="sim",
            version=SIM_VERSION,
            max_total_num_tokens=scheduler.capacity_tokens,
            max_req_input_len=engine.context_length_tokens - 1,
            scheduler_info={
                "max_total_num_tokens": scheduler.capacity_tokens,
                "max_req_input_len": engine.context_length_tokens - 1,
            },
            internal_states=[
                {
                    "last_gen_throughput": engine.gen_throughput_tok_s(),
                    # What the (one) scheduler enforces, under SGLang's name (Scheduler.get_internal_state).
                    "effective_max_running_requests_per_dp": self.args.max_running_requests,
                    # Tokens per request-verify since start (Scheduler.get_internal_state); None without speculation.
                    "avg_spec_accept_length": None if spec is None else spec.avg_accept_length(),
                    "sim_steps": engine.steps,  # twin only: steps run and the Python time they cost
                    "sim_loop_cpu_s": engine.loop_cpu_s,
                }
            ],
            sim_model_profile=engine.model.name,
            # The SGLang release the cost model's constants were fitted to (bench/twin_fit.py).
            twin_fitted_sglang_version=cost_constants_for(
                hardware_profile_for(self.args.sim_hardware.value).vendor
            ).sglang_version,
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


TWIN_KEY = web.AppKey("twin", SimTwin)


@web.middleware
async def _gate_middleware(request: web.Request, handler):
    refused = request.app[TWIN_KEY].gate(request.path, request.headers)
    return refused if refused is not None else await handler(request)


async def _health(request: web.Request) -> web.Response:
    twin: SimTwin = request.app[TWIN_KEY]
    if twin.engine.has_work():
        return web.Response(text="")  # busy and stepping: SGLang answers without generating
    probe = GenerateInput(rid=f"{HEALTH_CHECK_PREFIX}{id(request)}", input_ids=(0,), max_new_tokens=1)
    try:
        await asyncio.wait_for(twin.engine.generate(probe), HEALTH_CHECK_TIMEOUT_S)
    except TimeoutError:
        return web.Response(status=503, text="health check timed out")
    return web.Response(text="")


async def _server_info(request: web.Request) -> web.Response:
    return json_response(request.app[TWIN_KEY].server_info())


async def _model_info(request: web.Request) -> web.Response:
    return json_response(request.app[TWIN_KEY].model_info())


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
    return json_response({"object": "list", "data": [card]})


async def _metrics(request: web.Request) -> web.Response:
    twin: SimTwin = request.app[TWIN_KEY]
    assert twin.metrics is not None  # the route exists only under --enable-metrics
    return web.Response(body=twin.metrics.render(), headers={"Content-Type": CONTENT_TYPE})


async def _dcgm(request: web.Request) -> web.Response:
    twin: SimTwin = request.app[TWIN_KEY]
    body = twin.dcgm.render(twin.clock.now_s(), request.host)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})


async def _flush_cache(request: web.Request) -> web.Response:
    if request.app[TWIN_KEY].engine.flush_cache():
        return web.Response(text="Cache flushed.\n")
    return web.Response(status=400, text="Cache not flushed: requests are running or waiting.\n")


def _body(raw: bytes):
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"the request body is not valid JSON: {exc}") from None


class _HttpSink:
    """A streamed answer into an aiohttp response (response_stream.AnswerSink)."""

    def __init__(self, http: web.Request) -> None:
        self._http = http
        self.response = web.StreamResponse(headers=SSE_HEADERS)

    async def open(self) -> None:
        await self.response.prepare(self._http)

    async def write(self, data: bytes) -> None:
        await self.response.write(data)

    async def end(self, data: bytes) -> None:
        await self.response.write_eof(data)


async def _deliver(http: web.Request, twin: SimTwin, accepted: Accepted | StreamAbort | web.Response):
    if isinstance(accepted, web.Response):
        return accepted
    sink = _HttpSink(http)
    if isinstance(accepted, StreamAbort):  # SGLang's scheduler aborted it before its first token: 200, the event
        await sink.open()
        await sink.end(accepted.event + DONE)
        return sink.response
    try:
        whole = await answer(
            sink if accepted.stream else None, twin.engine, accepted.request, accepted.view, accepted.faults,
            json_response,
        )  # fmt: skip
    except Disconnect:
        if http.transport is not None:
            http.transport.abort()  # no final chunk, no [DONE], no clean end of the chunked body
        raise asyncio.CancelledError from None  # aiohttp drops a cancelled handler quietly
    return whole if whole is not None else sink.response


async def _generate(request: web.Request) -> web.StreamResponse:
    twin: SimTwin = request.app[TWIN_KEY]
    return await _deliver(request, twin, twin.accept_generate(await request.read()))


async def _chat(request: web.Request) -> web.StreamResponse:
    twin: SimTwin = request.app[TWIN_KEY]
    return await _deliver(request, twin, twin.accept_openai(await request.read(), Route.CHAT))


async def _completions(request: web.Request) -> web.StreamResponse:
    twin: SimTwin = request.app[TWIN_KEY]
    return await _deliver(request, twin, twin.accept_openai(await request.read(), Route.COMPLETION))


async def _sent_in_full(http: web.Request, response: web.StreamResponse) -> None:
    """Write `response` now (aiohttp would only after the handler returns) and wait, a bounded time, until
    the transport has handed every byte to the kernel, which delivers them even after the process exits."""
    with contextlib.suppress(ConnectionError):  # the client went away: nothing left to deliver
        await response.prepare(http)
        await response.write_eof()
    waited_s = 0.0
    while http.transport is not None and http.transport.get_write_buffer_size() > 0 and waited_s < CRASH_FLUSH_WAIT_S:
        await asyncio.sleep(0.001)
        waited_s += 0.001


def _crash_counted(handler: Callable[[web.Request], Awaitable[web.StreamResponse]]):
    """A generation route under --fault-crash-after N: requests are let in by arrival, the first N are answered
    whatever the answer is (an error, a 400 or a dropped stream count too), the crash follows the N-th answer
    once it is written, and every later request is held until the crash drops it."""

    async def counted(request: web.Request) -> web.StreamResponse:
        twin: SimTwin = request.app[TWIN_KEY]
        if not twin.faults.admit():
            await twin.held_until_crash(request)
        try:
            response = await handler(request)
        except BaseException:  # a dropped connection (injected or the client's) is an answer too
            if twin.faults.count_response():
                asyncio.get_running_loop().call_soon(twin.crash)
            raise
        if twin.faults.count_response():
            await _sent_in_full(request, response)
            twin.crash()
        return response

    return counted


async def _on_startup(app: web.Application) -> None:
    twin: SimTwin = app[TWIN_KEY]
    twin.started_s = twin.clock.now_s()
    engine, args = twin.engine, twin.args
    if engine.rooms is not None:
        twin.pd_runner = web.AppRunner(bootstrap_app(engine.rooms), handle_signals=False)
        await twin.pd_runner.setup()
        await web.TCPSite(twin.pd_runner, args.host, args.disaggregation_bootstrap_port).start()
    if args.disaggregation_mode is DisaggregationMode.DECODE:
        twin.pd_session = aiohttp.ClientSession()
        engine.peer = HttpPrefillPeer(twin.pd_session)
    engine.start()


async def _on_cleanup(app: web.Application) -> None:
    twin: SimTwin = app[TWIN_KEY]
    await twin.engine.stop()
    if twin.pd_session is not None:
        await twin.pd_session.close()
    if twin.pd_runner is not None:
        await twin.pd_runner.cleanup()


def create_app(
    args: SimServerArgs, clock: Clock | None = None, on_crash: Callable[[], None] = _exit_now
) -> web.Application:
    """The twin as an aiohttp app; raises UnknownProfileError or KvSizingError for impossible setups.
    `on_crash` runs when --fault-crash-after is reached (default: exit the process at once)."""
    app = web.Application(middlewares=[_gate_middleware], client_max_size=64 * 1024**2)
    app[TWIN_KEY] = SimTwin(args, clock or MonotonicClock(), on_crash)
    app.router.add_get("/health", _health)
    app.router.add_get("/health_generate", _health)
    for path in ("/server_info", "/get_server_info"):
        app.router.add_get(path, _server_info)
    for path in ("/model_info", "/get_model_info"):
        app.router.add_get(path, _model_info)
    app.router.add_get("/v1/models", _models)
    if args.enable_metrics:
        app.router.add_get("/metrics", _metrics)
    app.router.add_get(DCGM_PATH, _dcgm)
    for method in ("GET", "POST"):
        app.router.add_route(method, "/flush_cache", _flush_cache)
    for method in ("POST", "PUT"):
        app.router.add_route(method, "/generate", _crash_counted(_generate))
    app.router.add_post("/v1/chat/completions", _crash_counted(_chat))
    app.router.add_post("/v1/completions", _crash_counted(_completions))
    app.on_startup.append(_on_startup)
    app.on_cleanup.append(_on_cleanup)
    return app
