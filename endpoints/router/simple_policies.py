"""smg's load-blind and two-choice policies: round_robin (a rotation per candidate set, as smg 1.13 keeps
them), random (uniform), power_of_two (two distinct workers drawn uniformly, the lower expected wait wins;
smg 1.13's default --power-of-two-load-metric expected_wait). smg's policies/round_robin.rs, random.rs,
power_of_two.rs."""

from __future__ import annotations

import random
from collections.abc import Mapping

from endpoints.router.expected_wait import ExpectedWaitScorer
from endpoints.router.policy_params import PolicyName, RouterModelParams
from endpoints.router.worker_loads import EngineLoad, FleetView

# smg forgets the least recently used candidate set past this many (a bound on memory, not on fleets).
MAX_TRACKED_SETS = 4096


class RoundRobinPolicy:
    """smg 1.13's RoundRobinPolicy (round_robin.rs, `advance`): one rotation per candidate set, the set
    being the eligible workers' URLs in the order the router hands them over; a set seen for the first time
    starts from a shared position that advances by one per new set (0 for the first, 1 for the second...).
    So a worker leaving and rejoining the eligible set resumes the full set's rotation where it stopped, and
    two routes that list the same workers in different orders rotate independently: smg lists model-less
    /generate's candidates in its worker map's hash order and a named model's in registration order, which
    agree or not by chance per smg process (1 in 2 for two workers)."""

    name = PolicyName.ROUND_ROBIN

    def __init__(self, params: RouterModelParams) -> None:
        self._next: dict[tuple[str, ...], int] = {}
        self._last_used: dict[tuple[str, ...], int] = {}  # in new sets seen, smg's age for eviction
        self._next_start = 0
        self._new_sets = 0

    def select(self, text: str, fleet: FleetView, now_s: float) -> int:
        candidates = fleet.candidates()
        key = tuple(fleet.urls[i] for i in candidates)
        if key in self._next:
            self._last_used[key] = self._new_sets
        else:
            self._new_sets += 1
            if len(self._next) >= MAX_TRACKED_SETS:
                stale = min(self._last_used, key=self._last_used.__getitem__)
                del self._next[stale], self._last_used[stale]
            self._next[key], self._last_used[key] = self._next_start, self._new_sets
            self._next_start += 1
        count = self._next[key]
        self._next[key] = count + 1
        return candidates[count % len(candidates)]

    def update_loads(self, loads: Mapping[int, EngineLoad]) -> None:
        pass


class RandomPolicy:
    name = PolicyName.RANDOM

    def __init__(self, params: RouterModelParams) -> None:
        self._rng = random.Random(params.seed)

    def select(self, text: str, fleet: FleetView, now_s: float) -> int:
        candidates = fleet.candidates()
        return candidates[self._rng.randrange(len(candidates))]

    def update_loads(self, loads: Mapping[int, EngineLoad]) -> None:
        pass


class PowerOfTwoPolicy:
    name = PolicyName.POWER_OF_TWO

    def __init__(self, params: RouterModelParams) -> None:
        self._rng = random.Random(params.seed)
        self._scorer = ExpectedWaitScorer(params.expected_wait, self._rng)

    def select(self, text: str, fleet: FleetView, now_s: float) -> int:
        candidates = fleet.candidates()
        if len(candidates) == 1:
            return candidates[0]
        first = self._rng.randrange(len(candidates))
        second = (first + 1 + self._rng.randrange(len(candidates) - 1)) % len(candidates)
        return self._scorer.pick([candidates[first], candidates[second]], fleet)

    def update_loads(self, loads: Mapping[int, EngineLoad]) -> None:
        self._scorer.update_loads(loads)
