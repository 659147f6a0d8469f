"""Parse and validate /v1/chat/completions and /v1/completions bodies (SGLang's OpenAI protocol).

Prompts become token ids through the twin's stand-in tokenizer (chat messages through a stand-in
template); `input_ids` (chat) and token-id prompts (completions) are taken as they are. Length
defaults follow SGLang: chat has no limit (the context bounds it), completions default to 16.
"""

from __future__ import annotations

from dataclasses import dataclass

from endpoints.sim import toy_tokenizer
from endpoints.sim.bad_request import BadRequest
from endpoints.sim.engine.sim_request import GenerateInput
from endpoints.sim.http.generate_request import (
    REASONING_TOKENS_FIELD,
    count,
    flag,
    rid,
    stop,
    temperature,
    token_ids,
)

COMPLETIONS_DEFAULT_MAX_TOKENS = 16  # SGLang's CompletionRequest default


@dataclass(frozen=True, slots=True)
class OpenAIRequest:
    spec: GenerateInput
    model: str  # echoed back in every chunk, as SGLang does (it is not checked)
    include_usage: bool  # stream_options.include_usage (or the server default)
    continuous_usage: bool  # stream_options.continuous_usage_stats: usage on every chunk
    separate_reasoning: bool  # chat only: reasoning_content apart from content


def _stream_options(body: dict) -> dict:
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise BadRequest("stream_options must be a JSON object")
    return options


def _message_text(message: object, i: int) -> tuple[str, str]:
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        raise BadRequest(f"messages[{i}] must be an object with a string role")
    content = message.get("content")
    if content is None:
        return message["role"], ""
    if isinstance(content, str):
        return message["role"], content
    if isinstance(content, list):  # content parts: only the text ones matter here
        return message["role"], "".join(p.get("text", "") for p in content if isinstance(p, dict))
    raise BadRequest(f"messages[{i}].content must be a string or a list of content parts")


def _common(body: dict, input_ids: tuple[int, ...], max_tokens: int, default_usage: bool) -> dict:
    temperature(body.get("temperature"), "temperature")
    stop(body.get("stop"), "stop")
    if body.get("n", 1) not in (1, None):
        raise BadRequest("n > 1 is not supported by the twin; send one request per choice")
    options = _stream_options(body)
    stream = flag(body.get("stream"), "stream", False)
    return {
        "spec": GenerateInput(
            rid=rid(body.get("rid")),
            input_ids=input_ids,
            max_new_tokens=max_tokens,
            ignore_eos=flag(body.get("ignore_eos"), "ignore_eos", False),
            stream=stream,
            reasoning_tokens=count(body.get(REASONING_TOKENS_FIELD), REASONING_TOKENS_FIELD, None),
        ),
        "model": body.get("model") if isinstance(body.get("model"), str) else "default",
        "include_usage": flag(options.get("include_usage"), "stream_options.include_usage", default_usage),
        "continuous_usage": flag(options.get("continuous_usage_stats"), "stream_options.continuous_usage_stats", False),
    }


def parse_chat(
    body: object, vocab_size: int, unlimited_tokens: int, thinking: bool, default_usage: bool
) -> OpenAIRequest:
    """`unlimited_tokens` stands for "no max_tokens" (SGLang then runs to the context length)."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    if body.get("input_ids") is not None:
        input_ids = token_ids(body["input_ids"], vocab_size, "input_ids")
    else:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise BadRequest("messages must be a non-empty list")
        turns = [_message_text(m, i) for i, m in enumerate(messages)]
        input_ids = toy_tokenizer.encode(toy_tokenizer.render_chat(turns, thinking), vocab_size)
    max_tokens = count(body.get("max_completion_tokens"), "max_completion_tokens", None)
    if max_tokens is None:
        max_tokens = count(body.get("max_tokens"), "max_tokens", unlimited_tokens)
    common = _common(body, input_ids, max_tokens, default_usage)
    return OpenAIRequest(**common, separate_reasoning=flag(body.get("separate_reasoning"), "separate_reasoning", True))


def parse_completion(body: object, vocab_size: int, default_usage: bool) -> OpenAIRequest:
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    prompt = body.get("prompt")
    if isinstance(prompt, str) and prompt:
        input_ids = toy_tokenizer.encode(prompt, vocab_size)
    elif isinstance(prompt, list) and prompt and isinstance(prompt[0], int):
        input_ids = token_ids(prompt, vocab_size, "prompt")
    elif isinstance(prompt, list) and prompt:
        raise BadRequest("batch prompts (a list of prompts) are not supported by the twin; send one request each")
    else:
        raise BadRequest("prompt must be a non-empty string or a list of token ids")
    max_tokens = count(body.get("max_tokens"), "max_tokens", COMPLETIONS_DEFAULT_MAX_TOKENS)
    return OpenAIRequest(**_common(body, input_ids, max_tokens, default_usage), separate_reasoning=False)
