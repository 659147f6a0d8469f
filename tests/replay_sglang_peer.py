"""Test peer for the replay tests: a real aiohttp server on 127.0.0.1 speaking SGLang's native
/generate SSE (cumulative text and output_ids, meta_info usage, `data: [DONE]`) and SGLang's OpenAI
streams (/v1/chat/completions with reasoning_content, /v1/completions, usage chunk on
stream_options.include_usage), with switches for the failure modes a replayer must record.
Also helpers to build small Workloads and a scripted clock.
"""

from __future__ import annotations

import asyncio
import heapq
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass

import orjson
import pyarrow as pa
from aiohttp import web

from workloads.workload import WORKLOAD_SCHEMA, TraceFormat, Workload


@dataclass
class PeerBehaviour:
    mode: str = "ok"  # ok | http_500 | error_event | drop | abort | no_finish
    token_delay_s: float = 0.0
    cached_tokens: int | None = 0  # None: field absent from meta_info
    reasoning_tokens: int | None = None  # leading reasoning tokens; None: field absent
    ping: bool = False  # send `: ping` comments between events
    server_info_status: int = 200
    server_info: dict | None = None  # the /server_info body (None: a small SGLang-like one)
    model_info: dict | None = None  # the /model_info body (None: a small SGLang-like one)


class SglangPeer:
    """`async with SglangPeer(behaviour) as peer:` then `peer.url`; `peer.bodies` holds what arrived."""

    def __init__(self, behaviour: PeerBehaviour | None = None) -> None:
        self.behaviour = behaviour or PeerBehaviour()
        self.bodies: list[dict] = []
        self.headers: list[dict] = []
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def __aenter__(self) -> "SglangPeer":
        app = web.Application()
        app.router.add_post("/generate", self._generate)
        app.router.add_get("/server_info", self._server_info)
        app.router.add_post("/v1/chat/completions", self._openai)
        app.router.add_post("/v1/completions", self._openai)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/model_info", self._model_info)
        app.router.add_get("/health", self._health)
        app.router.add_get("/health_generate", self._health)
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc) -> None:
        assert self._runner is not None
        await self._runner.cleanup()

    async def _server_info(self, request: web.Request) -> web.Response:
        if self.behaviour.server_info_status != 200:
            return web.Response(status=self.behaviour.server_info_status, text="not here")
        if self.behaviour.server_info is not None:
            return web.json_response(self.behaviour.server_info)
        return web.json_response(
            {"version": "0.0-peer", "tp_size": 8, "scheduler_info": {"max_total_num_tokens": 1000}}
        )

    async def _model_info(self, request: web.Request) -> web.Response:
        body = self.behaviour.model_info
        return web.json_response(body if body is not None else {"model_path": "peer-model", "is_generation": True})

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(text="")

    async def _metrics(self, request: web.Request) -> web.Response:
        """SGLang's Prometheus text: gauges and counters labelled with the model name."""
        done = len(self.bodies)
        text = (
            "# HELP sglang:num_running_reqs The number of running requests.\n"
            "# TYPE sglang:num_running_reqs gauge\n"
            'sglang:num_running_reqs{model_name="peer-model"} 0.0\n'
            "# HELP sglang:prompt_tokens_total Number of prefill tokens processed.\n"
            "# TYPE sglang:prompt_tokens_total counter\n"
            f'sglang:prompt_tokens_total{{model_name="peer-model"}} {8.0 * done}\n'
        )
        return web.Response(text=text, content_type="text/plain")

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "peer-model", "object": "model"}]})

    async def _openai(self, request: web.Request) -> web.StreamResponse:
        """SGLang's OpenAI stream shape (docs/endpoints.md, "SGLang's API"); prompt tokens = 4 bytes of text each."""
        b = self.behaviour
        body = await request.json()
        self.bodies.append(body)
        self.headers.append(dict(request.headers))
        if b.mode == "http_500":
            return web.json_response(
                {"object": "error", "message": "boom", "type": "InternalError", "code": 500}, status=500
            )
        chat = request.path.endswith("/chat/completions")
        if chat:
            text = "".join(m["content"] for m in body["messages"])
            n = body["max_completion_tokens"]
        else:
            text = body["prompt"]
            n = body["max_tokens"]
        prompt_tokens = len(text.encode()) // 4
        reasoning = b.reasoning_tokens or 0
        obj = "chat.completion.chunk" if chat else "text_completion"
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)

        async def event(payload: dict) -> None:
            await response.write(b"data: " + orjson.dumps(payload) + b"\n\n")

        if chat:
            await event(
                {
                    "id": "x",
                    "object": obj,
                    "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}],
                    "usage": None,
                }
            )
        for k in range(1, n + 1):
            if b.token_delay_s:
                await asyncio.sleep(b.token_delay_s)
            if b.mode == "error_event" and k == 3:
                await event({"error": {"message": "scheduler crashed", "type": "InternalError", "code": 500}})
                await response.write(b"data: [DONE]\n\n")
                return response
            if b.mode == "drop" and k == 3:
                assert request.transport is not None
                request.transport.close()
                return response
            finish = ("abort" if b.mode == "abort" else "length") if k == n and b.mode != "no_finish" else None
            if chat:
                delta = {"reasoning_content": " think"} if k <= reasoning else {"content": " word"}
                choice = {"index": 0, "delta": delta, "finish_reason": finish}
            else:
                choice = {"index": 0, "text": " word", "finish_reason": finish}
            await event({"id": "x", "object": obj, "choices": [choice], "usage": None})
        if b.mode == "no_finish":
            return response
        if (body.get("stream_options") or {}).get("include_usage"):
            usage: dict = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": n,
                "total_tokens": prompt_tokens + n,
                "prompt_tokens_details": None,
            }
            if b.cached_tokens:
                usage["prompt_tokens_details"] = {"cached_tokens": b.cached_tokens}
            if b.reasoning_tokens is not None:
                usage["reasoning_tokens"] = min(n, b.reasoning_tokens)
            await event({"id": "x", "object": obj, "choices": [], "usage": usage})
        await response.write(b"data: [DONE]\n\n")
        return response

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        b = self.behaviour
        body = await request.json()
        self.bodies.append(body)
        self.headers.append(dict(request.headers))
        if b.mode == "http_500":
            return web.Response(status=500, text="boom: KV cache pool exhausted")
        started = time.monotonic()
        n = body["sampling_params"]["max_new_tokens"]
        prompt_tokens = len(body["input_ids"])
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for k in range(1, n + 1):
            if b.token_delay_s:
                await asyncio.sleep(b.token_delay_s)
            if b.ping:
                await response.write(b": ping\n\n")
            if b.mode == "error_event" and k == 3:
                await response.write(
                    b'data: {"error": {"message": "scheduler crashed", "type": "InternalError", "code": 500}}\n\n'
                )
                await response.write(b"data: [DONE]\n\n")
                return response
            if b.mode == "drop" and k == 3:
                assert request.transport is not None
                request.transport.close()
                return response
            last = k == n
            meta: dict = {"id": "rid", "finish_reason": None, "prompt_tokens": prompt_tokens, "completion_tokens": k}
            if b.cached_tokens is not None:
                meta["cached_tokens"] = b.cached_tokens
            if b.reasoning_tokens is not None:
                meta["reasoning_tokens"] = min(k, b.reasoning_tokens)
            if last and b.mode != "no_finish":
                meta["finish_reason"] = (
                    {"type": "abort", "message": "input too long"}
                    if b.mode == "abort"
                    else {"type": "length", "length": n}
                )
                meta["e2e_latency"] = time.monotonic() - started
            event = (
                b"data: "
                + orjson.dumps({"text": "tok " * k, "output_ids": list(range(k)), "meta_info": meta})
                + b"\n\n"
            )
            if last and b.mode != "no_finish":
                event += b"data: [DONE]\n\n"  # same write as the last token, as SGLang does in practice
            await response.write(event)
        return response


@contextmanager
def peer_in_thread(behaviour: PeerBehaviour | None = None):
    """The peer on its own event loop in a thread, for code that runs its own loop (run_replay, the CLI)."""
    ready = threading.Event()
    holder: dict = {}

    def serve() -> None:
        async def main() -> None:
            async with SglangPeer(behaviour) as peer:
                holder["peer"] = peer
                holder["stop"] = asyncio.Event()
                holder["loop"] = asyncio.get_running_loop()
                ready.set()
                await holder["stop"].wait()

        asyncio.run(main())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(10), "peer did not start"
    try:
        yield holder["peer"]
    finally:
        holder["loop"].call_soon_threadsafe(holder["stop"].set)
        thread.join(10)


def make_workload(
    arrivals_s: list[float],
    input_tokens: int = 8,
    output_tokens: int = 4,
    sessions: list[str | None] | None = None,
    turns: list[int | None] | None = None,
    reasoning_tokens: list[int | None] | None = None,
    prefix_blocks: list[list[int] | None] | None = None,
    block_size: int = 0,
) -> Workload:
    n = len(arrivals_s)
    table = pa.Table.from_pydict(
        {
            "request_id": [f"r{i}" for i in range(n)],
            "session_id": sessions or [None] * n,
            "turn": turns or [None] * n,
            "arrival_s": [float(a) for a in arrivals_s],
            "input_tokens": [input_tokens] * n,
            "output_tokens": [output_tokens] * n,
            "prefix_blocks": prefix_blocks or [None] * n,
            "prompt": [None] * n,
            "reasoning_tokens": reasoning_tokens or [None] * n,
            "response_format": [None] * n,
            "constrained": [None] * n,
        },
        schema=WORKLOAD_SCHEMA,
    )
    return Workload(
        name="test",
        source_path="test.jsonl",
        trace_format=TraceFormat.MOONCAKE,
        time_unit="s",
        block_size=block_size,
        table=table,
    )


class ScriptedClock:
    """Virtual time: advances only when the scheduler sleeps; `late_s` makes every wake-up that late."""

    def __init__(self, start_s: float = 1000.0, late_s: float = 0.0) -> None:
        self.t_s = start_s
        self.late_s = late_s
        self.sleeps: list[float] = []

    def now_s(self) -> float:
        return self.t_s

    def wall_s(self) -> float:
        return 1.7e9 + self.t_s

    async def sleep_until(self, t_s: float) -> None:
        # Let tasks that are ready run at the current virtual time first, as a real sleep would.
        await asyncio.sleep(0)
        self.sleeps.append(t_s)
        self.t_s = max(self.t_s, t_s + self.late_s)


class VirtualClock:
    """Discrete-event virtual time for scheduler tests: `await clock.drive(coro)` runs the coroutine,
    and whenever every task is waiting, jumps to the earliest pending `sleep_until` deadline.
    Only for code that does no real I/O (a fake dispatch), since it cannot see sockets."""

    YIELDS_PER_STEP = 50  # event-loop turns that let every runnable task reach its next wait

    def __init__(self, start_s: float = 1000.0) -> None:
        self.t_s = start_s
        self._heap: list[tuple[float, int, asyncio.Future]] = []
        self._seq = 0

    def now_s(self) -> float:
        return self.t_s

    def wall_s(self) -> float:
        return 1.7e9 + self.t_s

    async def sleep_until(self, t_s: float) -> None:
        if t_s <= self.t_s:
            await asyncio.sleep(0)
            return
        future = asyncio.get_running_loop().create_future()
        self._seq += 1
        heapq.heappush(self._heap, (t_s, self._seq, future))
        await future

    async def drive(self, coro):
        task = asyncio.ensure_future(coro)
        while not task.done():
            for _ in range(self.YIELDS_PER_STEP):
                await asyncio.sleep(0)
            if task.done():
                break
            while self._heap and self._heap[0][2].cancelled():
                heapq.heappop(self._heap)
            if not self._heap:
                task.cancel()
                raise RuntimeError("deadlock: every task waits and no sleep is pending")
            t_s, _, future = heapq.heappop(self._heap)
            self.t_s = max(self.t_s, t_s)
            future.set_result(None)
        return task.result()
