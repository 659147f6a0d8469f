"""smg's cache_aware policy over HTTP workers (policies/cache_aware.rs, the approximate string tree).

Each request's routing text is matched against one prefix tree shared by the workers. When the matched
share of its characters exceeds --cache-threshold, the request goes to the least loaded (router in-flight)
of the workers holding the matched prefix, ties at random, unless that worker is over both spill margins:
more than --balance-rel-threshold × the eligible fleet's mean in-flight and more than the mean plus the
absolute margin (--balance-abs-threshold, capped, as smg 1.13's help says, at two standard deviations of the
in-flight count at that mean, √mean × 2, but never under four); then, and on every miss, the lowest
expected wait wins (smg 1.13's `expected_wait_fallback`). Either way the text is inserted for the chosen
worker, so a spilled prefix gains a second holder. Every --eviction-interval-secs the tree is cut back to
--max-tree-size characters, least recently touched first.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping

from endpoints.router.expected_wait import ExpectedWaitScorer
from endpoints.router.policy_params import PolicyName, RouterModelParams
from endpoints.router.text_radix_tree import TextRadixTree
from endpoints.router.worker_loads import EngineLoad, FleetView

MIN_SPILL_MARGIN = 4.0  # smg 1.13 --balance-abs-threshold help: the capped margin is never under four


class CacheAwarePolicy:
    name = PolicyName.CACHE_AWARE

    def __init__(self, params: RouterModelParams) -> None:
        self._params = params.cache_aware
        self._rng = random.Random(params.seed)
        self._scorer = ExpectedWaitScorer(params.expected_wait, self._rng)
        self._tree = TextRadixTree()
        self._known = 0
        self._last_eviction_s: float | None = None

    @property
    def tree(self) -> TextRadixTree:
        return self._tree

    def select(self, text: str, fleet: FleetView, now_s: float) -> int:
        self._evict_when_due(now_s)
        while self._known < len(fleet.urls):
            self._tree.add_tenant(self._known)
            self._known += 1
        candidates = fleet.candidates()
        match = self._tree.match(text)
        rate = match.matched_chars / match.input_chars if match.input_chars else 0.0
        holders = [w for w in match.tenants if w in candidates]
        if rate > self._params.cache_threshold and holders:
            chosen = self._least_loaded(holders, fleet)
            if self._over_spill_margins(chosen, candidates, fleet):
                chosen = self._scorer.pick(candidates, fleet)
        else:
            chosen = self._scorer.pick(candidates, fleet)
        self._tree.insert(text, chosen)
        return chosen

    def update_loads(self, loads: Mapping[int, EngineLoad]) -> None:
        self._scorer.update_loads(loads)

    def _least_loaded(self, workers: list[int], fleet: FleetView) -> int:
        in_flight = fleet.in_flight
        loads = [in_flight[w] for w in workers]
        low = min(loads)
        tied = [w for w, n in zip(workers, loads) if n == low]
        return tied[0] if len(tied) == 1 else tied[self._rng.randrange(len(tied))]

    def _over_spill_margins(self, worker: int, candidates: list[int], fleet: FleetView) -> bool:
        mean = sum(fleet.in_flight[w] for w in candidates) / len(candidates)
        margin = min(float(self._params.balance_abs_threshold), max(2.0 * math.sqrt(mean), MIN_SPILL_MARGIN))
        load = fleet.in_flight[worker]
        return load > mean * self._params.balance_rel_threshold and load > mean + margin

    def _evict_when_due(self, now_s: float) -> None:
        if self._last_eviction_s is None:
            self._last_eviction_s = now_s
        elif now_s - self._last_eviction_s >= self._params.eviction_interval_s:
            self._tree.evict_to(self._params.max_tree_size_chars)
            self._last_eviction_s = now_s
