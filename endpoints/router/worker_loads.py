"""What the router knows of its workers when it picks one: its own in-flight counts (always current) and
the engines' last polled load (smg's load monitor, every --load-monitor-interval seconds: queue, KV usage,
generation throughput, read from each worker's SGLang /metrics gauges)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class EngineLoad:
    running_reqs: int
    waiting_reqs: int
    token_usage: float  # KV pool share in use, 0..1
    gen_throughput_tok_s: float
    waiting_uncached_tokens: int = 0  # SGLang's /metrics has no such gauge; smg then estimates it from waiting_reqs


@dataclass(frozen=True, slots=True)
class OverloadGuard:
    """smg's worker overload protection (on by default): a worker whose last poll shows this many waiting
    requests, or this KV usage, is taken out of routing until a poll shows it below."""

    waiting_reqs: int = 8
    token_usage: float = 0.8
    enabled: bool = True

    def overloaded(self, load: EngineLoad | None) -> bool:
        if not self.enabled or load is None:
            return False
        return load.waiting_reqs >= self.waiting_reqs or load.token_usage >= self.token_usage


@dataclass(frozen=True, slots=True)
class FleetView:
    urls: tuple[str, ...]  # in --worker-urls order
    in_flight: tuple[int, ...]  # requests sent to each worker whose answer has not finished
    eligible: tuple[bool, ...]  # healthy and not vetoed by the overload guard

    def candidates(self) -> list[int]:
        """The eligible workers; every worker when none is (smg then still routes rather than refuse all)."""
        chosen = [i for i, ok in enumerate(self.eligible) if ok]
        return chosen or list(range(len(self.urls)))


def fleet_view(
    urls: tuple[str, ...], in_flight: tuple[int, ...], loads: Mapping[int, EngineLoad], guard: OverloadGuard
) -> FleetView:
    eligible = tuple(not guard.overloaded(loads.get(i)) for i in range(len(urls)))
    return FleetView(urls, in_flight, eligible)
