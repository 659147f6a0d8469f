"""What every backend client is: one `send` coroutine per API, all with this signature (STYLE.md 5)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

import aiohttp

from common.exchange import Exchange
from replay.clock import Clock
from replay.prepared_request import PreparedRequest
from replay.recording.records import RequestRecord


@dataclass(frozen=True, slots=True)
class SendOptions:
    """Per-run settings every send needs; built once before t0."""

    base_url: str  # scheme://host:port, no trailing slash
    run_id: str
    request_timeout_s: float
    # Extra HTTP headers, e.g. Authorization. Kept out of repr so a logged config never shows a key.
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    model: str = "default"  # OpenAI `model`; SGLang ignores it, other OpenAI-compatible servers do not
    require_reasoning: bool = False  # native /generate: ask SGLang to count reasoning tokens (R1)
    # The server runs with --enable-cache-report (its /server_info says so). SGLang then omits
    # usage.prompt_tokens_details when nothing was cached, so on the OpenAI APIs its absence means 0.
    cache_report: bool = False
    # The twin's body field for how many reasoning tokens to emit; set only when the endpoint is the
    # twin and the field is known, so a real server never receives it.
    sim_reasoning_field: str | None = None
    # A twin served on the replay's own virtual clock answers its generation routes in-process (common/exchange.py).
    exchange: Exchange | None = field(default=None, repr=False)


class SendFunction(Protocol):
    async def __call__(
        self,
        request: PreparedRequest,
        session: aiohttp.ClientSession,
        clock: Clock,
        t0_s: float,
        options: SendOptions,
    ) -> RequestRecord:
        """Send one request and return its record; failures are recorded, never raised.

        Record times are `clock.now_s() - t0_s`. Only cancellation propagates.
        """
        ...
