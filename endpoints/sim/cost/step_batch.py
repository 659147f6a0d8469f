"""What one forward step runs: the record the scheduler hands the cost model.

The cost model sees token counts only; it never sees requests, queues or the cache. It reads them summed per
attention rank (RankLoad): a batch built from per-request items sums them once, and the scheduler's decode steps
hand over the sums alone, so a step costs the same Python time whatever its batch size.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from operator import attrgetter


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
class RankLoad:
    """One attention rank's requests in a step, summed: everything the roofline reads of them. Whole numbers, so
    any order of summing gives the same figures."""

    requests: int = 0
    new_tokens: int = 0
    kv_tokens: int = 0  # Σ (context + new): the KV its attention reads
    attended_tokens: int = 0  # Σ new × (context + new): each new token attends to the whole context (decode)
    causal_pairs_x2: int = 0  # Σ new × (2·context + new): twice the causal (query, key) pairs of a chunk (extend)
    masked_tokens: int = 0  # new tokens sampled under a grammar mask

    @staticmethod
    def of_uniform(requests: int, new_each: int, context_tokens: int, masked_requests: int) -> RankLoad:
        """`requests` requests computing `new_each` tokens each over `context_tokens` of context in all (a decode
        or a verify step)."""
        kv = context_tokens + requests * new_each
        return RankLoad(requests, requests * new_each, kv, new_each * kv,
                        new_each * (2 * context_tokens + requests * new_each), new_each * masked_requests)  # fmt: skip


def rank_loads(items: Iterable[BatchItem]) -> tuple[RankLoad, ...]:
    """The items summed per rank (index: the items' rank)."""
    sums: list[list[int]] = []
    for item in items:
        while len(sums) <= item.rank:
            sums.append([0, 0, 0, 0, 0, 0])
        s, n, c = sums[item.rank], item.new_tokens, item.context_tokens
        s[0] += 1
        s[1] += n
        s[2] += c + n
        s[3] += n * (c + n)
        s[4] += n * (2 * c + n)
        if item.masked:
            s[5] += n
    return tuple(RankLoad(*s) for s in sums)


_new_tokens = attrgetter("new_tokens")
_masked_tokens = attrgetter("masked_tokens")


@dataclass(frozen=True, slots=True)
class StepBatch:
    mode: ForwardMode
    # Per request. A batch given `loads` may have none (the scheduler's decode steps): what only items tell (prompt
    # lengths) is then unknown, and the cost model needs it of extend steps only.
    items: tuple[BatchItem, ...]
    loads: tuple[RankLoad, ...] = ()  # per rank (index: rank); empty: summed from the items

    def __post_init__(self) -> None:
        if not self.loads and self.items:
            object.__setattr__(self, "loads", rank_loads(self.items))

    @property
    def new_tokens(self) -> int:
        return sum(map(_new_tokens, self.loads))

    @property
    def masked_tokens(self) -> int:
        """Tokens this step samples under a grammar mask (a decode's new tokens of constrained requests)."""
        return sum(map(_masked_tokens, self.loads)) if self.mode is ForwardMode.DECODE else 0
