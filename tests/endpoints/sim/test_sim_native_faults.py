"""Native /generate fields the first cut did not cover, the new metrics, and every injected fault,
over real HTTP on 127.0.0.1 (engine steps on a virtual clock unless real time is the point)."""

import signal
import subprocess
import sys
import urllib.error
import urllib.request

import aiohttp
import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from endpoints.clock import VirtualClock
from endpoints.sim.http.server import create_app
from endpoints.sim.server_args import ServerArgsError, parse_server_args

R1 = ["--model-path", "deepseek-ai/DeepSeek-R1", "--tp", "8", "--sim-hardware", "b200"]
PROMPT = list(range(1000, 1400))


def serve(flags: list[str], scenario):
    clock = VirtualClock(allow_real_io=True)

    async def main():
        app = create_app(parse_server_args(R1 + flags), clock)
        async with TestServer(app, host="127.0.0.1", port=0) as server, TestClient(server) as client:
            return await scenario(client)

    return clock.run(main())


def gen(max_new: int = 6, stream: bool = False, **extra) -> bytes:
    body = {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": max_new, "ignore_eos": True}, "stream": stream}
    return orjson.dumps({**body, **extra})


def sse(text: str) -> list[str]:
    return [e[len("data: ") :] for e in text.split("\n\n") if e]


def test_incremental_streaming_sends_deltas_that_add_up_to_the_whole():
    async def scenario(client):
        streamed = await (await client.post("/generate", data=gen(7, stream=True))).text()
        whole = await (await client.post("/generate", data=gen(7))).json()
        return streamed, whole

    streamed, whole = serve(["--incremental-streaming-output"], scenario)
    chunks = [orjson.loads(e) for e in sse(streamed)[:-1]]
    assert [len(c["output_ids"]) for c in chunks] == [1] * 7
    assert sum((c["output_ids"] for c in chunks), []) == whole["output_ids"]
    assert "".join(c["text"] for c in chunks) == whole["text"]
    assert [c["meta_info"]["completion_tokens"] for c in chunks] == list(range(1, 8))  # meta stays cumulative


def test_meta_info_reports_reasoning_tokens_when_asked_and_retractions():
    async def scenario(client):
        asked = await (
            await client.post("/generate", data=gen(10, require_reasoning=True, sim_reasoning_tokens=4))
        ).json()
        plain = await (await client.post("/generate", data=gen(10, sim_reasoning_tokens=4))).json()
        return asked["meta_info"], plain["meta_info"], asked["text"]

    asked, plain, text = serve(["--reasoning-parser", "deepseek-r1"], scenario)
    assert asked["reasoning_tokens"] == 4 and plain["reasoning_tokens"] == 0
    assert asked["num_retractions"] == 0 and "queue_time" not in asked
    assert text.count("</think>") == 1  # native text is raw: the parser only splits the OpenAI answers


def test_stop_strings_are_accepted_and_bad_ones_rejected():
    async def scenario(client):
        ok = await client.post(
            "/generate",
            data=orjson.dumps({"text": "hi " * 30, "sampling_params": {"stop": ["\n\n"], "max_new_tokens": 3}}),
        )
        bad = await client.post("/generate", data=orjson.dumps({"text": "hi", "sampling_params": {"stop": [1]}}))
        return ok.status, bad.status, (await bad.json())["error"]["message"]

    ok, bad, message = serve([], scenario)
    assert (ok, bad) == (200, 400) and "stop" in message


def test_metrics_histograms_gauges_and_retraction_counters():
    def value(text: str, name: str) -> float:
        line = next(line for line in text.splitlines() if line.startswith(name + "{"))
        assert 'model_name="deepseek-ai/DeepSeek-R1"' in line
        return float(line.rsplit(" ", 1)[1])

    async def scenario(client):
        await (await client.post("/generate", data=gen(5, stream=True))).read()
        return await (await client.get("/metrics")).text()

    text = serve(["--enable-metrics"], scenario)
    assert value(text, "sglang:inter_token_latency_seconds_count") == 4  # 5 tokens, 4 gaps, one chunk each
    assert value(text, "sglang:queue_time_seconds_count") == 1
    assert value(text, "sglang:time_to_first_token_seconds_count") == 1
    for name in ("num_retracted_reqs", "num_running_reqs", "num_queue_reqs", "token_usage", "gen_throughput"):
        value(text, f"sglang:{name}")
    assert value(text, "sglang:num_retracted_requests_total") == 0


def test_flush_cache_is_refused_while_a_request_runs():
    async def scenario(client):
        response = await client.post("/generate", data=gen(50, stream=True))
        await response.content.readline()  # the first chunk is out: the request is running
        busy = (await client.post("/flush_cache")).status
        await response.read()
        idle = (await client.post("/flush_cache")).status
        return busy, idle

    assert serve([], scenario) == (400, 200)


def test_health_turns_200_after_the_warmup():
    async def scenario(client):
        import asyncio

        early = (await client.get("/health")).status
        generate_during_warmup = (await client.post("/generate", data=gen(1))).status
        await asyncio.sleep(31)
        return early, generate_during_warmup, (await client.get("/health")).status

    assert serve(["--sim-warmup-s", "30"], scenario) == (503, 200, 200)


def test_fault_error_mid_stream_is_an_error_event_then_done_and_500_without_stream():
    async def scenario(client):
        streamed = await (await client.post("/generate", data=gen(20, stream=True))).text()
        whole = await client.post("/generate", data=gen(20))
        chat = await client.post(
            "/v1/chat/completions",
            data=orjson.dumps({"messages": [{"role": "user", "content": "x" * 80}], "stream": True}),
        )
        return streamed, whole.status, await whole.json(), await chat.text()

    streamed, status, body, chat = serve(["--fault-error-rate", "1"], scenario)
    events = sse(streamed)
    assert events[-1] == "[DONE]" and len(events) >= 3
    assert orjson.loads(events[0])["meta_info"]["completion_tokens"] >= 1  # it failed mid-response
    assert "error" in orjson.loads(events[-2]) and "message" in orjson.loads(events[-2])["error"]
    assert status == 500 and body["code"] == 500 and body["object"] == "error"
    chat_events = sse(chat)
    assert orjson.loads(chat_events[-2])["error"]["code"] == 500 and chat_events[-1] == "[DONE]"


def test_fault_disconnect_drops_the_stream_without_done():
    async def scenario(client):
        response = await client.post("/generate", data=gen(50, stream=True))
        with pytest.raises(aiohttp.ClientPayloadError):
            await response.read()
        with pytest.raises(aiohttp.ServerDisconnectedError):  # non-streaming: no answer at all
            await client.post("/generate", data=gen(3, stream=False))
        return (await client.get("/health")).status  # the server itself is fine

    assert serve(["--fault-disconnect-rate", "1"], scenario) == 200


def test_fault_stall_holds_the_stream_quiet_for_the_given_seconds():
    async def scenario(client):
        import asyncio

        loop = asyncio.get_running_loop()
        response = await client.post("/generate", data=gen(3, stream=True))
        times = []
        while line := await response.content.readline():
            if line.startswith(b"data: {"):
                times.append(loop.time())
        return [b - a for a, b in zip(times, times[1:])]

    gaps = serve(["--fault-stall-s", "5"], scenario)
    assert max(gaps) >= 5.0 and min(gaps) < 1.0


def test_fault_503_window_then_recovery():
    async def scenario(client):
        import asyncio

        before = (await client.post("/generate", data=gen(1))).status
        await asyncio.sleep(10.5)
        during = [(await client.post(p, data=gen(1))).status for p in ("/generate", "/v1/completions")]
        health = (await client.get("/health")).status
        await asyncio.sleep(10)
        after = (await client.post("/generate", data=gen(1))).status
        return before, during, health, after

    assert serve(["--fault-503-after-s", "10", "--fault-503-for-s", "5"], scenario) == (200, [503, 503], 503, 200)


def test_fault_flags_are_validated():
    for flags, reason in ((["--fault-error-rate", "1.5"], "fault-error-rate"), (["--fault-503-for-s", "3"], "fault-503-after-s"),
                          (["--fault-crash-after", "0"], "fault-crash-after")):  # fmt: skip
        with pytest.raises(ServerArgsError, match=reason):
            parse_server_args(flags)


def test_fault_crash_after_n_responses_kills_the_process():
    command = [sys.executable, "-m", "endpoints.sim", "--host", "127.0.0.1", "--port", "0", *R1,
               "--max-running-requests", "8", "--fault-crash-after", "2"]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = process.stdout.readline().strip().rsplit(" ", 1)[1]
        body = orjson.dumps({"input_ids": [5, 6, 7], "sampling_params": {"max_new_tokens": 1}})
        for _ in range(2):
            request = urllib.request.Request(f"{url}/generate", data=body, method="POST")
            with urllib.request.urlopen(request, timeout=10) as response:
                assert response.status == 200
        assert process.wait(timeout=10) == 70
        with pytest.raises(urllib.error.URLError):
            urllib.request.urlopen(f"{url}/health", timeout=2)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait()


def test_metrics_add_queue_time_and_forward_entry_time_and_server_info_reports_the_enforced_cap():
    async def scenario(client):
        first = await client.post("/generate", data=gen(20, stream=True))
        second = await (await client.post("/generate", data=gen(3))).json()  # waits: one request at a time
        await first.read()
        info = await (await client.get("/server_info")).json()
        return second["meta_info"], info

    meta, info = serve(["--enable-metrics", "--max-running-requests", "1"], scenario)
    # SchedulerReqTimeStats.convert_to_output_meta_info: seconds in the waiting queue, and the epoch
    # time the first forward batch began; the second request waited for the first one's 20 tokens.
    assert meta["queue_time"] > 0 and meta["forward_entry_time"] > 1.7e9
    assert [s["effective_max_running_requests_per_dp"] for s in info["internal_states"]] == [1]
