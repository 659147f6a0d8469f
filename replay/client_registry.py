"""Which `send` function speaks which API. Add a backend: one client module, one Enum member, one entry."""

from __future__ import annotations

from enum import Enum

from replay import sglang_client
from replay.client_protocol import SendFunction


class Backend(str, Enum):
    SGLANG = "sglang"  # native POST /generate with input_ids


CLIENTS: dict[Backend, SendFunction] = {
    Backend.SGLANG: sglang_client.send,
}


def client_for(backend: Backend) -> SendFunction:
    return CLIENTS[backend]
