"""Parse and validate a native /generate body into the engine's GenerateInput.

Errors are messages a client can act on (field and reason), returned as HTTP 400 like SGLang's.
Only single requests are supported; a batch (a list of prompts) is rejected by name. The checks
shared with the OpenAI routes (token ids, numbers, the twin's reasoning extension) live here too.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import overload

import orjson

from endpoints.sim import toy_tokenizer
from endpoints.sim.bad_request import BadRequest
from endpoints.sim.engine.sim_request import GenerateInput

DEFAULT_MAX_NEW_TOKENS = 128  # SGLang's native default
# Twin-only extension, top level in every body: how many reasoning tokens (including `</think>`)
# an R1 profile emits before the answer. Real SGLang ignores unknown fields.
REASONING_TOKENS_FIELD = "sim_reasoning_tokens"


@dataclass(frozen=True, slots=True)
class NativeRequest:
    spec: GenerateInput
    require_reasoning: bool  # report reasoning_tokens (SGLang counts them only when asked)


def token_ids(value: object, vocab_size: int, field: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise BadRequest(f"{field} must be a non-empty list of token ids")
    if isinstance(value[0], list):
        raise BadRequest(f"batch input (a list of {field} lists) is not supported by the twin; send one request each")
    ids = tuple(value)
    # Whole-list checks run in C; only a bad list pays for finding the culprit. orjson writes a list of plain
    # non-negative ints as digits and commas alone: a negative, float, bool, null, string or nested value writes
    # another byte, and an int subclass or one past 64 bits does not write. (The value is parsed JSON: no enums.)
    try:
        written = orjson.dumps(value, option=orjson.OPT_PASSTHROUGH_SUBCLASS)
    except orjson.JSONEncodeError:
        written = b""
    if written.translate(None, b"0123456789,") != b"[]" or max(ids) >= vocab_size:
        i, t = next((i, t) for i, t in enumerate(ids) if type(t) is not int or not 0 <= t < vocab_size)
        raise BadRequest(f"{field}[{i}] = {t!r} is not a token id in [0, {vocab_size})")
    return ids


@overload
def count(value: object, field: str, default: int) -> int: ...
@overload
def count(value: object, field: str, default: None) -> int | None: ...
def count(value: object, field: str, default: int | None) -> int | None:
    """A non-negative integer field, or its default when absent or null."""
    if value is None:
        return default
    if type(value) is not int or value < 0:
        raise BadRequest(f"{field} must be a non-negative integer, got {value!r}")
    return value


def flag(value: object, field: str, default: bool) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise BadRequest(f"{field} must be true or false, got {value!r}")
    return value


def temperature(value: object, field: str) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
        raise BadRequest(f"{field} must be a non-negative number, got {value!r}")


def stop(value: object, field: str) -> None:
    """Stop strings are accepted; the twin's made-up words never contain them, so they never match."""
    if value is None or isinstance(value, str):
        return
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise BadRequest(f"{field} must be a string or a list of strings, got {value!r}")


def rid(value: object) -> str:
    if value is not None and not isinstance(value, str):
        raise BadRequest(f"rid must be a string, got {value!r}")
    return value or uuid.uuid4().hex


def parse_generate(body: object, vocab_size: int) -> NativeRequest:
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    has_text, has_ids = body.get("text") is not None, body.get("input_ids") is not None
    if body.get("input_embeds") is not None:
        raise BadRequest("input_embeds is not supported by the twin; send input_ids or text")
    if has_text == has_ids:
        raise BadRequest("Either text or input_ids should be provided (exactly one).")
    if has_ids:
        input_ids = token_ids(body["input_ids"], vocab_size, "input_ids")
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
    temperature(params.get("temperature"), "sampling_params.temperature")
    stop(params.get("stop"), "sampling_params.stop")
    spec = GenerateInput(
        rid=rid(body.get("rid")),
        input_ids=input_ids,
        max_new_tokens=count(params.get("max_new_tokens"), "sampling_params.max_new_tokens", DEFAULT_MAX_NEW_TOKENS),
        ignore_eos=flag(params.get("ignore_eos"), "sampling_params.ignore_eos", False),
        stream=flag(body.get("stream"), "stream", False),
        reasoning_tokens=count(body.get(REASONING_TOKENS_FIELD), REASONING_TOKENS_FIELD, None),
    )
    return NativeRequest(spec, flag(body.get("require_reasoning"), "require_reasoning", False))
