"""smg's load-blind and two-choice policies: round_robin (a counter over the eligible workers, from the first
of --worker-urls), random (uniform), power_of_two (two distinct workers drawn uniformly, the lower expected
wait wins; smg 1.13's default --power-of-two-load-metric expected_wait). smg's policies/round_robin.rs,
random.rs, power_of_two.rs."""

from __future__ import annotations

import random
from collections.abc import Mapping

from endpoints.router.expected_wait import ExpectedWaitScorer
from endpoints.router.policy_params import PolicyName, RouterModelParams
from endpoints.router.worker_loads import EngineLoad, FleetView


class RoundRobinPolicy:
    name = PolicyName.ROUND_ROBIN

    def __init__(self, params: RouterModelParams) -> None:
        self._count = 0

    def select(self, text: str, fleet: FleetView, now_s: float) -> int:
        candidates = fleet.candidates()
        chosen = candidates[self._count % len(candidates)]
        self._count += 1
        return chosen

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
