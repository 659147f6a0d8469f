"""The OpenAI routes against SGLang's own protocol models (sglang.srt.entrypoints.openai.protocol) and the
code that writes its wire format: build_sse_content (chat stream chunks), pydantic's model_dump_json of
the response models (whole answers, usage chunks, completion chunks), UsageProcessor (usage from counts).

Requests: every body the replay clients build validates as ChatCompletionRequest / CompletionRequest, keeps
the length, greedy sampling, ignore_eos and usage request it means to send, and carries no field SGLang
would drop (only the twin-only reasoning-length field, and only to the twin).
Responses: every chunk and body the twin sends over loopback HTTP is what SGLang's code would write for the
same values, field for field.
"""

from __future__ import annotations

import json
from http import HTTPStatus

import pytest
from replay_bodies import TWIN_FIELD, bodies
from sglang.srt.entrypoints.openai.protocol import (
    ChatCompletionRequest,
    ChatCompletionResponse,
    ChatCompletionStreamResponse,
    CompletionRequest,
    CompletionResponse,
    CompletionStreamResponse,
    ErrorResponse,
    UsageInfo,
)
from sglang.srt.entrypoints.openai.sse_utils import build_sse_content
from sglang.srt.entrypoints.openai.usage_processor import UsageProcessor
from sglang.srt.utils.weight_versions import build_endpoint_weight_version_metadata
from twin_http import json_events, post_json, post_sse

REQUEST_MODELS = {"chat": ChatCompletionRequest, "completions": CompletionRequest}
PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}


def _fields(model) -> set[str]:
    return set(model.model_fields) | {f.alias for f in model.model_fields.values() if f.alias}


@pytest.mark.parametrize("route", ["chat", "completions"])
def test_every_request_the_replay_clients_send_validates_and_nothing_in_it_is_dropped(route, record_property):
    model = REQUEST_MODELS[route]
    problems, n = [], 0
    for to_twin in (False, True):
        for variant, body in bodies(route, to_twin).items():
            n += 1
            request = model.model_validate(body)
            length = request.max_completion_tokens if route == "chat" else request.max_tokens
            if (length, request.ignore_eos, request.stream, request.temperature) != (24, True, True, 0):
                problems.append(f"{variant}: length/ignore_eos/stream/temperature read as {length}, ...")
            if request.stream_options is None or not request.stream_options.include_usage:
                problems.append(f"{variant}: stream_options.include_usage not read")
            dropped = set(body) - _fields(model)
            expected = {TWIN_FIELD} if to_twin else set()
            if dropped != expected:
                problems.append(f"{variant} (to the twin: {to_twin}): fields SGLang ignores: {sorted(dropped)}")
    record_property("checked", f"{n} bodies from replay's build_body (3 prompt kinds, real server and twin)")
    assert not problems, report(problems)


def _usage_from_counts(usage: dict, cache_report: bool) -> dict:
    """The usage SGLang's UsageProcessor writes for the twin's own counts."""
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
    meta = {
        "prompt_tokens": usage["prompt_tokens"],
        "completion_tokens": usage["completion_tokens"],
        "reasoning_tokens": usage["reasoning_tokens"],
        "cached_tokens": cached,
    }
    info = UsageProcessor.calculate_response_usage([{"meta_info": meta}], 1, enable_cache_report=cache_report)
    return json.loads(info.model_dump_json())


def _chat_chunk_as_sglang_writes_it(chunk: dict) -> dict:
    choice = chunk["choices"][0]
    delta = choice["delta"]
    return json.loads(
        build_sse_content(
            chunk_id=chunk["id"], created=chunk["created"], model=chunk["model"], index=choice["index"],
            role=delta.get("role"), content=delta.get("content"), reasoning_content=delta.get("reasoning_content"),
            finish_reason=choice["finish_reason"], logprobs=choice["logprobs"], matched_stop=choice["matched_stop"],
            usage=chunk.get("usage"),
        ).removeprefix("data: ")
    )  # fmt: skip


def report(problems: list[str], shown: int = 3) -> str:
    more = f"\n... and {len(problems) - shown} more" if len(problems) > shown else ""
    return f"{len(problems)} differences:\n" + "\n".join(problems[:shown]) + more


def _same(twin: dict, sglang: dict, what: str, problems: list[str]) -> None:
    if twin != sglang:
        problems.append(f"{what}: the twin sent {json.dumps(twin)}\n   SGLang writes {json.dumps(sglang)}")


def _stream(server, route: str, extra: dict) -> list[dict]:
    body = {**bodies(route, to_twin=True)["token ids only"], **extra}
    return json_events(post_sse(server.base_url, PATHS[route], body))


def test_chat_stream_chunks_are_what_sglang_writes_reasoning_and_usage_included(twin_r1, record_property):
    problems: list[str] = []
    events = _stream(twin_r1, "chat", {})
    *chunks, usage_chunk = events
    for i, chunk in enumerate(chunks):
        ChatCompletionStreamResponse.model_validate(chunk)
        _same(chunk, _chat_chunk_as_sglang_writes_it(chunk), f"chunk {i}", problems)
    deltas = [c["choices"][0]["delta"] for c in chunks]
    reasoning = "".join(d.get("reasoning_content") or "" for d in deltas)
    answer = "".join(d.get("content") or "" for d in deltas)
    if deltas[0].get("role") != "assistant" or not reasoning or not answer:
        problems.append(f"role/reasoning/answer missing: {deltas[0]}, {len(reasoning)}, {len(answer)} chars")
    if chunks[-1]["choices"][0]["finish_reason"] != "length":
        problems.append(f"last chunk's finish_reason: {chunks[-1]['choices'][0]['finish_reason']}")
    ChatCompletionStreamResponse.model_validate(usage_chunk)
    usage = usage_chunk["usage"]
    expected = ChatCompletionStreamResponse(
        id=usage_chunk["id"], created=usage_chunk["created"], choices=[], model=usage_chunk["model"],
        usage=UsageInfo.model_validate(_usage_from_counts(usage, cache_report=True)),
    )  # fmt: skip
    _same(usage_chunk, json.loads(expected.model_dump_json()), "usage chunk", problems)
    if (usage["completion_tokens"], usage["reasoning_tokens"]) != (24, 10):
        problems.append(f"usage counts: {usage}")
    record_property("checked", f"{len(events)} chunks vs build_sse_content / model_dump_json, UsageProcessor")
    assert not problems, report(problems)


def test_chat_stream_with_continuous_usage_and_without_reasoning_split(twin_r1, twin_v3, record_property):
    problems: list[str] = []
    n = 0
    for server, extra in (
        (twin_r1, {"stream_options": {"include_usage": True, "continuous_usage_stats": True}}),
        (twin_r1, {"separate_reasoning": False}),
        (twin_v3, {}),
    ):
        events = _stream(server, "chat", extra)
        for i, chunk in enumerate(events[:-1]):
            n += 1
            ChatCompletionStreamResponse.model_validate(chunk)
            _same(chunk, _chat_chunk_as_sglang_writes_it(chunk), f"{server.flags[1]} {extra} chunk {i}", problems)
        if extra.get("separate_reasoning") is False or server is twin_v3:
            if any(c["choices"][0]["delta"].get("reasoning_content") for c in events[:-1]):
                problems.append(f"{server.flags[1]} {extra}: reasoning_content without a split")
    record_property("checked", f"{n} chunks: continuous usage, separate_reasoning false, V3 (no reasoning)")
    assert not problems, report(problems)


def test_completion_stream_chunks_are_what_sglang_writes(twin_r1, record_property):
    problems: list[str] = []
    events = _stream(twin_r1, "completions", {})
    *chunks, usage_chunk = events
    for i, chunk in enumerate(chunks):
        model = CompletionStreamResponse.model_validate(chunk)
        _same(chunk, json.loads(model.model_dump_json()), f"chunk {i}", problems)
    usage = UsageInfo.model_validate(_usage_from_counts(usage_chunk["usage"], cache_report=True))
    expected = CompletionStreamResponse(
        id=usage_chunk["id"], created=usage_chunk["created"], choices=[], model=usage_chunk["model"], usage=usage
    )
    _same(usage_chunk, json.loads(expected.model_dump_json(exclude_none=True)), "usage chunk", problems)
    record_property("checked", f"{len(events)} chunks vs CompletionStreamResponse.model_dump_json, usage chunk")
    assert not problems, report(problems)


@pytest.mark.parametrize("route", ["chat", "completions"])
def test_whole_answers_are_what_sglang_writes(route, twin_r1, record_property):
    model = {"chat": ChatCompletionResponse, "completions": CompletionResponse}[route]
    body = {**bodies(route, to_twin=True)["captured text"], "stream": False}
    body.pop("stream_options")
    status, answer = post_json(twin_r1.base_url, PATHS[route], body)
    assert status == 200, answer
    problems: list[str] = []
    validated = model.model_validate(answer)
    _same(answer, json.loads(validated.model_dump_json(by_alias=True)), f"{route} answer", problems)
    _same(answer["usage"], _usage_from_counts(answer["usage"], cache_report=True), "usage", problems)
    metadata = build_endpoint_weight_version_metadata({"weight_version": "default"})
    if answer.get("metadata") != metadata:
        problems.append(f"metadata {answer.get('metadata')}, SGLang sends {metadata}")
    if route == "chat":
        message = answer["choices"][0]["message"]
        if not message.get("reasoning_content") or not message.get("content"):
            problems.append(f"reasoning or answer missing: {message}")
    record_property("checked", f"{model.__name__} round trip (model_dump_json by_alias), UsageProcessor usage")
    assert not problems, report(problems)


@pytest.mark.parametrize("route", ["chat", "completions"])
def test_errors_are_sglangs_error_response(route, twin_r1, record_property):
    status, answer = post_json(twin_r1.base_url, PATHS[route], {"model": "default", "max_tokens": 4})
    assert status == 400
    validated = ErrorResponse.model_validate(answer)
    assert answer == json.loads(validated.model_dump_json()), answer
    assert (answer["type"], answer["code"]) == ("BadRequestError", 400)
    record_property("checked", "400 body as ErrorResponse")


def test_a_failed_request_is_reported_as_sglang_reports_it(twin_failing, record_property):
    """An abort with status 500: in a stream, create_streaming_error_response's event (type: the status's
    name) then [DONE]; without one, http_server's HTTPException handler's body (type: the status code)."""
    problems = []
    body = {**bodies("chat", to_twin=True)["captured text"]}
    payloads = post_sse(twin_failing.base_url, PATHS["chat"], body)
    errors = [json.loads(p)["error"] for p in payloads[:-1] if "error" in json.loads(p)]
    if payloads[-1] != "[DONE]" or len(errors) != 1:
        problems.append(f"the stream ended {payloads[-1]!r} with {len(errors)} error events")
    for error in errors:
        expected = ErrorResponse(message=error["message"], type=HTTPStatus(500).name, code=500).model_dump()
        _same(error, expected, "stream error event", problems)
    status, answer = post_json(twin_failing.base_url, PATHS["chat"], {**body, "stream": False})
    expected = ErrorResponse(message=answer.get("message", ""), type="500", code=500).model_dump()
    if status != 500:
        problems.append(f"a failed whole answer has status {status}")
    _same(answer, expected, "error body", problems)
    record_property("checked", "stream error event and 500 body as ErrorResponse, with SGLang's type for each")
    assert not problems, report(problems)
