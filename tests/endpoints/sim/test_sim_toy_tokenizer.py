"""The twin's stand-in tokenizer: its ids are each 4-byte piece's CRC-32 (zlib's) folded onto the ordinary ids,
computed in numpy from byte-pair tables; here against zlib itself, piece by piece."""

from __future__ import annotations

import random
import zlib

import pytest

from endpoints.sim.toy_tokenizer import encode

ALPHABET = "abcdefghij XYZ\n<|>{}é漢字🙂"  # one- to four-byte UTF-8 characters


def _by_zlib(text: str, vocab_size: int) -> tuple[int, ...]:
    data = text.encode("utf-8")
    return tuple(zlib.crc32(data[i : i + 4]) % (vocab_size - 3) + 3 for i in range(0, len(data), 4))


@pytest.mark.parametrize("vocab_size", [129_280, 32_000, 5])
def test_every_id_is_the_crc32_of_its_four_bytes(vocab_size):
    rng = random.Random(vocab_size)
    for length in [*range(12), 255, 256, 1_001, 20_000]:
        text = "".join(rng.choice(ALPHABET) for _ in range(length))
        assert encode(text, vocab_size) == _by_zlib(text, vocab_size), (length, text[:40])


def test_equal_text_prefixes_give_equal_id_prefixes():
    system = "You are a support agent. " * 40  # 1,000 bytes: 250 whole tokens
    first, second = encode(system + "my order is late", 129_280), encode(system + "refund please", 129_280)
    assert first[:250] == second[:250] and first[250:] != second[250:]
    assert all(3 <= t < 129_280 for t in first)
