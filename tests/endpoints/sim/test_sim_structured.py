"""Structured output on the twin over real HTTP on 127.0.0.1 (steps on a virtual clock): answers that conform,
exact lengths, the reasoning boundary, SGLang's errors, prompt-only failures, and what the grammar costs."""

from __future__ import annotations

import asyncio
import json
import re

import orjson
import pytest
from jsonschema import Draft202012Validator

from endpoints.sim.cost.cost_model import GRAMMAR_COSTS
from endpoints.sim.server_args import ServerArgsError, parse_server_args
from endpoints.sim.structured.output_constraint import PROMPT_REGEX_MARKER, PROMPT_SCHEMA_MARKER
from twin_virtual import serve

R1 = ["--model-path", "deepseek-ai/DeepSeek-R1", "--tp", "8", "--sim-hardware", "h200"]
R1_PARSED = [*R1, "--reasoning-parser", "deepseek-r1"]
TICKET = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "minLength": 3, "maxLength": 40},
        "priority": {"enum": ["low", "medium", "high"]},
        "estimate_h": {"type": "number", "exclusiveMinimum": 0.5, "maximum": 0.75},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "minItems": 2, "maxItems": 4},
        "owner": {"$ref": "#/$defs/person"},
        "status": {"anyOf": [{"type": "null"}, {"const": "open"}]},
        "code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{3}$"},
        "kind": {"oneOf": [{"type": "integer", "minimum": 10}, {"type": "boolean"}]},
    },
    "required": ["title", "priority", "estimate_h", "tags", "owner", "status", "code", "kind"],
    "additionalProperties": False,
    "$defs": {
        "person": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 18, "maximum": 99}},
            "required": ["name", "age"],
        }
    },
}
SCHEMAS = {
    "ticket": TICKET,
    "list": {"type": "array", "items": {"type": "integer", "minimum": -3, "maximum": -1}, "minItems": 3},
    "string": {"type": "string", "minLength": 5},
    "open object": {"type": "object"},
    "tuple and formats": {
        "type": "object",
        "properties": {
            "point": {
                "type": "array",
                "prefixItems": [{"type": "integer", "exclusiveMinimum": 3}, {"type": "boolean"}],
                "minItems": 2,
            },
            "at": {"type": "string", "format": "date-time"},
            "id": {"type": "string", "format": "uuid"},
            "note": {"type": ["null", "string"]},
        },
        "required": ["point", "at", "id", "note"],
    },  # fmt: skip
    "nested list of objects": {
        "type": "array",
        "minItems": 2,
        "maxItems": 2,
        "items": {
            "type": "object",
            "required": ["k", "v"],
            "additionalProperties": {"type": "number", "maximum": -2.5},
        },
    },
    "min properties": {
        "type": "object",
        "properties": {"a": {"const": 1}, "b": {"type": "string"}},
        "minProperties": 2,
    },
}


def events(body: str) -> list[dict]:
    raw = [e for e in body.split("\n\n") if e]
    assert raw[-1] == "data: [DONE]", raw[-3:]
    return [orjson.loads(e.removeprefix("data: ")) for e in raw[:-1]]


async def post(client, path: str, body: dict) -> tuple[int, str]:
    response = await client.post(path, data=orjson.dumps(body))
    return response.status, await response.text()


def chat(schema: dict, **extra) -> dict:
    response_format = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": True}}
    messages = [{"role": "user", "content": "File a ticket for the flaky test."}]
    return {"model": "r1", "messages": messages, "max_tokens": 120, "ignore_eos": True, "response_format": response_format,
            "sim_reasoning_tokens": 20, **extra}  # fmt: skip


def chat_answer(status: int, text: str, stream: bool) -> tuple[str, str, dict, str]:
    """(reasoning, content, usage, finish_reason) of a chat answer, streamed or whole."""
    assert status == 200, text
    if not stream:
        body = orjson.loads(text)
        message = body["choices"][0]["message"]
        return (
            message["reasoning_content"] or "",
            message["content"],
            body["usage"],
            body["choices"][0]["finish_reason"],
        )
    chunks = events(text)
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    reasoning = "".join(d.get("reasoning_content") or "" for d in deltas)
    content = "".join(d.get("content") or "" for d in deltas)
    finish = next(c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"])
    return reasoning, content, chunks[-1]["usage"], finish


@pytest.mark.parametrize("stream", [False, True])
def test_r1_chat_reasons_first_then_answers_json_that_validates_in_exactly_max_tokens(stream):
    async def scenario(client):
        extra = {"stream": True, "stream_options": {"include_usage": True}} if stream else {}
        return [await post(client, "/v1/chat/completions", chat(schema, **extra)) for schema in SCHEMAS.values()]

    for (name, schema), (status, text) in zip(SCHEMAS.items(), serve(R1_PARSED, scenario)):
        reasoning, content, usage, finish = chat_answer(status, text, stream)
        Draft202012Validator(schema).validate(json.loads(content))  # the answer conforms
        assert reasoning.strip() and "</think>" not in reasoning + content, name  # free-form reasoning came first
        assert (usage["completion_tokens"], usage["reasoning_tokens"], finish) == (120, 20, "length"), name


def test_json_object_and_completions_fields_constrain_too():
    async def scenario(client):
        object_ = await post(client, "/v1/chat/completions", chat({}, response_format={"type": "json_object"}))
        field = {"model": "r1", "prompt": "Ticket:", "max_tokens": 40, "ignore_eos": True,
                 "json_schema": json.dumps(SCHEMAS["list"])}  # fmt: skip
        completion = await post(client, "/v1/completions", field)
        regex = await post(client, "/v1/completions", {**field, "json_schema": None, "regex": r"(yes|no): [0-9]{2,}"})
        return object_, completion, regex

    object_, completion, regex = serve(R1_PARSED, scenario)
    assert isinstance(json.loads(chat_answer(*object_, stream=False)[1]), dict)
    text = orjson.loads(completion[1])["choices"][0]["text"]
    Draft202012Validator(SCHEMAS["list"]).validate(json.loads(text))  # completions: grammar from the first token
    answer = orjson.loads(regex[1])
    assert re.fullmatch(r"(yes|no): [0-9]{2,}", answer["choices"][0]["text"])
    assert answer["usage"]["completion_tokens"] == 40


@pytest.mark.parametrize("stream", [False, True])
def test_native_generate_defers_the_grammar_to_after_reasoning_only_with_require_reasoning(stream):
    params = {"max_new_tokens": 90, "ignore_eos": True, "json_schema": json.dumps(TICKET)}
    body = {"text": "File a ticket.", "sampling_params": params, "stream": stream, "sim_reasoning_tokens": 30}

    async def scenario(client):
        deferred = await post(client, "/generate", {**body, "require_reasoning": True})
        from_start = await post(client, "/generate", body)
        return deferred, from_start

    results = []
    for status, text in serve(R1_PARSED, scenario):
        assert status == 200, text
        results.append(events(text)[-1] if stream else orjson.loads(text))
    deferred, from_start = results
    reasoning, answer = deferred["text"].split("</think>")
    assert reasoning.strip() and deferred["meta_info"]["reasoning_tokens"] == 30
    Draft202012Validator(TICKET).validate(json.loads(answer))
    # SGLang's reasoner grammar starts at token 0 when reasoning is not required: no reasoning at all.
    Draft202012Validator(TICKET).validate(json.loads(from_start["text"]))
    for out in (deferred, from_start):
        assert out["meta_info"]["completion_tokens"] == 90 and out["meta_info"]["finish_reason"]["type"] == "length"


def test_without_the_reasoning_parser_the_grammar_constrains_from_the_first_token():
    async def scenario(client):
        return await post(client, "/v1/chat/completions", chat(TICKET))

    _, content, usage, _ = chat_answer(*serve(R1, scenario), stream=False)
    Draft202012Validator(TICKET).validate(json.loads(content))
    assert usage["reasoning_tokens"] == 0 and usage["completion_tokens"] == 120


def test_lengths_follow_the_budget_cut_when_too_small_and_stop_when_the_grammar_ends():
    async def scenario(client):
        tiny = await post(client, "/v1/chat/completions", chat(TICKET, max_tokens=25))
        free = await post(client, "/v1/chat/completions", chat(TICKET, ignore_eos=False, max_tokens=400))
        fixed = await post(client, "/v1/chat/completions", chat({"enum": ["yes", "no"]}))
        return tiny, free, fixed

    tiny, free, fixed = serve(R1_PARSED, scenario)
    _, content, usage, finish = chat_answer(*tiny, stream=False)
    assert finish == "length" and usage["completion_tokens"] == 25  # SGLang stops at max_tokens: the JSON is cut
    with pytest.raises(json.JSONDecodeError):
        json.loads(content)
    _, content, usage, finish = chat_answer(*free, stream=False)
    assert finish == "stop" and usage["completion_tokens"] <= 400  # without ignore_eos it ends with EOS
    Draft202012Validator(TICKET).validate(json.loads(content))
    _, content, usage, finish = chat_answer(*fixed, stream=False)
    # A grammar that has terminated finishes the request, ignore_eos or not.
    assert (json.loads(content), finish) == ("yes", "stop") and usage["completion_tokens"] < 120


def test_bad_constraints_get_sglangs_errors_whole_and_streamed():
    bad = chat({}, response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object",
                "properties": {"n": {"type": "integer", "multipleOf": 3}}}}})  # fmt: skip
    native = {"text": "x", "sampling_params": {"max_new_tokens": 8, "json_schema": "{not json"}}

    async def scenario(client):
        return (
            await post(client, "/v1/chat/completions", bad),
            await post(client, "/v1/chat/completions", {**bad, "stream": True}),
            await post(client, "/generate", native),
            await post(client, "/generate", {**native, "stream": True}),
            await post(client, "/v1/chat/completions", chat(TICKET, regex="[a-z]+")),
            await post(client, "/generate", {**native, "sampling_params": {"json_schema": {"type": "object"}}}),
            await post(client, "/generate", {**native, "sampling_params": {"ebnf": 'root ::= "yes" | "no"'}}),
            await post(
                client,
                "/v1/chat/completions",
                chat({}, response_format={"type": "json_schema", "json_schema": {"schema": TICKET}}),
            ),  # fmt: skip
        )

    chat_whole, chat_stream, gen_whole, gen_stream, two, not_string, ebnf, nameless = serve(R1_PARSED, scenario)
    keyword = "Failed to compile json grammar: JSON Schema at #/properties/n is not supported by xgrammar: "
    assert chat_whole[0] == 400
    assert orjson.loads(chat_whole[1]) == {"object": "error", "message": keyword + "keyword(s) multipleOf would be "
                                           "ignored", "type": "BadRequestError", "param": None, "code": 400}  # fmt: skip
    assert chat_stream[0] == 200
    (event,) = events(chat_stream[1])
    assert event["error"]["type"] == "BAD_REQUEST" and event["error"]["message"].startswith(keyword)
    decode_error = "Failed to compile json grammar: Expecting property name enclosed in double quotes: line 1 column 2"
    assert gen_whole[0] == 400 and orjson.loads(gen_whole[1])["error"]["message"].startswith(decode_error)
    (chunk,) = events(gen_stream[1])
    assert chunk["meta_info"]["finish_reason"]["type"] == "abort"
    assert chunk["meta_info"]["finish_reason"]["status_code"] == 400
    assert chunk["meta_info"]["finish_reason"]["message"].startswith(decode_error)
    assert two[0] == 400 and "Only one of json_schema, regex, ebnf, or structural_tag" in two[1]
    assert not_string[0] == 400 and "expected a string" in not_string[1]
    assert nameless[0] == 400 and "json_schema.name is required" in nameless[1]  # SGLang's model requires it
    # What the twin cannot answer correctly it refuses, saying so, rather than send a wrong answer.
    assert ebnf[0] == 400 and orjson.loads(ebnf[1])["error"]["message"].startswith(
        "The twin cannot write an answer for this ebnf"
    )


def test_grammar_backend_none_refuses_constrained_requests_and_the_flag_takes_sglangs_choices():
    async def scenario(client):
        refused = await post(client, "/v1/chat/completions", chat(TICKET))
        info = orjson.loads((await post(client, "/v1/chat/completions", chat(TICKET, response_format=None)))[1])
        server_info = await (await client.get("/server_info")).json()
        return refused, info, server_info

    refused, plain, server_info = serve([*R1_PARSED, "--grammar-backend", "none"], scenario)
    assert refused[0] == 400
    assert orjson.loads(refused[1])["message"].startswith("Grammar-based generation (json_schema, regex, ebnf, struc")
    assert plain["usage"]["completion_tokens"] == 120 and server_info["grammar_backend"] == "none"
    assert parse_server_args([]).grammar_backend == "xgrammar"  # SGLang resolves the unset flag to xgrammar
    with pytest.raises(ServerArgsError):
        parse_server_args(["--grammar-backend", "guidance"])
    with pytest.raises(ServerArgsError, match="--sim-unconstrained-failure-rate"):
        parse_server_args(["--sim-unconstrained-failure-rate", "1.5"])


def test_prompt_only_schemas_fail_at_the_configured_rate_deterministically():
    n = 300

    def body(i: int, kind: str) -> dict:
        tail = PROMPT_SCHEMA_MARKER + json.dumps(TICKET, separators=(",", ":"))
        if kind == "regex":
            tail = PROMPT_REGEX_MARKER + "[A-Z]{3}-[0-9]+"
        messages = [{"role": "user", "content": f"Ticket {i}: the build broke." + tail}]
        return {"model": "r1", "messages": messages, "max_tokens": 120, "ignore_eos": True, "sim_reasoning_tokens": 10}

    async def scenario(client):
        answers = await asyncio.gather(*(post(client, "/v1/chat/completions", body(i, "json")) for i in range(n)))
        again = await post(client, "/v1/chat/completions", body(7, "json"))
        regex = await post(client, "/v1/chat/completions", body(1, "regex"))
        return answers, again, regex

    def valid(text: str) -> bool:
        content = chat_answer(200, text, stream=False)[1]
        try:
            return Draft202012Validator(TICKET).is_valid(json.loads(content))
        except json.JSONDecodeError:
            return False

    answers, again, _ = serve([*R1_PARSED, "--sim-unconstrained-failure-rate", "0.2"], scenario)
    failed = [i for i, (status, text) in enumerate(answers) if not valid(text)]
    assert 0.13 * n <= len(failed) <= 0.27 * n  # binomial(300, 0.2): mean 60, sd 7
    assert chat_answer(*again, stream=False)[1] == chat_answer(*answers[7], stream=False)[1]  # same prompt, same draw
    assert all(orjson.loads(t)["usage"]["completion_tokens"] == 120 for _, t in answers)  # lengths exact either way
    answers, _, regex = serve([*R1_PARSED, "--sim-unconstrained-failure-rate", "0"], scenario)
    assert all(valid(text) for _, text in answers[:50])
    assert re.fullmatch(r"[A-Z]{3}-[0-9]+", chat_answer(*regex, stream=False)[1].rstrip("\n"))


async def first_and_last_token_s(client, body: dict) -> tuple[float, float, float]:
    """(sent, first token, last token) on the loop's (virtual) clock, for a streamed native request."""
    loop = asyncio.get_running_loop()
    sent = loop.time()
    response = await client.post("/generate", data=orjson.dumps({**body, "stream": True}))
    first = last = None
    async for line in response.content:
        if line.startswith(b"data: {"):
            first = first or loop.time()
            last = loop.time()
    assert first is not None and last is not None
    return sent, first, last


def native(schema: dict | None, tokens: int = 64, text: str = "Summarize the incident.") -> dict:
    params = {"max_new_tokens": tokens, "ignore_eos": True}
    if schema is not None:
        params["json_schema"] = json.dumps(schema)
    return {"text": text, "sampling_params": params}


def test_a_new_schema_pays_its_compile_once_then_hits_the_cache():
    other = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}

    async def scenario(client):
        ttft = []
        for schema in (TICKET, TICKET, other, None, "flush", TICKET):
            if schema == "flush":
                assert (await client.post("/flush_cache")).status == 200
                continue
            sent, first, _ = await first_and_last_token_s(client, native(schema, text=f"Incident {len(ttft)}."))
            ttft.append(first - sent)
        return ttft

    cold, warm, other_cold, plain, flushed = serve(R1_PARSED, scenario)
    compile_s = GRAMMAR_COSTS["xgrammar"].compile_s
    assert cold >= compile_s and other_cold >= compile_s  # each new schema compiles once
    assert warm < compile_s / 5 and abs(warm - plain) < 0.01  # the cached grammar costs no time to first token
    assert flushed >= compile_s  # /flush_cache empties the grammar cache, as SGLang's does


def test_constrained_decode_steps_cost_more_than_unconstrained_ones():
    async def tpot_s(client, schema: dict | None) -> float:
        await first_and_last_token_s(client, native(schema, tokens=4, text="warm"))  # compile outside the measure
        runs = await asyncio.gather(
            *(first_and_last_token_s(client, native(schema, 200, f"Request {i}.")) for i in range(16))
        )
        return sum((last - first) / 199 for _, first, last in runs) / len(runs)

    async def scenario(client):
        return await tpot_s(client, TICKET), await tpot_s(client, None)

    constrained, unconstrained = serve(R1_PARSED, scenario)
    mask_s = GRAMMAR_COSTS["xgrammar"].mask_s_per_token
    assert constrained > unconstrained and constrained - unconstrained < 16 * mask_s * 1.5  # 16 masks a step, at most


def test_metrics_count_structured_requests_under_sglangs_names():
    async def scenario(client):
        await post(client, "/v1/chat/completions", chat(TICKET, max_tokens=30))
        await post(client, "/v1/chat/completions", chat(TICKET, max_tokens=30, response_format=None))
        return await (await client.get("/metrics")).text()

    text = serve([*R1_PARSED, "--enable-metrics"], scenario)
    assert 'sglang:num_so_requests_total{engine_type="unified",model_name="deepseek-ai/DeepSeek-R1"} 1.0' in text
    assert "sglang:num_grammar_queue_reqs{" in text
