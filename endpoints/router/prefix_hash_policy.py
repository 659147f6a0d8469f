"""smg's prefix_hash policy (policies/prefix_hash.rs, worker/hash_ring.rs): the first 4 × --prefix-token-count
characters of the routing text are hashed (xxh3-64, written as 16 hex digits) onto a consistent-hash ring of
150 virtual nodes per worker (blake3 of `url#k`, its first 8 bytes little-endian), walked clockwise from the
key's position (blake3 again) to the first eligible worker. That worker keeps the request unless its
in-flight count is over max(mean × --prefix-hash-load-factor, mean + --prefix-hash-balance-abs-threshold),
the mean counting this request; then the least loaded worker under that bound takes it (the first such in
--worker-urls order). Text-less requests go to the least loaded worker. The same hashes as smg, so the same
prefix lands on the same worker URL.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping

import blake3
import xxhash

from endpoints.router.policy_params import PolicyName, RouterModelParams
from endpoints.router.worker_loads import EngineLoad, FleetView

VIRTUAL_NODES_PER_WORKER = 150
CHARS_PER_TOKEN = 4


def ring_position(key: str) -> int:
    return int.from_bytes(blake3.blake3(key.encode()).digest()[:8], "little")


class PrefixHashPolicy:
    name = PolicyName.PREFIX_HASH

    def __init__(self, params: RouterModelParams) -> None:
        self._params = params.prefix_hash
        self._ring_urls: tuple[str, ...] = ()
        self._ring: list[tuple[int, int]] = []
        self._positions: list[int] = []

    def select(self, text: str, fleet: FleetView, now_s: float) -> int:
        candidates = fleet.candidates()
        if not text:
            return min(candidates, key=lambda w: fleet.in_flight[w])
        self._build_ring(fleet.urls)
        head = text[: self._params.prefix_token_count * CHARS_PER_TOKEN].encode()
        key = f"{xxhash.xxh3_64_intdigest(head):016x}"
        start = bisect.bisect_left(self._positions, ring_position(key))
        home = next(
            w for i in range(len(self._ring)) if (w := self._ring[(start + i) % len(self._ring)][1]) in candidates
        )
        total = sum(fleet.in_flight[w] for w in candidates)
        if self._load_ok(fleet.in_flight[home], total, len(candidates)):
            return home
        under = [w for w in candidates if self._load_ok(fleet.in_flight[w], total, len(candidates))]
        return min(under, key=lambda w: fleet.in_flight[w]) if under else home

    def update_loads(self, loads: Mapping[int, EngineLoad]) -> None:
        pass

    def _load_ok(self, load: int, total: int, workers: int) -> bool:
        if total == 0:
            return True
        mean = (total + 1) / workers
        return load <= max(mean * self._params.load_factor, mean + self._params.balance_abs_threshold)

    def _build_ring(self, urls: tuple[str, ...]) -> None:
        if urls == self._ring_urls:
            return
        vnodes = range(VIRTUAL_NODES_PER_WORKER)
        entries = [(ring_position(f"{url}#{v}"), i) for i, url in enumerate(urls) for v in vnodes]
        entries.sort(key=lambda e: e[0])  # a stable sort, as Rust's sort_unstable_by_key on distinct positions
        self._ring_urls, self._ring, self._positions = urls, entries, [p for p, _ in entries]
