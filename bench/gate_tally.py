"""What bench/gate_error_rates.py counts over the judged series (bench/gate_years.py), and the issue's targets.

- False notices. An A/A series has no change: every notice is false, and the headline rate is A/A notices per
  A/A scenario-year. In an injected series a notice before the injection week is false too (reported apart,
  per 52 weeks of pre-injection exposure), and so is one at or after it that names only metrics the change did not
  touch (counted, not turned into a rate: those weeks were exposed on two of the three metrics only). A notice
  that names no metric is never counted as a detection.
- Detection of an injected change: a notice (confirmed regression, or the first week of a drift) naming the
  injected metric in the injection week ("in the week"), or in it or the week after ("within two weeks").
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from gate_changes import CHANGES, Change
from gate_years import WEEKS, SeriesOutcome

PERFHERDER = "Mozilla perfherder, over a year (the issue's figures): 12.5% false-positive alert groups, 6.8% missed"


@dataclass(frozen=True, slots=True)
class Share:
    hits: int
    trials: int

    def text(self) -> str:
        if self.trials == 0:
            return "n/a"
        low, high = wilson(self.hits, self.trials)
        return f"{self.hits}/{self.trials} = {self.hits / self.trials:.0%} [{low:.0%}, {high:.0%}]"

    @property
    def value(self) -> float | None:
        return None if self.trials == 0 else self.hits / self.trials


def wilson(hits: int, trials: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a share."""
    p = hits / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    return max(0.0, centre - half), min(1.0, centre + half)


def injection(outcome: SeriesOutcome) -> tuple[Change, int]:
    """An injected series' change and the week it starts in (a plan has both, or neither: A/A)."""
    change, week = outcome.plan.change, outcome.plan.injection_week
    assert change is not None and week is not None, f"{outcome.plan.label} is an A/A series"
    return change, week


def false_notices(outcome: SeriesOutcome) -> tuple[int, int, int]:
    """(false notices before the injection, or all of an A/A series; weeks they were exposed; off-metric ones after)."""
    if outcome.plan.change is None:
        return len(outcome.notices), WEEKS, 0
    change, week = injection(outcome)
    before = sum(1 for n in outcome.notices if n.week < week)
    after = sum(1 for n in outcome.notices if n.week >= week and n.metrics and change.metric.value not in n.metrics)
    return before, week, after


def detected(outcome: SeriesOutcome, within_weeks: int) -> bool:
    change, week = injection(outcome)
    last = week + within_weeks - 1
    return any(week <= n.week <= last and change.metric.value in n.metrics for n in outcome.notices)


def detection(
    outcomes: Sequence[SeriesOutcome], change: Change, within_weeks: int, scenario: str | None = None
) -> Share:
    chosen = [o for o in outcomes if o.plan.change == change and (scenario is None or o.plan.scenario == scenario)]
    return Share(sum(detected(o, within_weeks) for o in chosen), len(chosen))


def realised_change(outcomes: Sequence[SeriesOutcome], change: Change) -> float | None:
    """The median, over the series injected with `change`, of the injected metric's change against its baseline in
    the injection week (as the mart computes it), to show what the injection did."""
    column = {"COST": "cost", "P95_TTFT": "ttft", "HIT_RATE": "hit"}[change.metric.name]
    values = sorted(
        v for o in outcomes if o.plan.change == change for v in [o.changes[injection(o)[1]][column]] if v is not None
    )
    return None if not values else values[len(values) // 2]


def aa_noise(outcomes: Sequence[SeriesOutcome]) -> dict[str, tuple[float, float]]:
    """Over A/A weeks with a baseline: the 99th percentile and the largest change in the rule's direction."""
    out = {}
    for column, sign in (("cost", 1), ("ttft", 1), ("hit", -1)):
        values = sorted(
            sign * week[column]
            for o in outcomes
            if o.plan.change is None
            for week in o.changes
            if week[column] is not None
        )
        if values:
            out[column] = (values[min(len(values) - 1, int(0.99 * len(values)))], values[-1])
    return out


def verdict_counts(outcomes: Sequence[SeriesOutcome]) -> Counter:
    return Counter(v for o in outcomes for v in o.verdicts)


@dataclass(frozen=True, slots=True)
class Target:
    text: str
    measured: str
    passed: bool | None  # None: nothing to judge it on


def targets(outcomes: Sequence[SeriesOutcome], scenarios: Sequence[str]) -> list[Target]:
    """The issue's three targets, each with what was measured and PASS/FAIL."""
    rates = []
    for scenario in scenarios:
        aa = [o for o in outcomes if o.plan.change is None and o.plan.scenario == scenario]
        if aa:
            rates.append((scenario, sum(len(o.notices) for o in aa) / len(aa)))
    worst = max(rates, key=lambda r: r[1]) if rates else None
    out = [
        Target(
            "at most 1 false notice per scenario-year (A/A), every scenario",
            "n/a" if worst is None else f"worst {worst[1]:.2f} ({worst[0]})",
            None if worst is None else worst[1] <= 1.0,
        )
    ]
    for factor, weeks, goal, text in (
        (2.0, 1, 0.95, "changes at twice the threshold caught in the week they happen"),
        (1.0, 2, 0.80, "changes at the threshold caught within two weeks"),
    ):
        chosen = [c for c in CHANGES if math.isclose(c.times_threshold, factor)]
        share = Share(
            sum(detection(outcomes, c, weeks).hits for c in chosen),
            sum(detection(outcomes, c, weeks).trials for c in chosen),
        )
        out.append(
            Target(f">= {goal:.0%} of {text}", share.text(), None if share.value is None else share.value >= goal)
        )
    return out
