"""The cap on running requests an SGLang server really enforces, read from its /server_info.

Batch occupancy divides the running requests a worker reports (sglang:num_running_reqs, summed over
dp_rank) by this cap, one worker at a time, so a fleet's occupancy stays a fraction of its slots.
"""

from __future__ import annotations

import math


def max_running_requests(server_info: dict) -> int | None:
    """The cap on running requests one SGLang server (one worker of a fleet) enforces, or None.

    SGLang reports what its schedulers enforce in /server_info `internal_states`, one entry per DP rank:
    `effective_max_running_requests_per_dp` (Scheduler.get_internal_state, python/sglang/srt/managers/
    scheduler.py: the scheduler's own `max_running_requests`, after it derived it from the KV pool, the
    request pool and the flag). The worker's cap is their sum. Builds that do not report it: the
    configured --max-running-requests, which each rank enforces divided by dp_size under DP attention
    (the scheduler's `max_running_requests // dp_size`), in full otherwise (each data-parallel replica
    has its own scheduler). When neither is reported (the flag unset, so SGLang derived a cap it did not
    say), None: unknown, not a guess.
    """
    states = server_info.get("internal_states")
    if isinstance(states, list) and states:
        per_rank = [
            _positive_int(s.get("effective_max_running_requests_per_dp")) for s in states if isinstance(s, dict)
        ]
        caps = [cap for cap in per_rank if cap is not None]
        if len(caps) == len(states):  # every rank an object that reports its cap
            return sum(caps)
    configured = _positive_int(server_info.get("max_running_requests"))
    if configured is None and isinstance(server_info.get("scheduler_info"), dict):
        configured = _positive_int(server_info["scheduler_info"].get("max_running_requests"))
    if configured is None:
        return None
    dp_size = _positive_int(server_info.get("dp_size")) or 1
    per_rank_cap = configured // dp_size if server_info.get("enable_dp_attention") is True else configured
    return per_rank_cap * dp_size if per_rank_cap > 0 else None


def _positive_int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return int(value) if value >= 1 else None
