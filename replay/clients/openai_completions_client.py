"""OpenAI-compatible `POST /v1/completions` client, streamed, usage requested.

Sends the captured prompt text when the trace kept it, else text built from the materialized ids
(prompt_text.py). Output length: `max_tokens` with `ignore_eos`. A prompt-only structured request
appends its schema to the prompt.
"""

from __future__ import annotations

import aiohttp
import orjson

from replay.clients.client_protocol import SendOptions
from replay.clients.openai_stream import prompt_marker, sampling_fields, send_openai
from replay.clients.prompt_text import completion_prompt
from replay.clock import Clock
from replay.prepared_request import PreparedRequest
from replay.recording.records import RequestRecord

COMPLETIONS_PATH = "/v1/completions"


def build_body(request: PreparedRequest, options: SendOptions) -> bytes:
    body = {
        "prompt": completion_prompt(request.prompt, request.input_ids) + prompt_marker(request),
        "max_tokens": request.output_tokens,
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
    return await send_openai(
        COMPLETIONS_PATH, build_body(request, options), False, request, session, clock, t0_s, options
    )
