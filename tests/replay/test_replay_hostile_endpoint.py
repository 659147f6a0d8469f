"""A hostile endpoint against the whole replay: each read is bounded in bytes and time, each misbehaviour is a
request failure with its kind, and the run is written (docs/endpoints.md, "Bounds on what an endpoint sends").

The servers are real aiohttp apps on 127.0.0.1 that generate what they send (a 10 GiB body is never allocated)
and, once past what they send, hold the connection open: only the replay's own bounds end a request.
"""

from __future__ import annotations

import asyncio
import json
import logging
import resource
import time
from collections.abc import Callable, Iterator

import aiohttp
import orjson
import pytest
from aiohttp import web

from common.run_folder import RUN_FILE
from endpoints_loopback import serve_in_thread
from replay.clients.server_info_fetch import ANSWER_MAX_BYTES, fetch_server_info
from replay.clients.sse_reader import MAX_EVENT_BYTES, MAX_LINE_BYTES
from replay.clients.stream_request import ERROR_BODY_MAX_BYTES
from replay.recording.requests_reader import read_requests
from replay.runner import ReplayConfig, run_replay
from replay_sglang_peer import make_workload

CHUNK = 64 * 1024
N = 3  # requests, all in flight together
GiB = 1 << 30


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


async def _hold(request: web.Request) -> None:
    """Keep the connection open until the client lets go of it."""
    while request.transport is not None and not request.transport.is_closing():
        await asyncio.sleep(0.05)


def _streaming(status: int, pieces: Callable[[], Iterator[bytes]], content_type: str = "text/event-stream"):
    async def handler(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(status=status, headers={"Content-Type": content_type})
        await response.prepare(request)
        try:
            for piece in pieces():
                await response.write(piece)
            await _hold(request)
        except (ConnectionError, RuntimeError):
            pass  # the client hung up, as it should
        return response

    return handler


def _generated(piece: bytes, total_bytes: int) -> Callable[[], Iterator[bytes]]:
    def pieces() -> Iterator[bytes]:
        for _ in range(total_bytes // len(piece)):
            yield piece

    return pieces


async def _server_info(_request: web.Request) -> web.Response:
    return web.json_response({"version": "0.0-hostile", "tp_size": 1})


async def _good_generate(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    n = body["sampling_params"]["max_new_tokens"]
    meta = {"prompt_tokens": len(body["input_ids"]), "completion_tokens": n, "finish_reason": {"type": "length"}}
    event = orjson.dumps({"text": "tok " * n, "output_ids": list(range(n)), "meta_info": meta})
    return web.Response(body=b"data: " + event + b"\n\ndata: [DONE]\n\n", content_type="text/event-stream")


def _app(generate, server_info=_server_info) -> web.Application:
    app = web.Application()
    app.router.add_post("/generate", generate)
    app.router.add_get("/server_info", server_info)
    return app


def _replay(app: web.Application, tmp_path, request_timeout_s: float = 20.0):
    workload = make_workload([0.0, 0.01, 0.02][:N], input_tokens=8, output_tokens=4)
    rss_before = _rss_mib()
    with serve_in_thread(app) as url:
        started = time.monotonic()
        run = run_replay(workload, ReplayConfig(url=url, request_timeout_s=request_timeout_s), tmp_path)
        took_s = time.monotonic() - started
    rows = read_requests(tmp_path).to_pylist()
    # The run is written whatever the endpoint did: run.json finished, every request recorded.
    assert json.loads((tmp_path / RUN_FILE).read_text())["finished_wall_s"] is not None
    assert not run.partial and run.requests_recorded == len(rows) == N
    return rows, took_s, _rss_mib() - rss_before


@pytest.mark.timeout(60)
def test_an_event_stream_with_no_newline_is_cut_at_the_line_bound(tmp_path):
    app = _app(_streaming(200, _generated(b"x" * CHUNK, 8 * MAX_LINE_BYTES)))
    rows, took_s, rss_growth_mib = _replay(app, tmp_path)
    assert {r["error_kind"] for r in rows} == {"response_too_large"}
    assert {r["status"] for r in rows} == {"error"} and {r["http_status"] for r in rows} == {200}
    assert {r["error_message"] for r in rows} == {"an event-stream line passed 4 MiB without a newline"}
    assert took_s < 10 and rss_growth_mib < 300


@pytest.mark.timeout(60)
def test_data_lines_with_no_blank_line_are_cut_at_the_event_bound(tmp_path):
    line = b"data: " + b"y" * 1000 + b"\n"
    app = _app(_streaming(200, _generated(line * 64, 8 * MAX_EVENT_BYTES)))
    rows, took_s, rss_growth_mib = _replay(app, tmp_path)
    assert {r["error_kind"] for r in rows} == {"response_too_large"}
    assert {r["error_message"] for r in rows} == {"an event's data: lines passed 8 MiB without a blank line"}
    assert took_s < 10 and rss_growth_mib < 300


@pytest.mark.timeout(60)
def test_a_500_with_a_10_gib_body_is_recorded_from_its_first_64_kib(tmp_path):
    words = b"internal error, try again. " * 2427  # 65,529 bytes a write
    app = _app(_streaming(500, _generated(words, 10 * GiB), content_type="text/plain"))
    rows, took_s, rss_growth_mib = _replay(app, tmp_path)
    assert {(r["status"], r["error_kind"], r["http_status"]) for r in rows} == {("error", "http_status", 500)}
    assert all(r["error_message"].startswith("HTTP 500 (body cut at 64 KiB): internal error, try") for r in rows)
    assert ERROR_BODY_MAX_BYTES == 64 * 1024
    assert took_s < 10 and rss_growth_mib < 300


@pytest.mark.timeout(60)
def test_a_small_error_body_is_kept_whole_without_a_cut_note(tmp_path):
    async def busy(request: web.Request) -> web.Response:
        return web.Response(status=503, text="busy: KV cache pool exhausted")

    rows, _, _ = _replay(_app(busy), tmp_path)
    assert {r["error_message"] for r in rows} == {"HTTP 503: busy: KV cache pool exhausted"}


def _deep(depth: int) -> bytes:
    return b'{"tp_size": ' + b"[" * depth + b"]" * depth + b"}"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_a_deeply_nested_server_info_is_a_named_problem_and_the_replay_goes_on(tmp_path, caplog, depth):
    async def deep(_request: web.Request) -> web.Response:
        return web.Response(body=_deep(depth), content_type="application/json")

    caplog.set_level(logging.WARNING)
    rows, took_s, _ = _replay(_app(_good_generate, deep), tmp_path)
    assert {r["status"] for r in rows} == {"ok"}
    assert "GET /server_info: JSON nested deeper than 32 levels" in caplog.text
    assert json.loads((tmp_path / RUN_FILE).read_text())["server_info"] == {}
    assert took_s < 10


def _fetch(app: web.Application, **bounds) -> tuple[tuple[dict, str | None], float]:
    async def main(url: str):
        async with aiohttp.ClientSession() as session:
            return await fetch_server_info(session, url, {}, **bounds)

    with serve_in_thread(app) as url:
        started = time.monotonic()
        answer = asyncio.run(main(url))
        return answer, time.monotonic() - started


async def _dribble(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    await response.prepare(request)
    try:
        for byte in orjson.dumps({"tp_size": 1, "version": "0" * 1000}):
            await response.write(bytes([byte]))
            await asyncio.sleep(0.1)
    except (ConnectionError, RuntimeError):
        pass
    return response


@pytest.mark.timeout(60)
def test_a_dribbled_server_info_is_abandoned_at_the_total_limit_not_per_read():
    app = web.Application()
    app.router.add_get("/server_info", _dribble)
    app.router.add_get("/get_server_info", _dribble)
    (info, problem), took_s = _fetch(app, timeout_s=1.0)
    assert info == {} and problem == "GET /server_info: HTTP 200, then no whole answer within 1 s"
    assert took_s < 2.5  # both paths share the one limit


@pytest.mark.timeout(60)
def test_an_oversized_server_info_is_not_read():
    app = web.Application()
    app.router.add_get(
        "/server_info", _streaming(200, _generated(b" " * CHUNK, 100 * ANSWER_MAX_BYTES), "application/json")
    )
    (info, problem), took_s = _fetch(app)
    assert info == {} and problem.startswith("GET /server_info: body larger than 1 MiB, not read")
    assert took_s < 5
