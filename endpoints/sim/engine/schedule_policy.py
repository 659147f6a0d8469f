"""Admission order of waiting requests (SGLang's --schedule-policy)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import Enum

from endpoints.sim.engine.radix_cache import RadixCache
from endpoints.sim.engine.sim_request import SimRequest

# SGLang falls back to fcfs when the queue is this long: matching every waiting prompt each step costs too much.
LPM_MAX_QUEUE = 128


class SchedulePolicy(str, Enum):
    FCFS = "fcfs"
    LPM = "lpm"


def _fcfs(waiting: Sequence[SimRequest], caches: Sequence[RadixCache]) -> list[SimRequest]:
    return list(waiting)


def _lpm(waiting: Sequence[SimRequest], caches: Sequence[RadixCache]) -> list[SimRequest]:
    """Longest cached prefix first, each matched in its own rank's tree (`caches`: one per attention rank); arrival
    order among equals (sorted() is stable)."""
    if len(waiting) > LPM_MAX_QUEUE or caches[0].disabled:
        return list(waiting)
    matched = {id(r): caches[r.dp_rank].match_prefix(r.input_ids, len(r.input_ids) - 1)[0] for r in waiting}
    return sorted(waiting, key=lambda r: -matched[id(r)])


POLICIES: dict[SchedulePolicy, Callable[[Sequence[SimRequest], Sequence[RadixCache]], list[SimRequest]]] = {
    SchedulePolicy.FCFS: _fcfs,
    SchedulePolicy.LPM: _lpm,
}
