"""What blocking endpoint code reads from a hostile server is bounded (docs/endpoints.md, "Bounds on what an
endpoint sends"): start-up's /server_info and /model_info, the probes' /metrics, each in total time (not per
read), in bytes and in JSON nesting; a scrape past a bound is a failed scrape, never rows.

The servers are real ones on 127.0.0.1 that generate what they send (100 MiB is never allocated).
"""

from __future__ import annotations

import asyncio
import resource
import threading
import time
from collections.abc import Callable, Iterator

import orjson
import pyarrow.parquet as pq
import pytest
from aiohttp import web

from common.run_folder import SERVER_SAMPLES_FILE
from endpoints.probes.endpoint_get import ANSWER_MAX_BYTES, http_get
from endpoints.probes.gpu_protocol import NoGpuSampler
from endpoints.probes.metrics_scrape import METRICS_MAX_BYTES, METRICS_MAX_LINES, ScrapeBounds
from endpoints.probes.probe_session import ProbeSession
from endpoints.probes.server_facts import FACTS_LIMIT_S, NotSglangError, UnreachableError, fetch_server_facts
from endpoints_loopback import serve_in_thread
from replay.recording.requests_reader import read_requests
from replay.runner import ReplayConfig, run_replay
from replay_sglang_peer import make_workload

CHUNK = 64 * 1024
MiB = 1 << 20


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _streaming(pieces: Callable[[], Iterator[bytes]], content_type: str, pause_s: float = 0.0):
    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": content_type})
        await response.prepare(request)
        try:
            for piece in pieces():
                await response.write(piece)
                if pause_s:
                    await asyncio.sleep(pause_s)
        except (ConnectionError, RuntimeError):
            pass  # the client hung up, as it should
        return response

    return handler


def _junk_metrics(total_bytes: int) -> Callable[[], Iterator[bytes]]:
    """An sglang:* exposition of about `total_bytes`, made as it is sent: one new series a line."""

    def pieces() -> Iterator[bytes]:
        yield b"# TYPE sglang:junk gauge\n"
        sent, i = 0, 0
        while sent < total_bytes:
            piece = "".join(f'sglang:junk{{i="{i + k}"}} 1\n' for k in range(2000)).encode()
            i += 2000
            sent += len(piece)
            yield piece

    return pieces


def _dribbled(body: bytes) -> Callable[[], Iterator[bytes]]:
    return lambda: (bytes([b]) for b in body)


def _app(**routes) -> web.Application:
    app = web.Application()
    for path, handler in routes.items():
        app.router.add_get("/" + path, handler)
    return app


def _timed(call):
    started = time.monotonic()
    result = call()
    return result, time.monotonic() - started


# -- one bounded GET ----------------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_a_dribbled_body_is_abandoned_at_the_total_limit_not_per_read():
    app = _app(x=_streaming(_dribbled(b"0" * 200), "text/plain", pause_s=0.1))
    with serve_in_thread(app) as url:
        answer, took_s = _timed(lambda: http_get(f"{url}/x", {}, timeout_s=1.0))
    assert answer.status is None and answer.problem == "answered HTTP 200, then no whole answer within 1 s"
    assert took_s < 2.0  # the old per-read timeout never fired: 200 bytes took 20 s


@pytest.mark.timeout(60)
def test_a_dribbled_status_line_is_abandoned_at_the_total_limit():
    async def serve(ready: threading.Event, box: dict) -> None:
        async def dribble(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}":
                    writer.write(bytes([byte]))
                    await asyncio.sleep(0.1)
            except ConnectionError:
                pass
            writer.close()

        server = await asyncio.start_server(dribble, "127.0.0.1", 0)
        box["port"] = server.sockets[0].getsockname()[1]
        box["stop"] = asyncio.Event()
        box["loop"] = asyncio.get_running_loop()
        ready.set()
        await box["stop"].wait()
        server.close()

    ready, box = threading.Event(), {}
    thread = threading.Thread(target=lambda: asyncio.run(serve(ready, box)), daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        answer, took_s = _timed(lambda: http_get(f"http://127.0.0.1:{box['port']}/x", {}, timeout_s=1.0))
    finally:
        box["loop"].call_soon_threadsafe(box["stop"].set)
        thread.join(10)
    assert answer.status is None and answer.problem == "no whole answer within 1 s" and took_s < 2.0


@pytest.mark.timeout(60)
def test_a_body_past_the_byte_bound_is_not_read():
    app = _app(x=_streaming(lambda: (b"z" * CHUNK for _ in range(1600)), "text/plain"))  # 100 MiB
    rss_before = _rss_mib()
    with serve_in_thread(app) as url:
        answer, took_s = _timed(lambda: http_get(f"{url}/x", {}))
    assert answer.status is None and answer.body == b""
    assert answer.problem == "answered HTTP 200 with a body larger than 4 MiB, not read"
    assert ANSWER_MAX_BYTES == 4 * MiB and took_s < 5 and _rss_mib() - rss_before < 200


# -- start-up's facts ---------------------------------------------------------------------------------------


def _deep_json(depth: int) -> bytes:
    return b'{"tp_size": 1, "x": ' + b"[" * depth + b"]" * depth + b"}"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_a_deeply_nested_server_info_is_a_clear_error_not_a_recursion_error(depth):
    async def deep(_request: web.Request) -> web.Response:
        return web.Response(body=_deep_json(depth), content_type="application/json")

    with serve_in_thread(_app(server_info=deep, get_server_info=deep)) as url:
        with pytest.raises(NotSglangError) as raised:
            fetch_server_facts(url, {})
    assert "/server_info: JSON nested deeper than 32 levels" in str(raised.value)


@pytest.mark.timeout(60)
def test_a_dribbled_server_info_holds_start_up_for_the_limit_not_for_its_length():
    body = orjson.dumps({"tp_size": 8, "model_path": "m", "version": "0" * 1000})  # 1,040 bytes: 17 min at 1/s
    app = _app(server_info=_streaming(_dribbled(body), "application/json", pause_s=0.05))
    with serve_in_thread(app) as url:
        started = time.monotonic()
        with pytest.raises(UnreachableError) as raised:
            fetch_server_facts(url, {}, timeout_s=1.0)
        took_s = time.monotonic() - started
    assert "answered HTTP 200, then no whole answer within 1 s" in str(raised.value)
    assert took_s < 2.0 and FACTS_LIMIT_S == 10.0


# -- the probes' /metrics -----------------------------------------------------------------------------------


def _metrics_rows(run_dir) -> list[dict]:
    """The rows a scrape made of the page's series (not the probes' own rows about the scrape)."""
    rows = pq.read_table(run_dir / SERVER_SAMPLES_FILE).to_pylist()
    return [r for r in rows if r["metric"].startswith("sglang:")]


def _scrape_notes(summary, url: str) -> list[str]:
    return [note for note in summary.notes if url in note]


def _probe(url: str, tmp_path, interval_s: float, run_for_s: float, bounds: ScrapeBounds | None = None):
    session = ProbeSession("r", (url,), {}, NoGpuSampler("h", "none"), tmp_path, interval_s, scrape_bounds=bounds)
    started = time.monotonic()
    session.start()
    time.sleep(run_for_s)
    stopping = time.monotonic()
    summary = session.stop()
    done = time.monotonic()
    return summary, done - started, done - stopping


@pytest.mark.timeout(60)
def test_a_100_mib_metrics_page_is_a_failed_scrape_not_millions_of_rows(tmp_path):
    app = _app(metrics=_streaming(_junk_metrics(100 * MiB), "text/plain"))
    rss_before = _rss_mib()
    with serve_in_thread(app) as url:
        summary, took_s, stop_s = _probe(url, tmp_path, interval_s=0.5, run_for_s=1.0)
    assert _metrics_rows(tmp_path) == []
    assert summary.ticks >= 2 and summary.scrape_failures == summary.ticks
    assert _scrape_notes(summary, url) == [f"{url}/metrics: answered HTTP 200 with a body larger than 4 MiB, not read"]
    assert METRICS_MAX_BYTES == 4 * MiB
    assert took_s < 5 and stop_s < 2 and _rss_mib() - rss_before < 300


@pytest.mark.timeout(60)
def test_a_metrics_page_dribbled_a_byte_at_a_time_is_abandoned_each_tick(tmp_path):
    page = b'# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{model_name="m"} 1\n'
    app = _app(metrics=_streaming(_dribbled(page), "text/plain", pause_s=0.07))
    with serve_in_thread(app) as url:
        summary, took_s, stop_s = _probe(url, tmp_path, interval_s=0.5, run_for_s=1.2)
    assert _metrics_rows(tmp_path) == [] and summary.scrape_failures == summary.ticks >= 2
    assert _scrape_notes(summary, url) == [f"{url}/metrics: answered HTTP 200, then no whole answer within 0.5 s"]
    assert took_s < 4 and stop_s < 1.5  # the last tick is bounded too: 5.7 s for the whole page otherwise


@pytest.mark.timeout(60)
def test_a_page_of_more_lines_than_the_bound_is_refused_before_parsing(tmp_path):
    app = _app(metrics=_streaming(_junk_metrics(2 * MiB), "text/plain"))  # about 90,000 lines, within 4 MiB
    with serve_in_thread(app) as url:
        session = ProbeSession("r", (url,), {}, NoGpuSampler("h", "none"), tmp_path, 1.0)
        _, took_s = _timed(session.tick)
        summary = session.stop(final_tick=False)
    assert _metrics_rows(tmp_path) == [] and summary.scrape_failures == 1
    assert _scrape_notes(summary, url) == [f"{url}/metrics: more than {METRICS_MAX_LINES} lines, not kept"]
    assert took_s < 1.0  # parsing 90,000 lines took about 2 s


@pytest.mark.timeout(60)
def test_a_page_of_more_series_than_the_bound_writes_none_of_them(tmp_path):
    app = _app(metrics=_streaming(_junk_metrics(1), "text/plain"))  # 2,000 series
    with serve_in_thread(app) as url:
        session = ProbeSession(
            "r", (url,), {}, NoGpuSampler("h", "none"), tmp_path, 1.0, scrape_bounds=ScrapeBounds(max_series=1000)
        )
        session.tick()
        summary = session.stop(final_tick=False)
    assert _metrics_rows(tmp_path) == [] and _scrape_notes(summary, url) == [
        f"{url}/metrics: more than 1000 series, not kept"
    ]


@pytest.mark.timeout(60)
def test_a_replay_beside_a_hostile_metrics_page_keeps_its_pace_and_its_records(tmp_path):
    """The probes scrape a 100 MiB /metrics while the replay runs against the same server."""

    async def generate(request: web.Request) -> web.Response:
        body = await request.json()
        n = body["sampling_params"]["max_new_tokens"]
        meta = {"prompt_tokens": 8, "completion_tokens": n, "finish_reason": {"type": "length"}}
        event = orjson.dumps({"text": "t", "output_ids": list(range(n)), "meta_info": meta})
        return web.Response(body=b"data: " + event + b"\n\ndata: [DONE]\n\n", content_type="text/event-stream")

    async def server_info(_request: web.Request) -> web.Response:
        return web.json_response({"tp_size": 1})

    app = _app(metrics=_streaming(_junk_metrics(100 * MiB), "text/plain"), server_info=server_info)
    app.router.add_post("/generate", generate)
    workload = make_workload([i * 0.1 for i in range(20)], output_tokens=4)  # 2 s of trace
    with serve_in_thread(app) as url:
        session = ProbeSession("r", (url,), {}, NoGpuSampler("h", "none"), tmp_path / "probes", 0.5)
        session.start()
        run, took_s = _timed(lambda: run_replay(workload, ReplayConfig(url=url), tmp_path / "run"))
        summary, stop_s = _timed(session.stop)
    rows = read_requests(tmp_path / "run").to_pylist()
    assert run.requests_recorded == len(rows) == 20 and {r["status"] for r in rows} == {"ok"}
    assert took_s < 4.0 and stop_s < 2.0
    assert _metrics_rows(tmp_path / "probes") == [] and summary.scrape_failures == summary.ticks >= 3


def test_the_manual_names_each_bound_with_its_value():
    from pathlib import Path

    from common.server_info_fields import MAX_JSON_DEPTH
    from endpoints.probes import endpoint_get, metrics_scrape, server_facts
    from endpoints.router import fleet_router
    from replay.clients import server_info_fetch, sse_reader, stream_request
    from replay.clients.sse_reader import byte_size

    text = (Path(__file__).resolve().parents[2] / "docs" / "endpoints.md").read_text()
    rows = text.split("## Bounds on what an endpoint sends")[1].split("\n## ")[0].splitlines()
    shown = {
        "MAX_LINE_BYTES": byte_size(sse_reader.MAX_LINE_BYTES),
        "MAX_EVENT_BYTES": byte_size(sse_reader.MAX_EVENT_BYTES),
        "MAX_EVENTS": f"{sse_reader.MAX_EVENTS:,}",
        "ERROR_BODY_MAX_BYTES": byte_size(stream_request.ERROR_BODY_MAX_BYTES),
        "ANSWER_LIMIT_S": f"{server_info_fetch.ANSWER_LIMIT_S:g} s",
        "FACTS_MAX_BYTES": byte_size(server_facts.FACTS_MAX_BYTES),
        "FACTS_LIMIT_S": f"{server_facts.FACTS_LIMIT_S:g} s",
        "MAX_JSON_DEPTH": f"{MAX_JSON_DEPTH} levels",
        "METRICS_MAX_BYTES": byte_size(metrics_scrape.METRICS_MAX_BYTES),
        "METRICS_MAX_LINES": f"{metrics_scrape.METRICS_MAX_LINES:,} lines",
        "METRICS_MAX_SERIES": f"{metrics_scrape.METRICS_MAX_SERIES:,} series",
        "METRICS_LIMIT_MAX_S": f"{metrics_scrape.METRICS_LIMIT_MIN_S:g}–{metrics_scrape.METRICS_LIMIT_MAX_S:g} s",
        "WORKER_METRICS_MAX_BYTES": byte_size(fleet_router.WORKER_METRICS_MAX_BYTES),
        "WORKER_METRICS_LIMIT_S": f"{fleet_router.WORKER_METRICS_LIMIT_S:g} s",
    }
    for name, value in shown.items():
        assert any(f"`{name}`" in row and value in row for row in rows), (name, value)
    # Two readers name their byte bound ANSWER_MAX_BYTES: the replay's (1 MiB) and the blocking one's (4 MiB).
    for value in (server_info_fetch.ANSWER_MAX_BYTES, endpoint_get.ANSWER_MAX_BYTES):
        assert any("`ANSWER_MAX_BYTES`" in row and byte_size(value) in row for row in rows), value
