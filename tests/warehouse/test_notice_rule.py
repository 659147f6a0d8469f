"""The notice rule (warehouse/marts/notice_rule.py): a regression episode is told once, in the week that starts it,
not again while it is sustained; a regression after a week that did not regress is a new episode, told again; a
drift is told the week it is flagged."""

from __future__ import annotations

from dataclasses import fields
from datetime import date, timedelta

import pytest

from warehouse.marts.mart_rows import WeeklyTrendRow
from warehouse.marts.notice_rule import NoticeKind, notice_due, notices_by_week, row_notice, verdicts_week_before

R, D = NoticeKind.REGRESSION, NoticeKind.DRIFT
MONDAY = date(2026, 10, 19)


def test_a_first_regression_week_is_told() -> None:
    assert notice_due("regression", "ok") is R
    assert notice_due("regression", "within_noise") is R
    assert notice_due("regression", None) is R  # the series' first judged week


def test_a_sustained_week_is_not_told_again() -> None:
    assert notice_due("sustained", "regression") is None
    assert notice_due("sustained", "sustained") is None


def test_a_regression_after_a_week_that_did_not_regress_is_told_again() -> None:
    verdicts = ["no_baseline", "ok", "regression", "sustained", "sustained", "ok", "regression", "sustained"]
    assert notices_by_week(verdicts) == [None, None, R, None, None, None, R, None]


def test_a_drift_is_told_the_week_it_is_flagged_and_not_the_weeks_after() -> None:
    assert notice_due("drift", "ok") is D
    assert notice_due("drift", "drift") is None
    assert notices_by_week(["ok", "drift", "drift", "within_noise", "drift"]) == [None, D, None, None, D]
    # A drift the week after a regression is a drift flagged: its own notice.
    assert notices_by_week(["ok", "regression", "drift"]) == [None, R, D]


@pytest.mark.parametrize("verdict", ["ok", "within_noise", "no_baseline", "not_judged"])
def test_other_verdicts_tell_nobody(verdict: str) -> None:
    assert notice_due(verdict, None) is None
    assert notice_due(verdict, "regression") is None


def test_a_sustained_week_whose_start_is_not_held_is_told_rather_than_lost() -> None:
    assert notice_due("sustained", None) is R
    assert notice_due("sustained", "ok") is R


def test_the_week_before_is_a_verdict_or_several_not_the_letters_of_one() -> None:
    assert notice_due("drift", "drift") is None  # not "drift" in ("d", "r", "i", "f", "t")
    # Several rows the week before (one per configuration): any regressed one carries the episode on.
    assert notice_due("sustained", ("ok", "regression")) is None
    assert notice_due("regression", ("ok", "within_noise")) is R
    assert notice_due("drift", frozenset({"ok", "drift"})) is None


def _row(
    week: int, verdict: str, endpoint: str = "v3", config: str | None = "c1", scenario: str = "chat"
) -> WeeklyTrendRow:
    blank: dict[str, object] = {f.name: None for f in fields(WeeklyTrendRow)}
    values = {"week_start": MONDAY + timedelta(weeks=week), "scenario": scenario, "endpoint": endpoint,
              "backend": "sim", "config_fingerprint": config, "regression_verdict": verdict}  # fmt: skip
    return WeeklyTrendRow(**(blank | values))  # type: ignore[arg-type]


def test_a_row_reads_its_week_before_from_its_own_series_whatever_configuration() -> None:
    rows = [
        _row(0, "regression", config="c1"),
        _row(0, "ok", endpoint="other"),  # another series
        _row(0, "regression", scenario="other"),  # another series
        _row(1, "sustained", config="c2"),  # the configuration changed: the same series, as weekly_trends judges it
        _row(1, "regression", endpoint="other"),
        _row(2, "ok"),
        _row(3, "regression"),
    ]
    assert verdicts_week_before(rows[3], rows) == ("regression",)
    assert verdicts_week_before(rows[4], rows) == ("ok",)
    assert verdicts_week_before(rows[0], rows) == ()
    assert [row_notice(r, rows) for r in rows] == [R, None, R, None, R, None, R]
