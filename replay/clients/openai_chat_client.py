"""OpenAI-compatible `POST /v1/chat/completions` client, streamed, usage requested.

Sends the captured chat messages when the trace kept them, else one user turn of text built from
the materialized ids (prompt_text.py). Output length: `max_completion_tokens` with `ignore_eos`.
Reasoning (`delta.reasoning_content`) counts as output for the first token; the first answer token
is the first `delta.content`. A prompt-only structured request appends its schema to the last user turn.
"""

from __future__ import annotations

import aiohttp
import orjson

from replay.clients.client_protocol import SendOptions
from replay.clients.openai_stream import prompt_marker, sampling_fields, send_openai
from replay.clients.prompt_text import chat_messages
from replay.clock import Clock
from replay.prepared_request import PreparedRequest
from replay.recording.records import RequestRecord

CHAT_PATH = "/v1/chat/completions"


def build_body(request: PreparedRequest, options: SendOptions) -> bytes:
    messages = chat_messages(request.prompt, request.input_ids)
    marker = prompt_marker(request)
    if marker:
        messages = _with_marker(messages, marker)
    body = {
        "messages": messages,
        "max_completion_tokens": request.output_tokens,
        **sampling_fields(request, options),
    }
    return orjson.dumps(body)


def _with_marker(messages: list[dict], marker: str) -> list[dict]:
    """`messages` with `marker` at the end of the last user turn (a new user turn when there is none)."""
    for at in range(len(messages) - 1, -1, -1):
        message = messages[at]
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = [*content, {"type": "text", "text": marker}]
        else:
            content = f"{content or ''}{marker}"
        return [*messages[:at], {**message, "content": content}, *messages[at + 1 :]]
    return [*messages, {"role": "user", "content": marker.lstrip()}]


async def send(
    request: PreparedRequest,
    session: aiohttp.ClientSession,
    clock: Clock,
    t0_s: float,
    options: SendOptions,
) -> RequestRecord:
    return await send_openai(CHAT_PATH, build_body(request, options), True, request, session, clock, t0_s, options)
