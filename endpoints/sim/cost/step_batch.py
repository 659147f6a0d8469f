"""What one forward step runs: the record the scheduler hands the cost model.

The cost model sees token counts only; it never sees requests, queues or the cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class ForwardMode(str, Enum):
    EXTEND = "extend"  # prefill (or one chunk of it); runs eagerly in SGLang
    DECODE = "decode"  # one new token per running request; replayed from CUDA graphs


@dataclass(frozen=True, slots=True)
class BatchItem:
    new_tokens: int  # tokens this step computes for the request (1 in decode)
    context_tokens: int  # tokens already in its KV before this step (cached prefix included)
    masked: bool = False  # its tokens are sampled under a grammar mask (constrained decoding, past the reasoning)
    prompt_tokens: int = 0  # the request's whole prompt (the cold-start stall tells copies of one prompt apart)
    rank: int = 0  # the DP-attention rank it runs on (0 without DP attention): the busiest rank sets the step


@dataclass(frozen=True, slots=True)
class StepBatch:
    mode: ForwardMode
    items: tuple[BatchItem, ...]

    @property
    def new_tokens(self) -> int:
        return sum(item.new_tokens for item in self.items)

    @property
    def masked_tokens(self) -> int:
        """Tokens this step samples under a grammar mask (a decode's new tokens of constrained requests)."""
        return sum(item.new_tokens for item in self.items if item.masked) if self.mode is ForwardMode.DECODE else 0
