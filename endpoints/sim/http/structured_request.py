"""A parsed request plus its response format: what the engine is asked to write, or SGLang's abort.

A constraint sent to the server (output_constraint.py) is compiled by the grammar backend and enforced:
the answer conforms, after the reasoning when SGLang's reasoner grammar defers it (chat with
--reasoning-parser deepseek-r1; native /generate only with `require_reasoning: true`), from the first
output token otherwise (then there is no reasoning at all). Without one, a schema at the end of the prompt
text is followed as a model follows instructions: not always (--sim-unconstrained-failure-rate, drawn per
request from its prompt and its rid when the client sent one).

A constraint the backend refuses aborts the request as SGLang's scheduler does (`set_finish_with_abort`,
status 400): a whole answer becomes the route's 400 error; a stream answers 200 and then, native, one chunk
whose finish_reason is the abort, or, OpenAI, an error event; then `data: [DONE]`.
"""

from __future__ import annotations

import zlib
from dataclasses import replace

import orjson

from endpoints.sim.engine.sim_request import GenerateInput, prompt_seed
from endpoints.sim.http.native_view import WEIGHT_VERSION
from endpoints.sim.structured.grammar_backend import GrammarBackend
from endpoints.sim.structured.output_constraint import OutputConstraint, prompt_schema
from endpoints.sim.structured.structured_answer import AnswerAsk, draw_failure

ABORT_ERR_TYPE = "BadRequestError"  # Req.set_finish_with_abort's default err_type (status 400)


def prompt_text(body: dict, chat: bool) -> str | None:
    """The prompt text a prompt-only schema would end: native `text`, completions `prompt`, chat's last
    message (text parts joined)."""
    if not chat:
        text = body.get("text", body.get("prompt"))
        return text if isinstance(text, str) else None
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
        return None
    content = messages[-1].get("content")
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return content if isinstance(content, str) else None


def with_answer(
    spec: GenerateInput,
    constraint: OutputConstraint | None,
    text: str | None,
    after_reasoning: bool,
    grammar: GrammarBackend,
    failure_rate: float,
    client_rid: object,
) -> GenerateInput:
    """`spec` with its answer format; raises GrammarError when the constraint cannot be used."""
    if constraint is not None:
        skeleton = grammar.compile(constraint)
        ask = AnswerAsk(skeleton, enforced=True, after_reasoning=after_reasoning)
        return replace(spec, answer=ask, grammar_key=constraint.key)
    asked = prompt_schema(text)
    if asked is None:
        return spec
    prompted = grammar.prompt_skeleton(asked.constraint)
    if prompted is None:
        return spec  # a schema the twin cannot write to: the answer stays free-form
    seed = prompt_seed(spec.input_ids)
    if isinstance(client_rid, str) and client_rid:
        seed = zlib.crc32(client_rid.encode(), seed)
    truncatable = prompted.text[:1] in ("{", "[", '"')  # cutting a number or literal may leave valid JSON
    failure = draw_failure(failure_rate, seed, truncatable)
    return replace(spec, answer=AnswerAsk(prompted, enforced=False, after_reasoning=True, failure=failure))


def native_abort_chunk(rid: str, prompt_tokens: int, message: str) -> bytes:
    """The one chunk SGLang streams for a request its scheduler aborted before any output."""
    meta = {
        "id": rid,
        "finish_reason": {"type": "abort", "message": message, "status_code": 400, "err_type": ABORT_ERR_TYPE},
        "prompt_tokens": prompt_tokens,
        "completion_tokens": 0,
        "cached_tokens": 0,
        "reasoning_tokens": 0,
        "weight_version": WEIGHT_VERSION,
        "num_retractions": 0,
        "e2e_latency": 0.0,
    }
    return b"data: " + orjson.dumps({"text": "", "output_ids": [], "meta_info": meta}) + b"\n\n"
