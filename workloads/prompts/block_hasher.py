"""Chained prefix-block hashes of a token sequence (the Mooncake approach), then dense block ids.

Block k of a prompt is tokens [k·block_size, (k+1)·block_size) (the last block may be partial); its
hash is sha256(previous block's digest || the block's tokens as int64 little-endian), so two prompts
get equal hashes up to exactly the last whole block they share and differ from there on.
`DenseBlockIds` then renames each distinct hash to 0, 1, 2, ... in order of first appearance, as the
published Mooncake trace does: a stored id says which blocks are equal and nothing else, so nobody can
confirm a guessed prompt by hashing it (a raw sha256 of a known system prompt would match).
"""

from __future__ import annotations

import hashlib
import math

import numpy as np

from workloads.prompts.token_counter import TokenCounter

DEFAULT_BLOCK_TOKENS = 512  # Mooncake's block size: hit rates compare across traces


def chained_block_hashes(token_ids: np.ndarray, block_size: int, max_blocks: int | None = None) -> list[int]:
    """One int64 hash per block of `token_ids`, each chained to its predecessor; at most `max_blocks`."""
    if block_size <= 0:
        raise ValueError(f"block_size must be > 0, got {block_size}")
    data = np.ascontiguousarray(token_ids, dtype="<i8")
    blocks = math.ceil(len(data) / block_size)
    if max_blocks is not None:
        blocks = min(blocks, max_blocks)
    hashes: list[int] = []
    previous = b""
    for k in range(blocks):
        previous = hashlib.sha256(previous + data[k * block_size : (k + 1) * block_size].tobytes()).digest()
        hashes.append(int.from_bytes(previous[:8], "little", signed=True))
    return hashes


class DenseBlockIds:
    """Chained hashes → 0, 1, 2, ... by first appearance, within one workload."""

    def __init__(self) -> None:
        self._ids: dict[int, int] = {}

    def rename(self, hashes: list[int]) -> list[int]:
        ids = self._ids
        return [ids.setdefault(h, len(ids)) for h in hashes]


class PromptBlockIds:
    """Prompt text → (token count, dense block ids), with one counter and one id space per workload."""

    def __init__(self, counter: TokenCounter, block_size: int = DEFAULT_BLOCK_TOKENS) -> None:
        if block_size <= 0:
            raise ValueError(f"block_size must be > 0, got {block_size}")
        self.counter = counter
        self.block_size = block_size
        self._dense = DenseBlockIds()

    def blocks(self, text: str, input_tokens: int | None = None) -> tuple[int, list[int]]:
        """`input_tokens` (e.g. the server's usage count) caps the blocks at ceil(input_tokens / block_size);
        by default the counter's own count of `text` is used."""
        token_ids = self.counter.encode(text)
        count = len(token_ids) if input_tokens is None else input_tokens
        hashes = chained_block_hashes(token_ids, self.block_size, math.ceil(count / self.block_size))
        return count, self._dense.rename(hashes)
