"""The twin's structured output against SGLang's own code (docs/twin.md, "Structured output").

Reading: for the same chat bodies, SGLang's ChatCompletionRequest.to_sampling_params yields the constraint
(json_schema text, regex) the twin keys its grammar on, and SamplingParams.verify refuses two at once with
the message the twin sends. Refusing: the twin's xgrammar check says what SGLang's
validate_xgrammar_json_schema says, schema by schema. Answering: the twin's constrained R1 answers, raw
(`separate_reasoning: false`) through SGLang's DeepSeek-R1 ReasoningParser, split where the twin splits them,
and the answer after `</think>` is JSON that validates; a streamed abort decodes as SGLang's GenerateResponse.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from sglang.api.v1.api_types import GenerateResponse
from sglang.srt.constrained.json_schema_validation import UnsupportedJSONSchemaFeature, validate_xgrammar_json_schema
from sglang.srt.entrypoints.openai.protocol import ChatCompletionRequest
from sglang.srt.parser.reasoning_parser import ReasoningParser
from sglang.srt.sampling.sampling_params import SamplingParams
from twin_http import json_events, post_json, post_sse

from endpoints.sim.structured.grammar_backend import xgrammar_refusal
from endpoints.sim.structured.output_constraint import MULTIPLE_CONSTRAINTS, from_openai_body

PATH = "/v1/chat/completions"
SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": 30},
        "severity": {"enum": ["low", "high"]},
        "steps": {"type": "array", "items": {"type": "string"}, "minItems": 1},
    },
    "required": ["title", "severity", "steps"],
}
RESPONSE_FORMATS: dict[str, dict[str, Any]] = {
    "json_schema": {"type": "json_schema", "json_schema": {"name": "ticket", "schema": SCHEMA, "strict": True}},
    "json_object": {"type": "json_object"},
}
REFUSAL_CASES = [
    SCHEMA,
    {"type": "integer", "multipleOf": 2},
    {"type": "object", "properties": {"a": {"not": {"type": "null"}}}},
    {"type": "string", "format": "color"},
    {"type": "string", "pattern": "^a", "maxLength": 3},
    {"$defs": {"x": {"type": "array", "uniqueItems": True}}, "$ref": "#/$defs/x"},
    {"anyOf": [{"type": "string", "format": "email"}, {"if": {"type": "string"}}]},
]


def body(response_format: dict, stream: bool = False, separate: bool = True, **extra) -> dict:
    return {
        "model": "default", "messages": [{"role": "user", "content": "Report the outage."}], "max_tokens": 60,
        "ignore_eos": True, "sim_reasoning_tokens": 12, "response_format": response_format, "stream": stream,
        "separate_reasoning": separate, **extra,
    }  # fmt: skip


def test_the_constraint_the_twin_keys_on_is_the_one_sglang_reads(record_property):
    problems = []
    for name, response_format in RESPONSE_FORMATS.items():
        request = ChatCompletionRequest.model_validate(body(response_format))
        sglang = request.to_sampling_params(stop=[], model_generation_config={})["json_schema"]
        twin = from_openai_body(body(response_format), completions=False)
        if twin is None or twin.text != sglang:
            problems.append(f"{name}: twin keys {twin}, SGLang reads {sglang!r}")
    two = ChatCompletionRequest.model_validate(body(RESPONSE_FORMATS["json_schema"], regex="(a|b)"))
    try:
        SamplingParams(**two.to_sampling_params(stop=[], model_generation_config={})).verify(129280)
        problems.append("SGLang accepted two constraints")
    except ValueError as exc:
        if str(exc) != MULTIPLE_CONSTRAINTS:
            problems.append(f"two constraints: SGLang says {exc}, the twin {MULTIPLE_CONSTRAINTS}")
    record_property("checked", f"{len(RESPONSE_FORMATS)} response formats to json_schema; two constraints refused")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("schema", REFUSAL_CASES, ids=range(len(REFUSAL_CASES)))
def test_the_twins_xgrammar_refusals_are_sglangs(schema, record_property):
    try:
        validate_xgrammar_json_schema(schema)
        theirs = None
    except UnsupportedJSONSchemaFeature as exc:
        theirs = str(exc)
    record_property("checked", f"refusal: {theirs or 'none'}")
    assert xgrammar_refusal(schema) == theirs


@pytest.mark.parametrize("stream", [False, True])
def test_constrained_answers_split_where_sglangs_parser_splits_and_validate(stream, twin_r1, record_property):
    problems = []
    for name, response_format in RESPONSE_FORMATS.items():
        if stream:
            raw_deltas = [e["choices"][0]["delta"] for e in json_events(post_sse(
                twin_r1.base_url, PATH, body(response_format, True, False))) if e["choices"]]  # fmt: skip
            split_deltas = [e["choices"][0]["delta"] for e in json_events(post_sse(
                twin_r1.base_url, PATH, body(response_format, True, True))) if e["choices"]]  # fmt: skip
            parser = ReasoningParser(model_type="deepseek-r1", stream_reasoning=True)
            theirs_r, theirs_c = "", ""
            for delta in raw_deltas:
                if delta.get("content"):
                    reasoning, normal = parser.parse_stream_chunk(delta["content"])
                    theirs_r, theirs_c = theirs_r + (reasoning or ""), theirs_c + (normal or "")
            ours_r = "".join(d.get("reasoning_content") or "" for d in split_deltas)
            ours_c = "".join(d.get("content") or "" for d in split_deltas)
        else:
            _, raw = post_json(twin_r1.base_url, PATH, body(response_format, False, False))
            _, split = post_json(twin_r1.base_url, PATH, body(response_format, False, True))
            theirs_r, theirs_c = ReasoningParser(model_type="deepseek-r1").parse_non_stream(
                raw["choices"][0]["message"]["content"]
            )
            message = split["choices"][0]["message"]
            ours_r, ours_c = message["reasoning_content"], message["content"]
        if (ours_r, ours_c) != (theirs_r, theirs_c):
            problems.append(f"{name}: twin {(ours_r, ours_c)}, SGLang {(theirs_r, theirs_c)}")
        schema = response_format.get("json_schema", {}).get("schema", {"type": "object"})
        errors = [e.message for e in Draft202012Validator(schema).iter_errors(json.loads(theirs_c))]
        if errors or not theirs_r:
            problems.append(f"{name}: reasoning {theirs_r!r}, answer errors {errors}")
    record_property("checked", f"{len(RESPONSE_FORMATS)} formats {'streamed' if stream else 'whole'}: split, valid")
    assert not problems, "\n".join(problems)


def test_a_streamed_grammar_abort_decodes_as_sglangs_generate_response(twin_r1, record_property):
    request = {"text": "x", "stream": True, "sampling_params": {"max_new_tokens": 8, "json_schema": "{nope"}}
    chunks = json_events(post_sse(twin_r1.base_url, "/generate", request))
    assert len(chunks) == 1
    decoded = GenerateResponse.from_json_value(chunks[0])
    reason = chunks[0]["meta_info"]["finish_reason"]
    record_property("checked", f"abort chunk: {reason['message'][:60]}")
    assert decoded.meta_info is not None and reason["type"] == "abort" and reason["status_code"] == 400
