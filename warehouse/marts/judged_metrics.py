"""The metrics weekly_trends' regression rule judges, declared once, each with the weekly_trends columns that
say how it moved.

The rule and its thresholds are the mart's SQL (dbt model weekly_trends_undrifted: the `thresholds` CTE, then
`judged`): a metric regresses when its change against the baseline is past its threshold and this week's 95%
block-bootstrap interval excludes the baseline; regressed_metrics and regression_reasons name the metric.
tests/warehouse/test_warehouse_mart_drift.py fails when the SQL judges a metric this list lacks, or the other
way round, or when a column named here is not a weekly_trends column.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from warehouse.marts.mart_rows import WeeklyTrendRow

# The verdicts that say a metric regressed this week (regressed_metrics names it): a first week, or one that persists.
REGRESSED_VERDICTS = frozenset({"regression", "sustained"})


@dataclass(frozen=True, slots=True)
class JudgedReading:
    """One judged metric of one weekly_trends row: where it stands against its baseline and threshold."""

    value: float | None  # this week's
    baseline: float | None  # the baseline's (median of the earlier weeks)
    change: float | None  # value against baseline, in the metric's change_unit
    threshold: float | None  # the rule's threshold on the change, same unit
    interval_low: float | None  # this week's 95% interval of the metric
    interval_high: float | None


@dataclass(frozen=True, slots=True)
class JudgedMetric:
    name: str  # its weekly_trends column, as regressed_metrics names it; regression_reasons start with it
    change_column: str  # the change against the baseline
    change_unit: Literal["%", "points"]
    threshold_column: str  # the rule's threshold on that change
    baseline_column: str
    low_column: str  # this week's 95% interval
    high_column: str

    @property
    def columns(self) -> tuple[str, ...]:
        """Every weekly_trends column the metric is read from."""
        return (
            self.name,
            self.change_column,
            self.threshold_column,
            self.baseline_column,
            self.low_column,
            self.high_column,
        )

    def reading(self, row: WeeklyTrendRow) -> JudgedReading:
        return JudgedReading(
            value=getattr(row, self.name),
            baseline=getattr(row, self.baseline_column),
            change=getattr(row, self.change_column),
            threshold=getattr(row, self.threshold_column),
            interval_low=getattr(row, self.low_column),
            interval_high=getattr(row, self.high_column),
        )


# In the order regressed_metrics lists them.
JUDGED_METRICS: tuple[JudgedMetric, ...] = (
    JudgedMetric(
        "efficiency_cost_per_request_usd", "efficiency_cost_change_pct", "%", "cost_threshold_pct",
        "baseline_efficiency_cost_per_request_usd", "efficiency_cost_low_usd", "efficiency_cost_high_usd",
    ),
    JudgedMetric(
        "p95_ttft_ms", "p95_ttft_change_pct", "%", "p95_ttft_threshold_pct", "baseline_p95_ttft_ms",
        "p95_ttft_low_ms", "p95_ttft_high_ms",
    ),
    JudgedMetric(
        "prefix_cache_hit_rate", "hit_rate_change_pts", "points", "hit_rate_threshold_pts",
        "baseline_prefix_cache_hit_rate", "hit_rate_low", "hit_rate_high",
    ),
)  # fmt: skip


def judged_metric(name: str) -> JudgedMetric:
    """The judged metric regressed_metrics calls `name`."""
    for metric in JUDGED_METRICS:
        if metric.name == name:
            return metric
    judged = [m.name for m in JUDGED_METRICS]
    raise KeyError(f"{name!r} is not a metric the regression rule judges (it judges {judged})")
