"""The twin's OpenAI routes over real HTTP on 127.0.0.1: chunks, usage, reasoning, errors, field for field."""

import orjson

from twin_virtual import serve

R1_FLAGS = ["--model-path", "deepseek-ai/DeepSeek-R1", "--tp", "8", "--sim-hardware", "b200"]
V3_FLAGS = ["--model-path", "deepseek-ai/DeepSeek-V3", "--tp", "8", "--sim-hardware", "b200"]
MESSAGES = [{"role": "system", "content": "You are terse. " * 40}, {"role": "user", "content": "Count to five."}]


def events(body: str) -> list:
    raw = [e for e in body.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in raw), raw
    assert raw[-1] == "data: [DONE]"
    return [orjson.loads(e[len("data: ") :]) for e in raw[:-1]]


async def post(client, path: str, body: dict):
    response = await client.post(path, data=orjson.dumps(body))
    return response.status, await response.text()


def chat(**extra) -> dict:
    return {"model": "my-model", "messages": MESSAGES, "max_tokens": 12, "ignore_eos": True, **extra}


def test_chat_stream_first_delta_has_role_then_reasoning_then_content_then_finish_then_usage():
    body = chat(stream=True, stream_options={"include_usage": True}, sim_reasoning_tokens=5)

    async def scenario(client):
        return await post(client, "/v1/chat/completions", body)

    status, text = serve(R1_FLAGS + ["--reasoning-parser", "deepseek-r1"], scenario)
    assert status == 200
    chunks = events(text)
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == "my-model" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    first = chunks[0]["choices"][0]
    assert first["delta"]["role"] == "assistant" and first["finish_reason"] is None
    deltas = [c["choices"][0]["delta"] for c in chunks[1:-2]]
    kinds = ["reasoning" if d["reasoning_content"] else "content" for d in deltas]
    assert kinds == sorted(kinds, key=lambda k: k == "content")  # all reasoning before any content
    assert kinds.count("reasoning") == 4  # 5 reasoning tokens, the 5th is `</think>` (not shown)
    assert "</think>" not in "".join(d.get("content") or "" for d in deltas)
    finish = chunks[-2]
    assert finish["choices"][0]["finish_reason"] == "length" and "usage" not in finish
    usage_chunk = chunks[-1]
    assert usage_chunk["choices"] == []
    usage = usage_chunk["usage"]
    assert usage["completion_tokens"] == 12 and usage["reasoning_tokens"] == 5
    assert usage["total_tokens"] == usage["prompt_tokens"] + 12
    assert usage["prompt_tokens_details"] is None  # no --enable-cache-report


def test_chat_stream_without_include_usage_sends_no_usage_chunk():
    async def scenario(client):
        return await post(client, "/v1/chat/completions", chat(stream=True))

    chunks = events(serve(V3_FLAGS, scenario)[1])
    assert all("usage" not in c and c["choices"] for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


def test_server_default_include_usage_flag_adds_the_usage_chunk():
    async def scenario(client):
        return await post(client, "/v1/chat/completions", chat(stream=True))

    chunks = events(serve(V3_FLAGS + ["--stream-response-default-include-usage"], scenario)[1])
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 12


def test_cached_tokens_appear_whenever_cache_report_is_on_zero_included():
    async def scenario(client):
        _, cold = await post(client, "/v1/chat/completions", chat())
        _, warm = await post(client, "/v1/chat/completions", chat())
        return orjson.loads(cold)["usage"], orjson.loads(warm)["usage"]

    cold, warm = serve(V3_FLAGS + ["--enable-cache-report"], scenario)
    assert cold["prompt_tokens_details"] == {"cached_tokens": 0}  # SGLang 0.5.23's UsageProcessor keeps a 0
    assert warm["prompt_tokens_details"]["cached_tokens"] == warm["prompt_tokens"] - 1
    _, plain = serve(V3_FLAGS, scenario)
    assert plain["prompt_tokens_details"] is None


def test_chat_non_streaming_message_splits_reasoning_only_with_the_parser():
    body = chat(sim_reasoning_tokens=4)

    async def scenario(client):
        return orjson.loads((await post(client, "/v1/chat/completions", body))[1])

    parsed = serve(R1_FLAGS + ["--reasoning-parser", "deepseek-r1"], scenario)
    assert parsed["object"] == "chat.completion"
    message = parsed["choices"][0]["message"]
    assert message["role"] == "assistant" and message["reasoning_content"] and message["content"]
    assert parsed["usage"]["reasoning_tokens"] == 4
    raw = serve(R1_FLAGS, scenario)
    assert raw["choices"][0]["message"]["reasoning_content"] is None
    assert "</think>" in raw["choices"][0]["message"]["content"]
    assert raw["usage"]["reasoning_tokens"] == 0  # SGLang counts reasoning only with a parser


def test_r1_without_a_count_reasons_for_a_profile_share_and_v3_never_reasons():
    body = chat(max_tokens=200, sim_reasoning_tokens=None)
    flags = ["--reasoning-parser", "deepseek-r1"]

    async def scenario(client):
        return orjson.loads((await post(client, "/v1/chat/completions", body))[1])["usage"]

    r1 = serve(R1_FLAGS + flags, scenario)
    assert 0.4 * 200 <= r1["reasoning_tokens"] <= 0.9 * 200
    assert serve(V3_FLAGS + flags, scenario)["reasoning_tokens"] == 0


def test_completions_stream_text_chunks_and_default_max_tokens():
    async def scenario(client):
        streamed = await post(
            client,
            "/v1/completions",
            {
                "prompt": "Once upon a time " * 20,
                "stream": True,
                "ignore_eos": True,
                "stream_options": {"include_usage": True},
            },
        )
        whole = await post(client, "/v1/completions", {"prompt": list(range(5, 400)), "ignore_eos": True})
        return streamed, whole

    (status, text), (_, whole) = serve(V3_FLAGS, scenario)
    chunks = events(text)
    assert status == 200 and all(c["object"] == "text_completion" for c in chunks)
    texts = [c["choices"][0]["text"] for c in chunks[:-1]]
    assert len(texts) == 16  # SGLang's completions default max_tokens
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["usage"]["completion_tokens"] == 16
    body = orjson.loads(whole)
    assert body["object"] == "text_completion" and body["choices"][0]["text"]
    assert body["usage"]["prompt_tokens"] == 395 and body["usage"]["completion_tokens"] == 16


def test_stop_without_ignore_eos_reports_stop_and_matched_stop():
    async def scenario(client):
        return orjson.loads((await post(client, "/v1/chat/completions", {"messages": MESSAGES, "max_tokens": 64}))[1])

    choice = serve(V3_FLAGS, scenario)["choices"][0]
    assert choice["finish_reason"] in ("stop", "length")
    if choice["finish_reason"] == "stop":
        assert choice["matched_stop"] == 1  # DeepSeek's EOS id


def test_openai_errors_use_sglang_error_response():
    cases = [
        ("/v1/chat/completions", {"messages": []}, "messages"),
        ("/v1/chat/completions", {"messages": MESSAGES, "max_tokens": -1}, "max_tokens"),
        ("/v1/chat/completions", {"messages": MESSAGES, "n": 2}, "n > 1"),
        ("/v1/completions", {"prompt": ""}, "prompt"),
        ("/v1/completions", {"prompt": "x", "sim_reasoning_tokens": "many"}, "sim_reasoning_tokens"),
        ("/v1/completions", {"prompt": [5] * 40_000}, "context length"),
    ]

    async def scenario(client):
        return [(await client.post(path, data=orjson.dumps(body))) for path, body, _ in cases]

    async def run(client):
        out = []
        for response in await scenario(client):
            out.append((response.status, await response.json()))
        return out

    for (status, body), (_, _, reason) in zip(serve(V3_FLAGS + ["--context-length", "32768"], run), cases):
        assert status == 400
        assert body["object"] == "error" and body["code"] == 400 and body["type"] == "BadRequestError"
        assert reason in body["message"]


def test_chunks_and_answers_take_sglangs_shapes():
    """What SGLang 0.5.23 writes (build_sse_content, UsageProcessor, build_endpoint_weight_version_metadata):
    a chat delta always has reasoning_content and has role/content only when set; reasoning tokens are also
    under completion_tokens_details; whole answers carry metadata.weight_version."""

    async def scenario(client):
        _, streamed = await post(
            client, "/v1/chat/completions", chat(stream=True, max_tokens=6, sim_reasoning_tokens=3)
        )
        _, whole = await post(client, "/v1/chat/completions", chat(max_tokens=6, sim_reasoning_tokens=3))
        return events(streamed), orjson.loads(whole)

    chunks, whole = serve(R1_FLAGS + ["--reasoning-parser", "deepseek-r1"], scenario)
    first, reasoning, *_ = (c["choices"][0]["delta"] for c in chunks)
    assert first == {"reasoning_content": None, "role": "assistant", "content": ""}
    assert set(reasoning) == {"reasoning_content"} and reasoning["reasoning_content"]
    assert whole["metadata"] == {"weight_version": "default"}
    assert "tool_calls" not in whole["choices"][0]["message"]
    assert whole["usage"]["reasoning_tokens"] == 3 and whole["usage"]["completion_tokens_details"] == {
        "reasoning_tokens": 3
    }


def test_a_failed_request_carries_sglangs_error_types():
    """An abort with status 500: the stream's error event is create_streaming_error_response's (type: the
    status's name), a whole answer's body http_server's HTTPException handler's (type: the status code)."""

    async def scenario(client):
        _, streamed = await post(client, "/v1/chat/completions", chat(stream=True))
        status, whole = await post(client, "/v1/chat/completions", chat())
        return events(streamed), status, orjson.loads(whole)

    streamed, status, whole = serve(V3_FLAGS + ["--fault-error-rate", "1"], scenario)
    (error,) = [c["error"] for c in streamed if "error" in c]
    assert (error["object"], error["type"], error["code"]) == ("error", "INTERNAL_SERVER_ERROR", 500)
    assert status == 500 and (whole["type"], whole["code"]) == ("500", 500)
