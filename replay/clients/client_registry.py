"""Which `send` function speaks which API. Add a backend: one client module, one Enum member, one entry."""

from __future__ import annotations

from enum import Enum

from replay.clients import openai_chat_client, openai_completions_client, sglang_client
from replay.clients.client_protocol import SendFunction


class Backend(str, Enum):
    SGLANG = "sglang"  # native POST /generate with input_ids: exact tokens
    OPENAI_CHAT = "openai-chat"  # POST /v1/chat/completions with text messages
    OPENAI_COMPLETIONS = "openai-completions"  # POST /v1/completions with a text prompt


CLIENTS: dict[Backend, SendFunction] = {
    Backend.SGLANG: sglang_client.send,
    Backend.OPENAI_CHAT: openai_chat_client.send,
    Backend.OPENAI_COMPLETIONS: openai_completions_client.send,
}


def client_for(backend: Backend) -> SendFunction:
    return CLIENTS[backend]
