"""A request inside the twin: what was asked, its progress, and the updates it streams out.

Output tokens are deterministic: ids come from a seed taken from the prompt, so the same prompt
always yields the same answer (and the radix tree sees the same sequence). Without ignore_eos a
request stops early at a prompt-determined length, ending with the EOS id, as a model would.
"""

from __future__ import annotations

import asyncio
import zlib
from array import array
from dataclasses import dataclass

from endpoints.sim.radix_cache import RadixNode

_FIRST_ORDINARY_ID = 3  # 0-2 are BOS/EOS/PAD in DeepSeek's vocabulary
_ID_STRIDE = 2_654_435_761  # Knuth's multiplicative hash constant: spreads consecutive steps over the vocabulary


@dataclass(frozen=True, slots=True)
class GenerateInput:
    rid: str
    input_ids: tuple[int, ...]
    max_new_tokens: int
    ignore_eos: bool = False
    stream: bool = False


@dataclass(frozen=True, slots=True)
class TokenUpdate:
    """Cumulative state of one request, as the engine reports it at a stream boundary or the end."""

    rid: str
    output_tokens: int
    prompt_tokens: int
    cached_tokens: int
    finished: bool
    finish_reason: dict | None  # SGLang's shape: {"type": "length", "length": N} or {"type": "stop", "matched": id}
    arrival_s: float
    first_token_s: float | None
    now_s: float


def prompt_seed(input_ids: tuple[int, ...]) -> int:
    return zlib.crc32(array("q", input_ids).tobytes())


def planned_output(input_ids: tuple[int, ...], max_new_tokens: int, ignore_eos: bool, vocab_size: int, eos_id: int):
    """(output ids, finish reason) this request will produce."""
    seed = prompt_seed(input_ids)
    length = max_new_tokens
    if not ignore_eos and max_new_tokens > 1:
        # Stop somewhere in the upper half of the budget, fixed by the prompt.
        length = max_new_tokens - seed % (max_new_tokens // 2 + 1)
    span = vocab_size - _FIRST_ORDINARY_ID
    ids = [(seed + i * _ID_STRIDE) % span + _FIRST_ORDINARY_ID for i in range(length)]
    if length < max_new_tokens:
        ids[-1] = eos_id
        return ids, {"type": "stop", "matched": eos_id}
    return ids, {"type": "length", "length": length}


class SimRequest:
    """Mutable progress of one request; owned by the scheduler, read by the engine."""

    __slots__ = (
        "rid", "input_ids", "max_new_tokens", "stream", "output_ids", "final_reason", "arrival_s",
        "cached_tokens", "prefilled_tokens", "output_tokens", "reserved_tokens", "lock_node",
        "first_token_s", "sent_tokens", "finished", "aborted", "updates",
    )  # fmt: skip

    def __init__(self, spec: GenerateInput, output_ids: list[int], final_reason: dict, arrival_s: float) -> None:
        self.rid = spec.rid
        self.input_ids = spec.input_ids
        self.max_new_tokens = spec.max_new_tokens
        self.stream = spec.stream
        self.output_ids = output_ids
        self.final_reason = final_reason
        self.arrival_s = arrival_s
        self.cached_tokens = 0  # prefix tokens found in the radix tree at admission
        self.prefilled_tokens = 0  # prompt tokens with KV (cached ones included)
        self.output_tokens = 0
        self.reserved_tokens = 0  # KV slots held outside the radix tree
        self.lock_node: RadixNode | None = None
        self.first_token_s: float | None = None
        self.sent_tokens = -1  # output count at the last update sent; -1: none sent yet
        self.finished = False
        self.aborted = False
        self.updates: asyncio.Queue[TokenUpdate] = asyncio.Queue()

    @property
    def prompt_tokens(self) -> int:
        return len(self.input_ids)

    @property
    def target_tokens(self) -> int:
        return len(self.output_ids)

    @property
    def prefill_remaining(self) -> int:
        return len(self.input_ids) - self.prefilled_tokens

    def update(self, now_s: float) -> TokenUpdate:
        return TokenUpdate(
            rid=self.rid,
            output_tokens=self.output_tokens,
            prompt_tokens=len(self.input_ids),
            cached_tokens=self.cached_tokens,
            finished=self.finished,
            finish_reason=self.final_reason if self.finished else None,
            arrival_s=self.arrival_s,
            first_token_s=self.first_token_s,
            now_s=now_s,
        )
