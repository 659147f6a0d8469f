"""Stand-in tokenizer for the twin: deterministic, cheap, no model files.

Text becomes one token per 4 bytes of UTF-8 (about what a BPE tokenizer gives English), each id a
hash of its bytes, so equal text prefixes give equal id prefixes and hit the radix cache. Output
ids render as short words, one per token; only their count matters to the benchmark.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from itertools import accumulate

import numpy as np

BYTES_PER_TOKEN = 4
_FIRST_ORDINARY_ID = 3
_WORDS = tuple(
    " " + w
    for w in (
        "the of and to in is for on that with as by at from it be are this an was or we can not "
        "cost token cache batch model step time load queue prefix expert layer route graph node"
    ).split()
)


def _crc32_tables() -> tuple[np.ndarray, np.ndarray]:
    """CRC-32 of a 4-byte string is affine over GF(2) in its bits: crc(b0 b1 b2 b3) = crc(0000) ^ T0[b0] ^ T1[b1] ^
    T2[b2] ^ T3[b3], where Ti[v] = crc(v at byte i, zeros elsewhere) ^ crc(0000). Two tables of byte pairs (b0 b1 and
    b2 b3, 256 KiB each) make it two reads a token, done in numpy instead of one zlib call a token in Python, with the
    same ids (tests/endpoints/sim/test_sim_toy_tokenizer.py checks them against zlib). crc(0000) is folded into the
    first table."""
    zero = zlib.crc32(bytes(BYTES_PER_TOKEN))
    single = np.empty((BYTES_PER_TOKEN, 256), dtype=np.uint32)
    for position in range(BYTES_PER_TOKEN):
        for value in range(256):
            word = bytearray(BYTES_PER_TOKEN)
            word[position] = value
            single[position, value] = zlib.crc32(word) ^ zero
    low = (single[0][None, :] ^ single[1][:, None]).ravel() ^ np.uint32(zero)  # index b0 | b1 << 8 (little-endian)
    high = (single[2][None, :] ^ single[3][:, None]).ravel()
    return low, high


_CRC32_LOW, _CRC32_HIGH = _crc32_tables()


def encode(text: str, vocab_size: int) -> tuple[int, ...]:
    """One id for each 4 bytes of UTF-8 (the last piece may be shorter): its CRC-32 folded onto the ordinary ids."""
    data = text.encode("utf-8")
    span = vocab_size - _FIRST_ORDINARY_ID
    whole = len(data) - len(data) % BYTES_PER_TOKEN
    pairs = np.frombuffer(data, dtype="<u2", count=whole // 2).reshape(-1, 2)
    crc = _CRC32_LOW[pairs[:, 0]] ^ _CRC32_HIGH[pairs[:, 1]]
    ids = (crc % span + _FIRST_ORDINARY_ID).tolist()
    if whole < len(data):
        ids.append(zlib.crc32(data[whole:]) % span + _FIRST_ORDINARY_ID)
    return tuple(ids)


THINK_END_TEXT = "</think>"


def render_chat(messages: list[tuple[str, str]], thinking: bool) -> str:
    """A stand-in chat template: role-tagged turns, then the assistant's turn. Each turn's text is a
    prefix of the next turn's prompt, so a conversation hits the prefix cache as it would for real."""
    parts = [f"<|{role}|>{content}" for role, content in messages]
    return "".join(parts) + ("<|assistant|><think>\n" if thinking else "<|assistant|>")


class OutputText:
    """The text of a request's output ids, sliceable by token count in O(1). EOS renders as nothing,
    the reasoning end as `</think>`; an answer under a response format renders as its own pieces, one per
    token from `answer_start` on (structured_answer.py)."""

    __slots__ = ("_text", "_ends")

    def __init__(
        self,
        output_ids: Sequence[int],
        eos_id: int,
        think_end_id: int | None = None,
        answer_pieces: tuple[str, ...] | None = None,
        answer_start: int = 0,
    ) -> None:
        words = [
            "" if t == eos_id else THINK_END_TEXT if t == think_end_id else _WORDS[t % len(_WORDS)] for t in output_ids
        ]
        if answer_pieces:
            words[answer_start : answer_start + len(answer_pieces)] = answer_pieces
        self._text = "".join(words)
        self._ends = list(accumulate(map(len, words), initial=0))

    def upto(self, tokens: int) -> str:
        return self._text[: self._ends[tokens]]

    def span(self, start_tokens: int, end_tokens: int) -> str:
        """Text of output tokens [start, end)."""
        return self._text[self._ends[start_tokens] : self._ends[end_tokens]]
