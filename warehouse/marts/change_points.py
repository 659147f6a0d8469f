"""Slow drift: a change point over a canary's weekly series that no single week's threshold caught (verdict 'drift').

The weekly rule compares a week with the median of the four before it, so a cost that creeps up 1% a week never
crosses its +10% threshold: each week's baseline creeps with it. Here every canary week is tested as the end of its
series' last RECENT_WEEKS + PRIOR_WEEKS weeks (same scenario, endpoint, backend and configuration; at least
RECENT_WEEKS + MIN_PRIOR_WEEKS of them), two ways, in log space for cost and TTFT:

- a step: the RECENT_WEEKS weeks up to it against the weeks before them, by a two-sample t test (pooled variance),
  as perfherder's and Otava's two-window tests find a shift;
- a creep: the least-squares slope over the whole window, by its t statistic (a steady creep spreads over both
  windows of the step test and hides from it).

Either counts when its move (recent mean against prior mean; the slope times the window's span) goes the harmful
way by at least half the weekly threshold (cost +5%, p95 TTFT +10%, hit rate -5 points with today's thresholds), a
size worth someone's time, and its t passes the one-sided ALPHA quantile. The week the drift started: for a step,
the split of the window that best separates it (the largest t), the first week after it; for a creep, the window's
first week. A row already judged regression or sustained keeps that verdict, and a metric that regressed
within the two windows is not reported again as a drift of the same move. Judged in this order after
weekly_trends.sql, on rows it left 'ok' or 'within_noise'.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import date

import duckdb
import orjson

from warehouse.marts.student_t import t_quantile

RECENT_WEEKS = 2  # a step shows in its second week: caught within two weeks of happening
PRIOR_WEEKS = 8
MIN_PRIOR_WEEKS = 4
ALPHA = 0.001  # one-sided; 52 weeks x 3 metrics a year stay near one chance alarm in six years
SIZE_SHARE_OF_THRESHOLD = 0.5


@dataclass(frozen=True, slots=True)
class _Metric:
    name: str  # the weekly_trends column
    threshold_column: str  # the rule's threshold for it
    log_scale: bool  # compared as ln(value): a relative move
    sign: int  # +1: a rise harms, -1: a fall harms


METRICS = (
    _Metric("efficiency_cost_per_request_usd", "cost_threshold_pct", True, +1),
    _Metric("p95_ttft_ms", "p95_ttft_threshold_pct", True, +1),
    _Metric("prefix_cache_hit_rate", "hit_rate_threshold_pts", False, -1),
)


@dataclass(frozen=True, slots=True)
class Drift:
    metric: str
    start_week: date
    change: float  # recent mean against prior mean: % for a log-scale metric, points for the hit rate
    t: float


# The columns of drift_rows' tuples: the weekly_trends row (its key) and what its drift sets there
# (verdict 'drift'; the dbt model weekly_trends applies them, and types and documents the columns).
DRIFT_COLUMNS = (
    "scenario", "endpoint", "backend", "config_fingerprint", "week_start", "drift_start_week", "drift_metrics",
    "regression_reasons",
)  # fmt: skip


def drift_rows(con: duckdb.DuckDBPyConnection, weekly_trends: str) -> list[tuple]:
    """The rows of `weekly_trends` (a table or view with its columns, verdicts before drift) that drifted, each
    with its drift_start_week, drift_metrics and regression_reasons (the week's reasons plus the drift's)."""
    columns = ", ".join(f"{m.name}, {m.threshold_column}" for m in METRICS)
    rows = con.execute(
        f"""SELECT scenario, endpoint, backend, config_fingerprint, week_start, regression_verdict,
                   regressed_metrics, regression_reasons, {columns}
            FROM {weekly_trends} WHERE role IS DISTINCT FROM 'live'
            ORDER BY scenario, endpoint, backend, config_fingerprint, week_start"""
    ).fetchall()
    series: dict[tuple, list[tuple]] = defaultdict(list)
    for row in rows:
        series[row[:4]].append(row[4:])
    marked = []
    for key, weeks in series.items():
        for index, week in enumerate(weeks):
            if week[1] not in ("ok", "within_noise"):
                continue
            drifts = _drifts(weeks, index)
            if not drifts:
                continue
            reasons = orjson.loads(week[3]) if week[3] else []
            reasons += [_reason(d) for d in drifts]
            metrics = orjson.dumps([d.metric for d in drifts]).decode()
            marked.append((*key, week[0], min(d.start_week for d in drifts), metrics, orjson.dumps(reasons).decode()))
    return marked


def _drifts(weeks: list[tuple], index: int) -> list[Drift]:
    first = max(0, index - RECENT_WEEKS - PRIOR_WEEKS + 1)
    window = weeks[first : index + 1]
    if len(window) < RECENT_WEEKS + MIN_PRIOR_WEEKS:
        return []
    regressed = set()
    for week in window:
        if week[1] in ("regression", "sustained") and week[2]:
            regressed.update(orjson.loads(week[2]))
    found = []
    for position, metric in enumerate(METRICS):
        if metric.name in regressed:
            continue
        values = [_scaled(w[4 + 2 * position], metric) for w in window]
        threshold = window[-1][5 + 2 * position]
        known = [float(v) for v in values if v is not None]
        if len(known) < len(values) or threshold is None:
            continue
        prior, recent = known[:-RECENT_WEEKS], known[-RECENT_WEEKS:]
        move = metric.sign * (_mean(recent) - _mean(prior))
        size = SIZE_SHARE_OF_THRESHOLD * abs(threshold) / 100.0
        critical = t_quantile(1.0 - ALPHA, len(known) - 2)
        t = _t(prior, recent, metric.sign)
        if (math.expm1(move) if metric.log_scale else move) >= size and t >= critical:
            start = max(range(2, len(known) - 1), key=lambda split: _t(known[:split], known[split:], metric.sign))
            found.append(Drift(metric.name, window[start][0], _change(move, metric), t))
            continue
        slope, slope_t = _slope(known, metric.sign)
        creep = slope * (len(known) - 1)
        if (math.expm1(creep) if metric.log_scale else creep) >= size and slope_t >= critical:
            found.append(Drift(metric.name, window[0][0], _change(creep, metric), slope_t))
    return found


def _change(move: float, metric: _Metric) -> float:
    """A harmful move, in the reason's unit: % for a log-scale metric, points for the hit rate."""
    return 100.0 * math.expm1(move) if metric.log_scale else 100.0 * move * metric.sign


def _slope(values: list[float], sign: int) -> tuple[float, float]:
    """The least-squares slope per week in the harmful direction, and its t statistic (inf when exact)."""
    n = len(values)
    xs = range(n)
    x_mean, y_mean = (n - 1) / 2.0, _mean(values)
    sxx = sum((x - x_mean) ** 2 for x in xs)
    slope = sign * sum((x - x_mean) * (y - y_mean) for x, y in zip(xs, values, strict=True)) / sxx
    residual = sum((y - y_mean - sign * slope * (x - x_mean)) ** 2 for x, y in zip(xs, values, strict=True))
    se = math.sqrt(residual / (n - 2) / sxx)
    if se == 0.0:
        return slope, math.inf if slope > 0 else -math.inf if slope < 0 else 0.0
    return slope, slope / se


def _scaled(value: float | None, metric: _Metric) -> float | None:
    if value is None:
        return None
    if metric.log_scale:
        return math.log(value) if value > 0 else None
    return value


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _t(before: list[float], after: list[float], sign: int) -> float:
    """Student's two-sample t of after - before in the harmful direction (pooled variance); inf when both are flat."""
    n1, n2 = len(before), len(after)
    m1, m2 = _mean(before), _mean(after)
    ss = sum((v - m1) ** 2 for v in before) + sum((v - m2) ** 2 for v in after)
    diff = sign * (m2 - m1)
    scale = math.sqrt(ss / (n1 + n2 - 2) * (1.0 / n1 + 1.0 / n2)) if n1 + n2 > 2 else 0.0
    if scale == 0.0:
        return math.inf if diff > 0 else -math.inf if diff < 0 else 0.0
    return diff / scale


def _reason(drift: Drift) -> str:
    unit = "points" if drift.metric == "prefix_cache_hit_rate" else "%"
    return (
        f"{drift.metric} drifted {drift.change:+.1f} {unit} since week {drift.start_week.isoformat()} "
        f"(t = {drift.t:.1f}, one-sided p < {ALPHA:g} over the canary's last weeks): a move no single week's "
        "threshold caught"
    )
