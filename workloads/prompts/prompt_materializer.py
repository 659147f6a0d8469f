"""Prompt materialization: turn a Workload's token counts and block hashes into exact token ids.

docs/workloads.md, "Exact prompts": block hash h → `block_size` ids drawn from a counter-based PRNG keyed
by (seed, h), inside the model's vocabulary with the low special-token ids left out; a request's ids are
its blocks concatenated and cut to exactly `input_tokens`. Equal hashes give equal ids, so the prefix
sharing of the trace reaches the server's cache. A request without block hashes (or with fewer than its
length needs) fills the rest with ids of its own, keyed by its request_id.

Where two requests part ways, their next tokens differ, always: the first token of a block is chosen
per hash so that blocks following the same parent block never start with the same id (and a request's
own tail never starts like a sibling block). A radix cache therefore matches whole shared blocks and not
one token more, so cached_tokens can be compared with the trace's theoretical reuse. The first token is
(h + seed offset) mod the id range, moved to the next free id only on a clash with a sibling; the one
case left open is a hash that follows two different parents (not a chained hash), which keeps its id.

The ids are computed with vectorized splitmix64 over (block key, position) in numpy, one int32 array per
request: no Python loop per token, no per-block generator object. Runs before t0, off the hot path.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import numpy as np

from workloads.workload import Workload

DEEPSEEK_V3_VOCAB_SIZE = 129280  # DeepSeek-V3/R1 config.json vocab_size
DEFAULT_RESERVED_IDS = 16  # low ids kept free for special tokens (BOS/EOS/pad and the like)

# Domain tags keep the two key families apart: block hash 7 and a request salt of 7 must not collide.
_BLOCK_DOMAIN = 0
_REQUEST_DOMAIN = 1
_UINT64_MASK = (1 << 64) - 1
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)


def mix64(values: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer on a uint64 array: a bijection that scrambles every bit (wraps on purpose)."""
    values = values ^ (values >> np.uint64(30))
    values = values * _MIX_1
    values ^= values >> np.uint64(27)
    values *= _MIX_2
    values ^= values >> np.uint64(31)
    return values


def _mix_int(value: int) -> int:
    return int(mix64(np.array([value & _UINT64_MASK], dtype=np.uint64))[0])


def _request_salt(request_id: str) -> int:
    # sha256, not hash(): Python's str hash changes between processes and would break determinism.
    return int.from_bytes(hashlib.sha256(request_id.encode()).digest()[:8], "little")


def _tail_key(request_id: str, request_base: np.uint64) -> int:
    return int(mix64(np.array([_request_salt(request_id)], dtype=np.uint64) ^ request_base)[0])


class _FirstTokens:
    """First-token choice per block hash (and per request tail), distinct among siblings in a prefix trie."""

    def __init__(self, seed: int, span: int) -> None:
        self._offset = _mix_int(seed) % span
        self._span = span
        self._child: dict[tuple[int, int], int] = {}  # (parent node, hash) → node; node 0 is the root
        self._taken: dict[int, set[int]] = {}  # node → first tokens of its children
        self.of_hash: dict[int, int] = {}

    def _free(self, node: int, candidate: int) -> int:
        taken = self._taken.setdefault(node, set())
        if len(taken) < self._span:  # with every id taken a clash is unavoidable: keep the candidate
            while candidate in taken:
                candidate = (candidate + 1) % self._span
        taken.add(candidate)
        return candidate

    def walk(self, blocks: list[int]) -> int:
        """Register the chain `blocks`; returns the node it ends at."""
        node = 0
        for block_hash in blocks:
            child = self._child.get((node, block_hash))
            if child is None:
                child = len(self._child) + 1
                self._child[(node, block_hash)] = child
                first = self.of_hash.get(block_hash)
                if first is None:
                    self.of_hash[block_hash] = self._free(node, (block_hash + self._offset) % self._span)
                else:
                    self._taken.setdefault(node, set()).add(first)
            node = child
        return node

    def tail(self, node: int, key: int) -> int:
        return self._free(node, key % self._span)


def materialize_input_ids(
    workload: Workload,
    seed: int = 0,
    vocab_size: int = DEEPSEEK_V3_VOCAB_SIZE,
    reserved_ids: int = DEFAULT_RESERVED_IDS,
    selected: Sequence[bool] | None = None,
) -> list[np.ndarray]:
    """One int32 array of exactly `input_tokens` token ids per row of `workload.table`, in table order.

    Deterministic in (workload rows, seed, vocab_size, reserved_ids). `selected` (one bool per row)
    returns arrays for the selected rows only, while first tokens are still chosen over all rows: a
    shard that materializes its own rows gets exactly the ids the unsharded replay would send.
    """
    if seed < 0:
        raise ValueError(f"seed must be non-negative, got {seed}")
    if not 0 <= reserved_ids < vocab_size:
        raise ValueError(
            f"need 0 <= reserved_ids < vocab_size, got reserved_ids={reserved_ids}, vocab_size={vocab_size}"
        )
    span = vocab_size - reserved_ids
    span_u64 = np.uint64(span)
    block_size = workload.block_size
    table = workload.table
    request_ids = table.column("request_id").to_pylist()
    input_counts = table.column("input_tokens").to_pylist()
    blocks_column = table.column("prefix_blocks").to_pylist()
    block_base = np.uint64(_mix_int(seed * 2 + _BLOCK_DOMAIN))
    request_base = np.uint64(_mix_int(seed * 2 + _REQUEST_DOMAIN))
    positions = np.arange(max([block_size, *input_counts]) + 1, dtype=np.uint64) * _GOLDEN
    firsts = _FirstTokens(seed, span)
    if selected is None:
        selected = [True] * len(request_ids)
    elif len(selected) != len(request_ids):
        raise ValueError(f"selected has {len(selected)} entries for {len(request_ids)} rows")

    materialized: list[np.ndarray] = []
    for request_id, input_tokens, blocks, wanted in zip(request_ids, input_counts, blocks_column, selected):
        used = blocks[: math.ceil(input_tokens / block_size)] if blocks and block_size > 0 else []
        node = firsts.walk(used)
        if not wanted:
            if input_tokens > len(used) * block_size:
                firsts.tail(node, _tail_key(request_id, request_base))  # reserve its first token all the same
            continue
        covered = min(len(used) * block_size, input_tokens)
        raw = np.empty(input_tokens, dtype=np.uint64)
        if used:
            keys = mix64(np.array(used, dtype=np.int64).view(np.uint64) ^ block_base)
            offsets = np.tile(positions[:block_size], len(used))[:covered]
            raw[:covered] = np.repeat(keys, block_size)[:covered] + offsets
        tail_key = 0
        if covered < input_tokens:
            tail_key = _tail_key(request_id, request_base)
            raw[covered:] = np.uint64(tail_key) + positions[: input_tokens - covered]
        ids = (mix64(raw) % span_u64).astype(np.int32)
        for k, block_hash in enumerate(used):
            ids[k * block_size] = firsts.of_hash[block_hash]
        if covered < input_tokens:
            ids[covered] = firsts.tail(node, tail_key)
        ids += reserved_ids
        materialized.append(ids)
    return materialized
