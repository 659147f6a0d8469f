"""The weekly window rule: which seconds of a long trace week k replays (workloads/weekly_traffic.py uses it,
workloads/scenarios.py checks it). Pure date arithmetic, so the scenario file's checks need nothing else."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

WEEK_PLACEHOLDER = "{week}"
# Week 0 of every weekly window rule unless the scenario names another anchor (a Monday: the first week
# the pipeline's partitions know, assets/partitions.py).
DEFAULT_ANCHOR_WEEK = date(2026, 1, 5)


@dataclass(frozen=True, slots=True)
class WeeklyWindow:
    start_s: float  # where week 0's window starts, seconds of the trace
    step_s: float  # how far each later week's window moves on (seconds of trace)
    anchor_week: date = DEFAULT_ANCHOR_WEEK  # the Monday of week 0


def weeks_since(anchor_week: date, week_start: date) -> int:
    """Whole weeks from the anchor's Monday to `week_start` (negative before it)."""
    return (week_start - anchor_week).days // 7


def week_window_start(rule: WeeklyWindow, duration_s: float, week_start: date, trace_end_s: float) -> float:
    """The start (trace seconds) of the week's window under `rule`; deterministic in the week.

    The window wraps: it starts within [rule.start_s, trace_end_s - duration_s], so it lies inside the trace.
    A trace too short for one window past rule.start_s replays from rule.start_s every week.
    """
    room = trace_end_s - rule.start_s - duration_s
    if room <= 0:
        return rule.start_s
    return rule.start_s + float((weeks_since(rule.anchor_week, week_start) * rule.step_s) % room)
