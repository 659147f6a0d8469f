"""Prefill/decode disaggregation, SGLang's way: a request runs its prefill on one server and its decode on another.

SGLang's router sends the same body to a prefill and a decode server, with the prefill's bootstrap host, port and a
random room number. The decode server first pre-allocates the prompt's KV in its own pool (its prealloc queue:
a request waits there while the pool cannot hold it beside what the running requests keep in reserve) and tells
the prefill it is ready; the prefill server keeps the request in its bootstrap queue until then, prefills it
(its radix cache is the one that hits), samples the first token and sends the KV over the link (its inflight
queue); the decode server's transfer queue holds the request until the KV has arrived, then it decodes.

In the twin the two servers meet on the prefill's bootstrap port (bootstrap_rooms.py serves it). The transfer takes
what its bytes take over the link: the model's KV bytes per token x the prompt's tokens / the link's bandwidth, plus
a fixed per-transfer latency (`KvLink`); the prefill keeps the request's slot until then (its scheduler's
`inflight`). Not modelled: a decode-side radix cache (SGLang's is off by default), the prefill's KV held while it
is sent (freed when the first token is sampled), and the retraction backup (a retracted decode request is prefilled
again on the decode server).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

# SGLang's choices (arg_groups/choices.py DISAGG_TRANSFER_BACKEND_CHOICES, 0.5.23); the twin's link is the same for all.
TRANSFER_BACKENDS = ("mooncake", "nixl", "ascend", "fake", "mori")
DEFAULT_BOOTSTRAP_PORT = 8998  # SGLang's --disaggregation-bootstrap-port default
DEFAULT_RESERVED_DECODE_TOKENS = 512  # SGLang's --num-reserved-decode-tokens default


class DisaggregationMode(StrEnum):
    NULL = "null"
    PREFILL = "prefill"
    DECODE = "decode"

    @property
    def engine_type(self) -> str:
        """The engine_type label of the server's metrics (SGLang's DisaggregationMode.to_engine_type)."""
        return "unified" if self is DisaggregationMode.NULL else self.value


@dataclass(frozen=True, slots=True)
class Bootstrap:
    """Where a disaggregated request's prefill meets its decode: the fields the router adds to the body."""

    host: str
    port: int
    room: int


@dataclass(frozen=True, slots=True)
class KvLink:
    """The link the KV crosses from a prefill GPU to a decode GPU (each TP rank sends its own copy on its own NIC)."""

    gb_per_s: float  # per GPU, decimal GB/s
    latency_s: float  # per transfer: the handshake and the completion notice

    def transfer_s(self, kv_bytes: int) -> float:
        return self.latency_s + kv_bytes / (self.gb_per_s * 1e9)


@dataclass(frozen=True, slots=True)
class RoomDone:
    """What a prefill tells its decode once the KV has arrived there."""

    cached_tokens: int  # the prompt tokens the prefill's radix cache held (what the client is told)
    kv_bytes: int
    transfer_s: float
    # The prefill's parts of the request's TTFT (ttft_parts.py), as durations on its own clock: its waiting queue
    # (bootstrap done to the first forward batch) and its prefill (to the first token sampled).
    prefill_queue_s: float
    prefill_forward_s: float


class PrefillPeer(Protocol):
    """The decode server's side of the bootstrap: tell the prefill it is ready, then wait for the KV."""

    async def ready(self, bootstrap: Bootstrap) -> None: ...

    async def done(self, bootstrap: Bootstrap) -> RoomDone: ...


@dataclass(frozen=True, slots=True)
class Disaggregation:
    """A server's role and what it needs for it."""

    mode: DisaggregationMode
    link: KvLink
    kv_bytes_per_token: int  # per GPU: what one TP rank holds (and sends) for one token
    reserved_decode_tokens: int = DEFAULT_RESERVED_DECODE_TOKENS


class BootstrapRooms:
    """A prefill server's rooms: which decode servers are ready, and the KV each is waiting for.

    Either side may come first (the router sends both bodies at once), so a room is made on first touch; it is
    forgotten once its decode has read the outcome."""

    def __init__(self) -> None:
        self._ready: dict[int, asyncio.Event] = {}
        self._done: dict[int, asyncio.Future[RoomDone]] = {}

    def _ready_event(self, room: int) -> asyncio.Event:
        return self._ready.setdefault(room, asyncio.Event())

    def _done_future(self, room: int) -> asyncio.Future[RoomDone]:
        if room not in self._done:
            self._done[room] = asyncio.get_running_loop().create_future()
        return self._done[room]

    def mark_ready(self, room: int) -> None:
        self._ready_event(room).set()

    async def wait_ready(self, room: int) -> None:
        await self._ready_event(room).wait()

    def finish(self, room: int, outcome: RoomDone) -> None:
        future = self._done_future(room)
        if not future.done():
            future.set_result(outcome)

    def fail(self, room: int, message: str) -> None:
        future = self._done_future(room)
        if not future.done():
            future.set_exception(TransferFailed(message))

    async def wait_done(self, room: int) -> RoomDone:
        try:
            return await asyncio.shield(self._done_future(room))
        finally:
            if self._done[room].done():
                self._done.pop(room, None)
                self._ready.pop(room, None)


class TransferFailed(RuntimeError):
    """The prefill could not send a room's KV (it aborted the request, or its server went away)."""


class LocalPrefillPeer:
    """A decode engine's way to prefill engines in the same process (the virtual clock's fleets, tests): the
    prefills' rooms by bootstrap port, no HTTP between them."""

    def __init__(self, rooms_by_port: dict[int, BootstrapRooms]) -> None:
        self._rooms = rooms_by_port

    def _of(self, bootstrap: Bootstrap) -> BootstrapRooms:
        rooms = self._rooms.get(bootstrap.port)
        if rooms is None:
            raise TransferFailed(f"no prefill server has bootstrap port {bootstrap.port}")
        return rooms

    async def ready(self, bootstrap: Bootstrap) -> None:
        self._of(bootstrap).mark_ready(bootstrap.room)

    async def done(self, bootstrap: Bootstrap) -> RoomDone:
        return await self._of(bootstrap).wait_done(bootstrap.room)
