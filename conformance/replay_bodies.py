"""The request bodies the replay clients send, built by the clients' own build_body functions."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable

import numpy as np

from replay.answer_check import AnswerCheck
from replay.clients import openai_chat_client, openai_completions_client, sglang_client
from replay.clients.client_protocol import SendOptions
from replay.prepared_request import PreparedRequest
from workloads.prompts.response_format import parse_response_format

TWIN_FIELD = "sim_reasoning_tokens"  # endpoints.sim.http.generate_request.REASONING_TOKENS_FIELD


def prepared(prompt: str | None, output_tokens: int = 24, reasoning_tokens: int | None = 10) -> PreparedRequest:
    ids = np.arange(100, 164, dtype=np.int32)
    return PreparedRequest("r1", "s1", 1, 0.0, ids, output_tokens, reasoning_tokens=reasoning_tokens, prompt=prompt)


PROMPTS = {
    "token ids only": None,
    "captured text": "Explain the cost of a KV cache miss in two sentences.",
    "captured chat messages": json.dumps(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is prefix caching?"}]
    ),
}


TICKET_SCHEMA = {"type": "object", "properties": {"priority": {"enum": ["low", "high"]}}, "required": ["priority"]}
# Structured requests (docs/replay.md, "Structured output"): {variant: (response_format, constrained)}.
STRUCTURED = {
    "json_schema constrained": (
        {"type": "json_schema", "json_schema": {"name": "ticket", "schema": TICKET_SCHEMA, "strict": True}},
        True,
    ),
    "json_object constrained": ({"type": "json_object"}, True),
    "regex constrained": ({"type": "regex", "regex": "(yes|no)"}, True),
    "json_schema prompt-only": ({"type": "json_schema", "json_schema": {"name": "t", "schema": TICKET_SCHEMA}}, False),
}


def structured(variant: str) -> PreparedRequest:
    """A captured-text request asking for STRUCTURED[variant]'s format."""
    response_format, constrained = STRUCTURED[variant]
    check = AnswerCheck.of(parse_response_format(response_format))
    return dataclasses.replace(prepared(PROMPTS["captured text"]), answer_check=check, constrained=constrained)


def options(to_twin: bool, require_reasoning: bool = True) -> SendOptions:
    return SendOptions(
        base_url="http://127.0.0.1:1", run_id="conformance", request_timeout_s=60.0, model="default",
        require_reasoning=require_reasoning, cache_report=True, sim_reasoning_field=TWIN_FIELD if to_twin else None,
    )  # fmt: skip


def bodies(route: str, to_twin: bool) -> dict[str, dict]:
    """{variant: body} for one route ('generate', 'chat', 'completions')."""
    builders: dict[str, Callable[..., bytes]] = {
        "generate": sglang_client.build_body,
        "chat": openai_chat_client.build_body,
        "completions": openai_completions_client.build_body,
    }
    build = builders[route]
    plain = {name: json.loads(build(prepared(prompt), options(to_twin))) for name, prompt in PROMPTS.items()}
    return {**plain, **{name: json.loads(build(structured(name), options(to_twin))) for name in STRUCTURED}}
