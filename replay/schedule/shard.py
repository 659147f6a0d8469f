"""Sharding: shard k of n replays the sessions (or lone requests) whose stable hash mod n is k.

The hash is blake2b of the session id (or the request id of a request without a session), not
Python's `hash()`, which differs between processes: n processes on n machines must agree on the split
without talking to each other. A session never straddles shards, so session order holds.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np
import pyarrow as pa

_SHARD_SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def parse_shard(spec: str) -> tuple[int, int]:
    """'k/n' → (k, n), with 0 <= k < n."""
    match = _SHARD_SPEC.match(spec)
    if not match:
        raise ValueError(f"shard {spec!r}: expected k/n, e.g. 0/4")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1 or not 0 <= index < count:
        raise ValueError(f"shard {spec!r}: need 0 <= k < n")
    return index, count


def shard_of(key: str, count: int) -> int:
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") % count


def shard_mask(table: pa.Table, index: int, count: int) -> pa.Array:
    """Boolean mask of the rows of a WORKLOAD_SCHEMA table that belong to shard `index` of `count`."""
    if count == 1:
        return pa.array(np.ones(table.num_rows, dtype=bool))
    sessions = table.column("session_id").to_pylist()
    request_ids = table.column("request_id").to_pylist()
    keep = np.fromiter(
        (shard_of(s if s is not None else r, count) == index for s, r in zip(sessions, request_ids)),
        dtype=bool,
        count=table.num_rows,
    )
    return pa.array(keep)
