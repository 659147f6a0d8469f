"""Cold start: /flush_cache before the measured replay, retried while the server is busy."""

from __future__ import annotations

import json
import urllib.request

import pytest
from aiohttp import web

from endpoints.probes.cache_prep import CacheFlushError, prepare_cache
from endpoints.provision import provision
from endpoints.running_endpoint import RunningEndpoint
from endpoints.spec import EndpointMode, EndpointSpec
from endpoints_loopback import serve_in_thread

SPEC = EndpointSpec("e", EndpointMode.ATTACH, "deepseek-ai/DeepSeek-V3", (), "H200", 8, 3.5, url="http://x")


def _busy_then_idle(busy_answers: int) -> tuple[web.Application, dict]:
    state = {"posts": 0}

    async def flush(request: web.Request) -> web.Response:
        state["posts"] += 1
        if state["posts"] <= busy_answers:
            return web.Response(status=400, text="Cache not flushed: requests are running or waiting.")
        return web.Response(text="Cache flushed.")

    app = web.Application()
    app.router.add_post("/flush_cache", flush)
    return app, state


class FakeTime:
    def __init__(self) -> None:
        self.t_s = 0.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t_s += seconds


def test_cold_start_retries_while_busy_then_flushes_every_worker(tmp_path):
    app0, state0 = _busy_then_idle(2)
    app1, state1 = _busy_then_idle(0)
    clock = FakeTime()
    with serve_in_thread(app0) as w0, serve_in_thread(app1) as w1:
        endpoint = RunningEndpoint(SPEC, w0, {}, {}, None, metrics_urls=(w0, w1))
        done = prepare_cache(endpoint, cold_start=True, sleep=clock.sleep, now_s=lambda: clock.t_s)
    assert done.flushed_urls == (w0, w1) and done.attempts == 4
    assert state0["posts"] == 3 and state1["posts"] == 1
    assert clock.sleeps == [0.25, 0.5] and done.waited_s == 0.75


def test_a_server_that_stays_busy_fails_the_cold_start():
    app, state = _busy_then_idle(10**6)
    clock = FakeTime()
    with serve_in_thread(app) as url:
        endpoint = RunningEndpoint(SPEC, url, {}, {}, None, metrics_urls=(url,))
        with pytest.raises(CacheFlushError, match="stayed busy for 10 s"):
            prepare_cache(endpoint, cold_start=True, retry_for_s=10, sleep=clock.sleep, now_s=lambda: clock.t_s)
    assert state["posts"] > 1


def test_warm_start_sends_nothing():
    app, state = _busy_then_idle(0)
    with serve_in_thread(app) as url:
        endpoint = RunningEndpoint(SPEC, url, {}, {}, None, metrics_urls=(url,))
        done = prepare_cache(endpoint, cold_start=False)
    assert state["posts"] == 0 and done.flushed_urls == () and "warm-up" in done.note


def _cached_tokens(url: str) -> int:
    body = json.dumps({"input_ids": list(range(1, 300)), "sampling_params": {"max_new_tokens": 2, "ignore_eos": True}})
    request = urllib.request.Request(
        f"{url}/generate", data=body.encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())["meta_info"]["cached_tokens"]


def test_a_cold_start_really_empties_the_twins_prefix_cache(tmp_path):
    spec = EndpointSpec("twin", EndpointMode.SIM, "deepseek-ai/DeepSeek-V3", ("--tp", "8"), "H200", 8, 3.5,
                        ready_timeout_s=30)  # fmt: skip
    with provision(spec, tmp_path) as endpoint:
        _cached_tokens(endpoint.url)
        assert _cached_tokens(endpoint.url) > 0
        prepare_cache(endpoint, cold_start=True)
        assert _cached_tokens(endpoint.url) == 0
