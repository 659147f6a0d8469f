"""A fleet's router as endpoints.yaml names it: the routing policy and the rest of its `smg launch` flags.

The flags are smg's own (`smg launch --policy cache_aware --cache-threshold 0.5 ...`), so the line a user
would type is the line costbench runs in the sim and launch modes; the virtual clock reads the same flags
into its model of the policy (endpoints/router/).
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_POLICY = "cache_aware"  # smg's default


@dataclass(frozen=True, slots=True)
class RouterSpec:
    policy: str  # smg's --policy value: cache_aware, round_robin, prefix_hash, power_of_two, random, ...
    args: tuple[str, ...] = ()  # every other `smg launch` flag, as typed (never --worker-urls, --host or --port)

    def launch_args(self) -> list[str]:
        """The flags after `smg launch --worker-urls ... --host ... --port ...`."""
        return ["--policy", self.policy, *self.args]
