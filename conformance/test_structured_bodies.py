"""Structured requests against SGLang's own request code: the constraint the replay sends is the one SGLang
reads (docs/replay.md, "Structured output").

Native: every structured body passes the HTTP contract gate, parses as GenerateReqInput and yields
SamplingParams that verify (one constraint at most) holding the schema (a JSON string) or the regex; a
prompt-only body sends text and no constraint. OpenAI: ChatCompletionRequest / CompletionRequest read the
response_format (json_schema with its schema, json_object) or SGLang's extra `regex` as sent.
"""

from __future__ import annotations

import json

import orjson
import pytest
from pydantic import TypeAdapter
from replay_bodies import STRUCTURED, TICKET_SCHEMA, bodies, options, structured
from sglang.srt.entrypoints.api_contract import generate_contract_error
from sglang.srt.entrypoints.openai.protocol import ChatCompletionRequest, CompletionRequest
from sglang.srt.managers.io_struct import GenerateReqInput
from sglang.srt.sampling.sampling_params import SamplingParams

from replay.clients import sglang_client

VOCAB_SIZE = 129280  # DeepSeek-V3/R1
# What SGLang reads from each variant: (json_schema as an object, regex); None: not set.
MEANT = {
    "json_schema constrained": (TICKET_SCHEMA, None),
    "json_object constrained": ({"type": "object"}, None),
    "regex constrained": (None, "(yes|no)"),
    "json_schema prompt-only": (None, None),
}


def test_native_structured_bodies_carry_the_constraint_sglang_reads(record_property):
    problems = []
    for variant in STRUCTURED:
        body = orjson.loads(sglang_client.build_body(structured(variant), options(to_twin=False)))
        if (error := generate_contract_error(body)) is not None:
            problems.append(f"{variant}: contract gate: {error}")
            continue
        request = TypeAdapter(GenerateReqInput).validate_python(body)
        request.normalize_batch_and_arguments()
        sampling = SamplingParams(**request.sampling_params)
        sampling.normalize(None)
        sampling.verify(VOCAB_SIZE)
        read = (json.loads(sampling.json_schema) if sampling.json_schema else None, sampling.regex)
        if read != MEANT[variant]:
            problems.append(f"{variant}: SGLang reads (json_schema, regex) = {read}, meant {MEANT[variant]}")
        prompt_only = not STRUCTURED[variant][1]
        if prompt_only != (request.text is not None and request.input_ids is None):
            problems.append(f"{variant}: text/input_ids read as {request.text!r:.40}, {request.input_ids!r:.40}")
    record_property("checked", f"{len(STRUCTURED)} structured /generate bodies: contract gate, SamplingParams")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("route", ["chat", "completions"])
def test_openai_structured_bodies_are_read_with_their_constraint(route, record_property):
    model = {"chat": ChatCompletionRequest, "completions": CompletionRequest}[route]
    problems = []
    for to_twin in (False, True):
        sent = bodies(route, to_twin)
        for variant, (schema, regex) in MEANT.items():
            request = model.model_validate(sent[variant])
            response_format = request.response_format
            read_schema = None
            if response_format is not None and response_format.type == "json_schema":
                read_schema = response_format.json_schema.schema_
            elif response_format is not None and response_format.type == "json_object":
                read_schema = {"type": "object"}  # what SGLang's adapters turn json_object into
            if (read_schema, request.regex) != (schema, regex):
                problems.append(f"{variant}: read as ({read_schema}, {request.regex}), meant ({schema}, {regex})")
    record_property("checked", f"{2 * len(MEANT)} structured {route} bodies (real server and twin)")
    assert not problems, "\n".join(problems)
