"""An answer under a response format, token by token: the text of each output token after the reasoning.

The twin's tokens render as made-up words; an answer under a format renders as its skeleton's text
(answer_skeleton.py) cut into tokens of 1-4 characters (the stand-in tokenizer's 4 bytes per token, at
most). Lengths stay what the request asks: the answer is padded inside (whitespace in a container, words
in a free string, a regex repeat) to fill its tokens. When the budget is below the smallest answer's
tokens, the answer is cut there (finish_reason `length`, as SGLang ends any request at max_new_tokens):
it does not parse. When a constrained answer cannot grow (`{"enum": [...]}`, a fixed regex) it ends early
with EOS, even under ignore_eos: SGLang finishes a request whose grammar has terminated.

Prompt-only (no constraint sent, the schema only in the prompt), nothing enforces the format: a drawn
share of answers fails, wrapped in prose or cut short, so the replay's valid-answer rate is a measurement.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from enum import Enum

from endpoints.sim.structured.answer_skeleton import Skeleton
from endpoints.sim.toy_tokenizer import BYTES_PER_TOKEN

PROSE_PREFIX = "Sure! Here is the JSON you asked for:\n"  # how a failed prompt-only answer opens
TRAILING_PAD = "\n"  # after a complete unconstrained answer: the model goes on with blank lines


class Failure(str, Enum):
    PROSE = "prose"  # the answer, wrapped in a sentence: not JSON
    TRUNCATED = "truncated"  # the answer stops before it closes


@dataclass(frozen=True, slots=True)
class AnswerAsk:
    """What the request's answer must look like, and how the model behaves about it."""

    skeleton: Skeleton
    enforced: bool  # a grammar constrains the answer (sent to the server); False: prompt-only
    after_reasoning: bool  # the grammar starts after `</think>` (SGLang's reasoner grammar); False: at token 0
    failure: Failure | None = None  # prompt-only: this answer does not follow the format


@dataclass(frozen=True, slots=True)
class AnswerPieces:
    pieces: tuple[str, ...]  # the text of each answer token
    complete: bool  # False: cut by the length (or failed on purpose)


def min_tokens(chars: int) -> int:
    return -(-chars // BYTES_PER_TOKEN)


def split_tokens(text: str, tokens: int) -> tuple[str, ...]:
    """`text` as `tokens` pieces of near-equal length (needs tokens <= len(text) <= 4 × tokens)."""
    q, r = divmod(len(text), tokens)
    out, at = [], 0
    for i in range(tokens):
        size = q + 1 if i < r else q
        out.append(text[at : at + size])
        at += size
    return tuple(out)


def fit(skeleton: Skeleton, tokens: int) -> AnswerPieces:
    """The answer in at most `tokens` tokens: exactly that many when the skeleton can grow to it; cut
    (incomplete) when even its smallest form needs more; fewer when it cannot grow."""
    if tokens <= 0:
        return AnswerPieces((), False)
    text = skeleton.text
    if min_tokens(len(text)) > tokens:
        return AnswerPieces(split_tokens(text[: tokens * BYTES_PER_TOKEN], tokens), False)
    if len(text) < tokens:
        grown = skeleton.padded(tokens - len(text))
        if len(grown) <= tokens * BYTES_PER_TOKEN:
            text = grown
    return AnswerPieces(split_tokens(text, min(tokens, len(text))), True)


def answer_tokens_needed(ask: AnswerAsk) -> int:
    """Tokens the smallest complete answer takes (what a request without ignore_eos runs to at least)."""
    extra = len(PROSE_PREFIX) if ask.failure is Failure.PROSE else 0
    return min_tokens(len(ask.skeleton.text) + extra)


def answer(ask: AnswerAsk, tokens: int) -> AnswerPieces:
    """The answer's pieces for a budget of `tokens` (fewer pieces: a constrained answer that ended early)."""
    if ask.failure is Failure.PROSE:
        lead = split_tokens(PROSE_PREFIX, min_tokens(len(PROSE_PREFIX)))[:tokens]
        body = fit(ask.skeleton, tokens - len(lead))
        return _fill(AnswerPieces(lead + body.pieces, False), tokens)
    if ask.failure is Failure.TRUNCATED:
        whole = fit(ask.skeleton, tokens + max(1, tokens // 4))
        kept = whole.pieces[:tokens]
        if len(kept) == len(whole.pieces):  # it all fit: stop one character before the end anyway
            text = "".join(kept)[:-1]
            kept = split_tokens(text, min(tokens, len(text))) if text else ()
        return _fill(AnswerPieces(kept, False), tokens)
    fitted = fit(ask.skeleton, tokens)
    return fitted if ask.enforced else _fill(fitted, tokens)


def _fill(pieces: AnswerPieces, tokens: int) -> AnswerPieces:
    """Unconstrained, the model keeps writing past the answer (blank lines) until its length is reached."""
    short = tokens - len(pieces.pieces)
    return AnswerPieces(pieces.pieces + (TRAILING_PAD,) * short, pieces.complete) if short > 0 else pieces


def draw_failure(rate: float, seed: int, truncatable: bool) -> Failure | None:
    """Whether a prompt-only answer fails (probability `rate`), and how: fixed by `seed`, so runs repeat."""
    if rate <= 0:
        return None
    draw = zlib.crc32(b"unconstrained-failure", seed) / 2**32  # in [0, 1)
    if draw >= rate:
        return None
    how = zlib.crc32(b"failure-mode", seed) & 1
    return Failure.TRUNCATED if how and truncatable else Failure.PROSE
