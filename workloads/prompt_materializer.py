"""Prompt materialization: turn a Workload's token counts and block hashes into exact token ids.

DESIGN.md, "Prompt materialization": block hash h → `block_size` ids drawn from a PRNG seeded by
(seed, h), inside the model's vocabulary with the low special-token ids left out; a request's ids are
its blocks concatenated and cut to exactly `input_tokens`. Equal hashes give equal ids, so the prefix
sharing of the trace reaches the server's cache; different hashes give independent streams.
A request without block hashes gets ids of its own, seeded by a salt from its request_id, so two such
requests never share a prefix by accident. Runs before t0, off the replay hot path.
"""

from __future__ import annotations

import hashlib

import numpy as np

from workloads.workload import Workload

DEEPSEEK_V3_VOCAB_SIZE = 129280  # DeepSeek-V3/R1 config.json vocab_size
DEFAULT_RESERVED_IDS = 16  # low ids kept free for special tokens (BOS/EOS/pad and the like)

# Domain tags keep the two seed families apart: block hash 7 and a request salt of 7 must not collide.
_BLOCK_DOMAIN = 0
_REQUEST_DOMAIN = 1
_UINT64_MASK = (1 << 64) - 1


def _request_salt(request_id: str) -> int:
    # sha256, not hash(): Python's str hash changes between processes and would break determinism.
    return int.from_bytes(hashlib.sha256(request_id.encode()).digest()[:8], "little")


def _draw_ids(entropy: list[int], count: int, low: int, high: int) -> np.ndarray:
    return np.random.default_rng(entropy).integers(low, high, size=count, dtype=np.int64)


def materialize_input_ids(
    workload: Workload,
    seed: int = 0,
    vocab_size: int = DEEPSEEK_V3_VOCAB_SIZE,
    reserved_ids: int = DEFAULT_RESERVED_IDS,
) -> list[list[int]]:
    """One list of exactly `input_tokens` token ids per row of `workload.table`, in table order.

    Deterministic in (workload rows, seed, vocab_size, reserved_ids).
    """
    if seed < 0:
        raise ValueError(f"seed must be non-negative, got {seed}")
    if not 0 <= reserved_ids < vocab_size:
        raise ValueError(f"need 0 <= reserved_ids < vocab_size, got reserved_ids={reserved_ids}, vocab_size={vocab_size}")
    block_size = workload.block_size
    table = workload.table
    request_ids = table.column("request_id").to_pylist()
    input_counts = table.column("input_tokens").to_pylist()
    blocks_column = table.column("prefix_blocks").to_pylist()

    # Popular prefixes (a system prompt, a long conversation) recur thousands of times: draw each once.
    block_cache: dict[int, np.ndarray] = {}

    def block_ids(block_hash: int) -> np.ndarray:
        ids = block_cache.get(block_hash)
        if ids is None:
            # SeedSequence wants non-negative entropy; int64 hashes map one-to-one onto uint64.
            entropy = [seed, _BLOCK_DOMAIN, block_hash & _UINT64_MASK]
            ids = _draw_ids(entropy, block_size, reserved_ids, vocab_size)
            block_cache[block_hash] = ids
        return ids

    materialized: list[list[int]] = []
    for request_id, input_tokens, blocks in zip(request_ids, input_counts, blocks_column):
        parts: list[np.ndarray] = []
        covered = 0
        if blocks and block_size > 0:
            for block_hash in blocks:
                if covered >= input_tokens:
                    break
                parts.append(block_ids(block_hash))
                covered += block_size
        if covered < input_tokens:
            # No blocks, or fewer than the input needs: the rest is this request's own.
            entropy = [seed, _REQUEST_DOMAIN, _request_salt(request_id)]
            parts.append(_draw_ids(entropy, input_tokens - covered, reserved_ids, vocab_size))
        ids = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
        materialized.append(ids[:input_tokens].tolist())
    return materialized
