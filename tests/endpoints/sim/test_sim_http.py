"""The twin over real HTTP on 127.0.0.1: every route, field, status code and metric a client relies on."""

import asyncio
import signal
import subprocess
import sys
import urllib.request

import orjson
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from endpoints.sim.cost.fitted_constants import FITTED
from endpoints.sim.http.server import create_app
from endpoints.sim.server_args import parse_server_args

BASE_FLAGS = ["--model-path", "deepseek-ai/DeepSeek-R1", "--tp", "8", "--sim-hardware", "b200"]
PROMPT = list(range(1000, 1600))


def serve(flags: list[str], scenario):
    async def main():
        app = create_app(parse_server_args(BASE_FLAGS + flags))
        async with TestServer(app, host="127.0.0.1", port=0) as server, TestClient(server) as client:
            return await scenario(client)

    return asyncio.run(main())


def sse_events(body: str) -> list:
    events = [e for e in body.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events), events
    return [e[len("data: ") :] for e in events]


async def generate(client, payload: dict, **kwargs):
    response = await client.post("/generate", data=orjson.dumps(payload), **kwargs)
    return response.status, await response.json()


def test_health_and_facts_routes():
    async def scenario(client):
        health = await client.get("/health_generate")
        info = await (await client.get("/server_info")).json()
        model = await (await client.get("/model_info")).json()
        models = await (await client.get("/v1/models")).json()
        metrics = await client.get("/metrics")
        return health.status, info, model, models, metrics.status

    flags = [
        "--served-model-name",
        "r1",
        "--schedule-policy",
        "lpm",
        "--trust-remote-code",
        "--context-length",
        "32768",
    ]
    health, info, model, models, metrics_status = serve(flags, scenario)
    assert health == 200
    assert info["backend"] == "sim" and "sim" in info["version"]
    assert info["tp_size"] == 8 and info["schedule_policy"] == "lpm" and info["sim_hardware"] == "b200"
    assert info["trust_remote_code"] is True  # accepted-and-ignored flags are recorded too
    assert info["max_total_num_tokens"] == info["scheduler_info"]["max_total_num_tokens"] > 100_000
    assert info["context_length"] == 32768 and info["disable_radix_cache"] is False
    # The SGLang release the B200's (NVIDIA's) constants were fitted to, as endpoints/sim/cost/fitted_constants.py says.
    assert info["twin_fitted_sglang_version"] == FITTED["nvidia-blackwell"]["sglang_version"]  # the B200's
    assert model["model_path"] == "deepseek-ai/DeepSeek-R1" and model["is_generation"] is True
    assert model["tokenizer_path"] == "deepseek-ai/DeepSeek-R1" and model["architectures"] == ["DeepseekV3ForCausalLM"]
    assert models["object"] == "list"
    assert models["data"] == [
        {
            "id": "r1",
            "object": "model",
            "created": 0,
            "owned_by": "sglang",
            "root": "deepseek-ai/DeepSeek-R1",
            "max_model_len": 32768,
        }
    ]
    assert metrics_status == 404  # /metrics only with --enable-metrics


def test_health_is_503_during_the_simulated_warmup():
    async def scenario(client):
        return [(await client.get(p)).status for p in ("/health", "/health_generate", "/v1/models")]

    assert serve(["--sim-warmup-s", "60"], scenario) == [503, 503, 200]


def test_generate_non_streaming_with_input_ids_and_prefix_cache():
    async def scenario(client):
        payload = {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": 6, "ignore_eos": True, "temperature": 0}}
        return await generate(client, payload), await generate(client, payload)

    (status, first), (_, second) = serve([], scenario)
    assert status == 200
    assert len(first["output_ids"]) == 6 and first["text"]
    meta = first["meta_info"]
    assert meta["prompt_tokens"] == 600 and meta["completion_tokens"] == 6 and meta["cached_tokens"] == 0
    assert meta["finish_reason"] == {"type": "length", "length": 6}
    assert 0 < meta["e2e_latency"] < 5 and meta["id"]
    assert second["meta_info"]["cached_tokens"] == 599  # the last prompt token is always recomputed
    assert second["output_ids"] == first["output_ids"]  # deterministic per prompt


def test_generate_text_input_and_default_max_new_tokens():
    async def scenario(client):
        return await generate(client, {"text": "x" * 400, "sampling_params": {"ignore_eos": True}, "rid": "mine"})

    status, body = serve(["--sim-hardware", "b200", "--stream-interval", "1"], scenario)
    assert status == 200
    assert body["meta_info"]["prompt_tokens"] == 100  # ~1 token per 4 bytes
    assert body["meta_info"]["completion_tokens"] == 128  # SGLang's native default
    assert body["meta_info"]["id"] == "mine"


def test_generate_streaming_sends_cumulative_chunks_then_done():
    async def scenario(client):
        payload = {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": 7, "ignore_eos": True}, "stream": True}
        response = await client.post("/generate", data=orjson.dumps(payload))
        return response.status, response.headers["Content-Type"], await response.text()

    status, content_type, body = serve(["--stream-interval", "2"], scenario)
    assert status == 200 and content_type.startswith("text/event-stream")
    events = sse_events(body)
    assert events[-1] == "[DONE]"
    chunks = [orjson.loads(e) for e in events[:-1]]
    counts = [c["meta_info"]["completion_tokens"] for c in chunks]
    assert counts == [1, 3, 5, 7]
    assert [len(c["output_ids"]) for c in chunks] == counts  # cumulative, not deltas
    assert all(chunks[i]["text"].startswith(chunks[i - 1]["text"]) for i in range(1, len(chunks)))
    assert all(c["meta_info"]["finish_reason"] is None and "e2e_latency" not in c["meta_info"] for c in chunks[:-1])
    last = chunks[-1]["meta_info"]
    assert last["finish_reason"] == {"type": "length", "length": 7}
    assert last["prompt_tokens"] == 600 and last["cached_tokens"] == 0 and last["e2e_latency"] > 0


def test_bad_requests_get_400_with_a_reason():
    cases = [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "JSON object"),
        (b"{}", "text or input_ids"),
        (orjson.dumps({"text": "a", "input_ids": [1]}), "exactly one"),
        (orjson.dumps({"input_ids": [[1, 2], [3]]}), "batch"),
        (orjson.dumps({"input_ids": [1, -2]}), "input_ids[1]"),
        (orjson.dumps({"input_ids": [1], "sampling_params": {"max_new_tokens": "5"}}), "max_new_tokens"),
        (orjson.dumps({"input_ids": [7] * 40_000}), "context length"),
    ]

    async def scenario(client):
        out = []
        for raw, _ in cases:
            response = await client.post("/generate", data=raw)
            out.append((response.status, await response.json()))
        return out

    results = serve(["--context-length", "32768"], scenario)
    for (status, body), (_, reason) in zip(results, cases):
        assert status == 400
        assert reason in body["error"]["message"]


def test_api_key_guards_everything_but_health_and_metrics():
    async def scenario(client):
        payload = orjson.dumps({"input_ids": [5, 6, 7], "sampling_params": {"max_new_tokens": 1}})
        no_key = await client.post("/generate", data=payload)
        wrong = await client.get("/server_info", headers={"Authorization": "Bearer nope"})
        right = await client.post("/generate", data=payload, headers={"Authorization": "Bearer s3cret"})
        health = await client.get("/health_generate")
        info = await (await client.get("/server_info", headers={"Authorization": "Bearer s3cret"})).json()
        return no_key.status, wrong.status, right.status, health.status, info["api_key"]

    no_key, wrong, right, health, echoed = serve(["--api-key", "s3cret"], scenario)
    assert (no_key, wrong, right, health) == (401, 401, 200, 200)
    assert echoed != "s3cret"


def test_metrics_use_sglang_names_and_counters_move():
    def sample(text: str, name: str) -> float:
        """The sum over the series of `name` (by is_streaming and cache_source, as SGLang splits them)."""
        lines = [line for line in text.splitlines() if line.startswith(name + "{")]
        assert all('model_name="deepseek-ai/DeepSeek-R1"' in line and 'engine_type="unified"' in line for line in lines)
        return sum(float(line.rsplit(" ", 1)[1]) for line in lines)

    async def scenario(client):
        before = await (await client.get("/metrics")).text()
        payload = {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": 4, "ignore_eos": True}}
        await generate(client, payload)
        await (await client.post("/generate", data=orjson.dumps({**payload, "stream": True}))).read()
        after = await (await client.get("/metrics")).text()
        return before, after

    before, after = serve(["--enable-metrics"], scenario)
    for gauge in ("num_running_reqs", "num_queue_reqs", "token_usage", "gen_throughput"):
        sample(after, f"sglang:{gauge}")
    moved = {
        name: sample(after, f"sglang:{name}") - sample(before, f"sglang:{name}")
        for name in ("prompt_tokens_total", "generation_tokens_total", "cached_tokens_total", "num_requests_total")
    }
    assert moved == {
        "prompt_tokens_total": 1200,
        "generation_tokens_total": 8,
        "cached_tokens_total": 599,
        "num_requests_total": 2,
    }
    assert sample(after, "sglang:time_to_first_token_seconds_count") == 2
    assert sample(after, "sglang:e2e_request_latency_seconds_count") == 2


def test_flush_cache_drops_cached_prefixes():
    async def scenario(client):
        payload = {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": 1}}
        await generate(client, payload)
        flushed = await client.post("/flush_cache")
        _, again = await generate(client, payload)
        return flushed.status, again["meta_info"]["cached_tokens"]

    assert serve([], scenario) == (200, 0)


def test_module_entry_point_prints_its_address_serves_and_stops_on_sigterm():
    command = [sys.executable, "-m", "endpoints.sim", "--host", "127.0.0.1", "--port", "0", *BASE_FLAGS]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline().strip()
        assert line.startswith("costbench-sim listening on http://127.0.0.1:")
        url = line.rsplit(" ", 1)[1]
        with urllib.request.urlopen(f"{url}/health_generate", timeout=10) as response:
            assert response.status == 200
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_bad_flags_exit_2_with_a_message():
    from endpoints.sim import main

    assert main(["--tp", "8", "--speculative-algorithm", "EAGLE3"]) == 2  # a real algorithm the twin does not model
    assert main(["--tp", "8", "--sim-hardware", "h100"]) == 2  # the weights do not fit: says so


def test_costbench_sim_command_forwards_every_flag(capsys):
    import argparse

    from pipelines.commands import sim_command

    parser = argparse.ArgumentParser(prog="costbench")
    sim_command.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["sim", "--port", "0", "--tp", "8", "--no-such-flag"])
    assert args.sim_args == ["--port", "0", "--tp", "8", "--no-such-flag"]
    assert args.func(args) == 2
    assert "--no-such-flag" in capsys.readouterr().err


def test_metrics_carry_sglangs_labels():
    """Tokenizer-manager series: model_name, engine_type, and is_streaming or cache_source where SGLang splits
    them; scheduler series: rank 0's model_name, engine_type, tp_rank, pp_rank, moe_ep_rank."""

    async def scenario(client):
        payload = {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": 4, "ignore_eos": True}}
        await generate(client, payload)
        await generate(client, payload)  # the same prompt again: cached tokens
        await (await client.post("/generate", data=orjson.dumps({**payload, "stream": True}))).read()
        return await (await client.get("/metrics")).text()

    text = serve(["--enable-metrics"], scenario)
    series = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }

    def value(name: str, **labels: str) -> float:
        base = {"model_name": "deepseek-ai/DeepSeek-R1", "engine_type": "unified"}
        return series[(name, tuple(sorted({**base, **labels}.items())))]

    assert value("sglang:num_requests_total", is_streaming="false") == 2
    assert value("sglang:num_requests_total", is_streaming="true") == 1
    assert value("sglang:cached_tokens_total", cache_source="device") > 0
    assert value("sglang:time_to_first_token_seconds_count", is_streaming="true") == 1
    assert value("sglang:num_running_reqs", tp_rank="0", pp_rank="0", moe_ep_rank="0") == 0
