"""Parse and validate a native /generate body into the engine's GenerateInput.

Errors are messages a client can act on (field and reason), returned as HTTP 400 like SGLang's.
Only single requests are supported; a batch (a list of prompts) is rejected by name.
"""

from __future__ import annotations

import uuid

from endpoints.sim import toy_tokenizer
from endpoints.sim.sim_request import GenerateInput

DEFAULT_MAX_NEW_TOKENS = 128  # SGLang's native default


class BadRequest(ValueError):
    pass


def _int_ids(value: object, vocab_size: int) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise BadRequest("input_ids must be a non-empty list of token ids")
    if isinstance(value[0], list):
        raise BadRequest("batch input (a list of input_ids lists) is not supported by the twin; send one request each")
    ids = tuple(value)
    # Whole-list checks run in C; only a bad list pays for finding the culprit.
    if set(map(type, ids)) != {int} or min(ids) < 0 or max(ids) >= vocab_size:
        i, t = next((i, t) for i, t in enumerate(ids) if type(t) is not int or not 0 <= t < vocab_size)
        raise BadRequest(f"input_ids[{i}] = {t!r} is not a token id in [0, {vocab_size})")
    return ids


def parse_generate(body: object, vocab_size: int) -> GenerateInput:
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    has_text, has_ids = body.get("text") is not None, body.get("input_ids") is not None
    if body.get("input_embeds") is not None:
        raise BadRequest("input_embeds is not supported by the twin; send input_ids or text")
    if has_text == has_ids:
        raise BadRequest("Either text or input_ids should be provided (exactly one).")
    if has_ids:
        input_ids = _int_ids(body["input_ids"], vocab_size)
    else:
        text = body["text"]
        if isinstance(text, list):
            raise BadRequest("batch input (a list of texts) is not supported by the twin; send one request each")
        if not isinstance(text, str) or not text:
            raise BadRequest("text must be a non-empty string")
        input_ids = toy_tokenizer.encode(text, vocab_size)

    params = body.get("sampling_params") or {}
    if not isinstance(params, dict):
        raise BadRequest("sampling_params must be a JSON object")
    max_new = params.get("max_new_tokens")
    max_new = DEFAULT_MAX_NEW_TOKENS if max_new is None else max_new
    if type(max_new) is not int or max_new < 0:
        raise BadRequest(f"sampling_params.max_new_tokens must be a non-negative integer, got {max_new!r}")
    ignore_eos = params.get("ignore_eos", False)
    if not isinstance(ignore_eos, bool):
        raise BadRequest(f"sampling_params.ignore_eos must be true or false, got {ignore_eos!r}")
    temperature = params.get("temperature", 1.0)
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or temperature < 0:
        raise BadRequest(f"sampling_params.temperature must be a non-negative number, got {temperature!r}")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise BadRequest(f"stream must be true or false, got {stream!r}")
    rid = body.get("rid")
    if rid is not None and not isinstance(rid, str):
        raise BadRequest(f"rid must be a string, got {rid!r}")
    return GenerateInput(
        rid=rid or uuid.uuid4().hex,
        input_ids=input_ids,
        max_new_tokens=max_new,
        ignore_eos=ignore_eos,
        stream=stream,
    )
