"""The notice rule: which weekly_trends verdicts reach a person, and in which week. One rule, read by the
regression_notice sensor (pipelines/regression_notice.py) and by the benches that count notices over simulated
years (bench/gate_years.py).

A series is a scenario, endpoint and backend, whatever configuration it ran: weekly_trends.sql's `series`, the one
`sustained` is judged over. The week before a row is its series' rows of the Monday seven days earlier (none, one,
or one per configuration).

- A regression episode is told once, in the week that starts it: a week whose verdict is `regression` or
  `sustained` while no row of its series regressed the week before (neither `regression` nor `sustained`). The
  weeks it goes on (`sustained`) tell nobody again; a week that regresses after one that did not starts a new
  episode, told again. In the mart a `sustained` week always follows a regressed one, so the weeks that start an
  episode are the `regression` ones; a `sustained` week whose week before is missing from what the caller holds
  starts one as far as the rule can see, and is told rather than lost.
- A drift is told in the week it is flagged: `drift` where no row of its series was `drift` the week before.
- Every other verdict (within_noise, ok, no_baseline, not_judged) tells nobody.

A regression notice goes out once a confirmation run of its week agrees: the week is replayed again, judged again,
and told if this rule still says so (that run is the caller's business: the sensor's, or the bench's
simulation of it). A confirmation that does not agree leaves the episode unstarted, and the week after it, judged
again, may start it in its turn: a first regression, confirmed the same way.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Sequence
from datetime import timedelta

from warehouse.marts.judged_metrics import REGRESSED_VERDICTS
from warehouse.marts.mart_rows import WeeklyTrendRow

EPISODE_VERDICTS = REGRESSED_VERDICTS  # the verdicts a regression episode goes on through: regression, sustained


class NoticeKind(enum.Enum):
    """What a notice tells: its `kind` in the notice's JSON."""

    REGRESSION = "regression"  # a regression episode starts (sent once a confirmation run agrees)
    DRIFT = "drift"  # a drift is flagged (warehouse/marts/change_points.py)


def notice_due(verdict: str, week_before: str | Collection[str] | None = None) -> NoticeKind | None:
    """The notice a week's verdict is due, given its series' verdicts the week before (one verdict, several, or
    None: no row that week); None when nobody is to be told."""
    before = () if week_before is None else (week_before,) if isinstance(week_before, str) else week_before
    if verdict in EPISODE_VERDICTS:
        return None if any(v in EPISODE_VERDICTS for v in before) else NoticeKind.REGRESSION
    if verdict == "drift":
        return None if "drift" in before else NoticeKind.DRIFT
    return None


def notices_by_week(verdicts: Sequence[str]) -> list[NoticeKind | None]:
    """The notice due in each week of one series, given its verdicts one a week, in week order, none missing."""
    return [notice_due(verdict, verdicts[week - 1] if week else None) for week, verdict in enumerate(verdicts)]


def series_of(row: WeeklyTrendRow) -> tuple[str, str, str]:
    """The series a weekly_trends row belongs to: scenario, endpoint, backend."""
    return (row.scenario, row.endpoint, row.backend)


def verdicts_week_before(row: WeeklyTrendRow, rows: Sequence[WeeklyTrendRow]) -> tuple[str, ...]:
    """The verdicts of `row`'s series the week before it, among `rows` (weekly_trends rows)."""
    week, series = row.week_start - timedelta(days=7), series_of(row)
    return tuple(r.regression_verdict for r in rows if r.week_start == week and series_of(r) == series)


def row_notice(row: WeeklyTrendRow, rows: Sequence[WeeklyTrendRow]) -> NoticeKind | None:
    """The notice a weekly_trends row is due, its week before read from `rows` (the mart's rows, or more of them)."""
    return notice_due(row.regression_verdict, verdicts_week_before(row, rows))
