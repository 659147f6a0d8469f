"""The routing model's one interface and its registry: a policy picks a worker for a request's routing text
given what the router knows of the fleet, and hears each load poll."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from endpoints.router.cache_aware_policy import CacheAwarePolicy
from endpoints.router.policy_params import PolicyName, RouterModelParams
from endpoints.router.simple_policies import PowerOfTwoPolicy, RandomPolicy, RoundRobinPolicy
from endpoints.router.worker_loads import EngineLoad, FleetView


class RoutingPolicy(Protocol):
    name: PolicyName

    def select(self, text: str, fleet: FleetView, now_s: float) -> int: ...

    def update_loads(self, loads: Mapping[int, EngineLoad]) -> None: ...


def _prefix_hash(params: RouterModelParams) -> RoutingPolicy:
    from endpoints.router.prefix_hash_policy import PrefixHashPolicy  # xxhash and blake3: only this policy

    return PrefixHashPolicy(params)


POLICIES: dict[PolicyName, Callable[[RouterModelParams], RoutingPolicy]] = {
    PolicyName.CACHE_AWARE: CacheAwarePolicy,
    PolicyName.ROUND_ROBIN: RoundRobinPolicy,
    PolicyName.RANDOM: RandomPolicy,
    PolicyName.POWER_OF_TWO: PowerOfTwoPolicy,
    PolicyName.PREFIX_HASH: _prefix_hash,
}


def build_policy(params: RouterModelParams) -> RoutingPolicy:
    return POLICIES[params.policy](params)
