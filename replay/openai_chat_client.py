"""OpenAI-compatible `POST /v1/chat/completions` client, streamed, usage requested.

Sends the captured chat messages when the trace kept them, else one user turn of text built from
the materialized ids (prompt_text.py). Output length: `max_completion_tokens` with `ignore_eos`.
Reasoning (`delta.reasoning_content`) counts as output for the first token; the first answer token
is the first `delta.content`.
"""

from __future__ import annotations

import aiohttp
import orjson

from replay.client_protocol import SendOptions
from replay.clock import Clock
from replay.openai_stream import sampling_fields, send_openai
from replay.prepared_request import PreparedRequest
from replay.prompt_text import chat_messages
from replay.records import RequestRecord

CHAT_PATH = "/v1/chat/completions"


def build_body(request: PreparedRequest, options: SendOptions) -> bytes:
    body = {
        "messages": chat_messages(request.prompt, request.input_ids),
        "max_completion_tokens": request.output_tokens,
        **sampling_fields(request, options),
    }
    return orjson.dumps(body)


async def send(
    request: PreparedRequest,
    session: aiohttp.ClientSession,
    clock: Clock,
    t0_s: float,
    options: SendOptions,
) -> RequestRecord:
    return await send_openai(CHAT_PATH, build_body(request, options), True, request, session, clock, t0_s, options)
