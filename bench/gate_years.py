"""Simulated years of weekly canaries, judged by the warehouse's own regression rule, and the notices they raise.

A series is one scenario-year: 52 consecutive Mondays, each week holding k runs drawn with replacement from the
scenario's pool (bench/gate_pool.py), relabelled with fresh run ids and the week, and from its injection week on
(if it has one) with its change made (bench/gate_changes.py). Every series of a batch goes into one fresh lake
under its own scenario label (`<scenario>.y<year>.<variant>`): weekly_trends judges each scenario, endpoint and
backend as its own series, so one refresh judges them all, exactly as it would judge them one lake each.

The verdicts are the real ones: Warehouse.refresh() builds run_summary, cost_intervals
(warehouse/marts/bootstrap_interval.py) and weekly_trends (dbt model weekly_trends_undrifted); the bench only reads
`regression_verdict`. A notice is what reaches a person, by the pipeline's own notice rule
(warehouse/marts/notice_rule.py), read week by week over each series' verdicts:
- a week the rule says starts a regression episode (regressed, while the week before did not) is confirmed first,
  as the pipeline's sensor does: the week's runs are replaced by k fresh draws (the change still made if the week
  is at or after the injection), the lake refreshed, and the week is a notice only if the rule still tells it.
  The verdicts of later weeks are read again after it (their baselines moved), so a week after a confirmation
  that did not agree may start the episode in its turn. `sustained` weeks tell nobody.
- a week the rule says flags a drift (drift where the week before was not), when the mart has the change-point
  column CHANGE_POINT_COLUMN; without it `drift` is the old spelling of within-noise, and no notice.
Confirmations of different series are independent, so each round confirms every series' next candidate at once.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
from gate_changes import Change, Metric

from warehouse.marts.notice_rule import NoticeKind, notice_due, notices_by_week

FIRST_WEEK = date(2025, 1, 6)
WEEKS = 52
CHANGE_POINT_COLUMN = "drift_start_week"  # present once `drift` means a change-point drift


METRIC_NAMES = tuple(m.value for m in Metric)


@dataclass(frozen=True, slots=True)
class RunSource:
    """One pool run as the bench writes it: its `runs` row and requests (run_id relabelled on write)."""

    runs: pa.Table
    requests: pa.Table


@dataclass(frozen=True, slots=True)
class SeriesPlan:
    label: str  # the lake's scenario name for this series
    scenario: str
    year: int
    change: Change | None  # None: A/A
    injection_week: int | None  # 0-based week index the change starts in
    draws: tuple[tuple[int, ...], ...]  # per week, the pool indices of its k runs
    seed: int  # for the confirmations' draws

    def changed(self, week: int) -> bool:
        return self.change is not None and self.injection_week is not None and week >= self.injection_week


@dataclass(frozen=True, slots=True)
class Notice:
    week: int
    kind: NoticeKind  # REGRESSION (confirmed) or DRIFT (only with CHANGE_POINT_COLUMN)
    metrics: tuple[str, ...]  # the metrics it names (empty: it names none)


@dataclass(slots=True)
class SeriesOutcome:
    plan: SeriesPlan
    verdicts: list[str] = field(default_factory=list)  # the final verdict of each week
    notices: list[Notice] = field(default_factory=list)
    confirmations: int = 0
    unconfirmed: int = 0  # regression weeks the confirmation did not bear out
    changes: list[dict] = field(default_factory=list)  # per week: cost %, p95 TTFT %, hit pts vs baseline


def week_start(week: int) -> date:
    return FIRST_WEEK + timedelta(weeks=week)


def seed_of(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "little")


def plan_series(
    scenario: str,
    year: int,
    change: Change | None,
    pool_size: int,
    runs_per_week: int,
    base_seed: int,
    inject_week: int | None,
) -> SeriesPlan:
    """A reproducible series: draws and injection week from a PRNG seeded by (base_seed, scenario, year, change)."""
    variant = "aa" if change is None else change.slug
    rng = np.random.default_rng(seed_of(base_seed, scenario, year, variant))
    draws = tuple(tuple(int(i) for i in rng.integers(0, pool_size, runs_per_week)) for _ in range(WEEKS))
    injection = None
    if change is not None:
        injection = inject_week if inject_week is not None else int(rng.integers(12, WEEKS - 2))
    return SeriesPlan(
        f"{scenario}.y{year}.{variant}",
        scenario,
        year,
        change,
        injection,
        draws,
        seed_of(base_seed, scenario, year, variant, "confirm"),
    )


def relabelled(source: RunSource, run_id: str, label: str, week: date) -> tuple[pa.Table, pa.Table]:
    runs = source.runs
    for name, value, kind in (
        ("run_id", run_id, pa.string()),
        ("scenario", label, pa.string()),
        ("week_start", week, pa.date32()),
    ):
        index = runs.schema.get_field_index(name)
        runs = runs.set_column(index, runs.schema.field(index), pa.array([value] * runs.num_rows, kind))
    requests = source.requests
    index = requests.schema.get_field_index("run_id")
    ids = pa.array([run_id] * requests.num_rows, requests.schema.field(index).type)
    return runs, requests.set_column(index, requests.schema.field(index), ids)


class YearLake:
    """One fresh warehouse holding a batch of series; writes weeks, refreshes, reads verdicts."""

    def __init__(self, root: Path, sources: dict[tuple[str, str], Sequence[RunSource]]) -> None:
        # sources: (scenario, variant slug) -> the pool's runs with that variant's change made ("aa": none)
        from warehouse.backends.store import Warehouse

        self.store = Warehouse(root)
        self.sources = sources
        self.refreshes = 0

    def write_week(self, plan: SeriesPlan, week: int, draws: Sequence[int], attempt: int = 0) -> None:
        variant = plan.change.slug if plan.change is not None and plan.changed(week) else "aa"
        pool = self.sources[(plan.scenario, variant)]
        when = week_start(week)
        runs, requests = [], []
        for j, index in enumerate(draws):
            r, q = relabelled(pool[index], f"{plan.label}-w{week:02d}-a{attempt}-r{j}", plan.label, when)
            runs.append(r)
            requests.append(q)
        self.store.write_partition("runs", when, plan.label, pa.concat_tables(runs))
        self.store.write_partition("requests", when, plan.label, pa.concat_tables(requests))

    def judged(self) -> tuple[dict[str, list[dict]], bool]:
        """Refresh; every series' weekly_trends rows in week order, and whether the mart has CHANGE_POINT_COLUMN."""
        self.store.refresh()
        self.refreshes += 1
        with self.store.connect() as con:
            cursor = con.execute("SELECT * FROM weekly_trends ORDER BY scenario, week_start")
            names = [d[0] for d in cursor.description]
            rows = [dict(zip(names, row)) for row in cursor.fetchall()]
        by_series: dict[str, list[dict]] = {}
        for row in rows:
            by_series.setdefault(row["scenario"], []).append(row)
        for label, series in by_series.items():  # one row a week, so a week's index is its row's
            if [r["week_start"] for r in series] != [week_start(w) for w in range(WEEKS)]:
                raise RuntimeError(f"{label}: weekly_trends does not hold one row for each of the {WEEKS} weeks")
        return by_series, CHANGE_POINT_COLUMN in names


def named_metrics(row: dict, kind: NoticeKind) -> tuple[str, ...]:
    """The judged metrics a notice names: a regression's regressed_metrics, a drift's drift_metrics (either read as
    a JSON list, else as text naming them), else the metrics its reasons mention."""
    column = "drift_metrics" if kind is NoticeKind.DRIFT else "regressed_metrics"
    for text in (row.get(column), row.get("regression_reasons")):
        if text:
            named = tuple(m for m in METRIC_NAMES if m in str(text))
            if named:
                return named
    return ()


def _due(rows: list[dict], week: int) -> NoticeKind | None:
    """The notice the rule says a week of a series is due, given the week before it."""
    return notice_due(rows[week]["regression_verdict"], rows[week - 1]["regression_verdict"] if week > 0 else None)


def _candidate(rows: list[dict], start: int) -> int | None:
    """The first week from `start` that starts a regression episode."""
    for week in range(start, len(rows)):
        if _due(rows, week) is NoticeKind.REGRESSION:
            return week
    return None


def judge_series(
    lake: YearLake, plans: Sequence[SeriesPlan], runs_per_week: int, pool_sizes: dict[str, int], log: Callable
) -> list[SeriesOutcome]:
    """Write every series, refresh, confirm each first regression in rounds; the notices of each series."""
    for plan in plans:
        for week in range(WEEKS):
            lake.write_week(plan, week, plan.draws[week])
    rows, change_points = lake.judged()
    outcomes = {p.label: SeriesOutcome(p) for p in plans}
    rngs = {p.label: np.random.default_rng(p.seed) for p in plans}
    cursor = {p.label: 0 for p in plans}
    confirmed: dict[str, set[int]] = {p.label: set() for p in plans}
    while True:
        pending: dict[str, int] = {}
        for plan in plans:
            candidate = _candidate(rows[plan.label], cursor[plan.label])
            if candidate is not None:
                pending[plan.label] = candidate
        if not pending:
            break
        for plan in plans:
            if plan.label in pending:
                week = pending[plan.label]
                fresh = tuple(int(i) for i in rngs[plan.label].integers(0, pool_sizes[plan.scenario], runs_per_week))
                lake.write_week(plan, week, fresh, attempt=1)
        log(f"    confirming {len(pending)} regression week(s)")
        rows, change_points = lake.judged()
        for label, week in pending.items():
            outcome = outcomes[label]
            outcome.confirmations += 1
            if _due(rows[label], week) is NoticeKind.REGRESSION:
                confirmed[label].add(week)
            else:
                outcome.unconfirmed += 1
            cursor[label] = week + 1
    for plan in plans:
        outcome = outcomes[plan.label]
        series = rows[plan.label]
        outcome.verdicts = [r["regression_verdict"] for r in series]
        outcome.changes = [
            {"cost": r["efficiency_cost_change_pct"], "ttft": r["p95_ttft_change_pct"], "hit": r["hit_rate_change_pts"]}
            for r in series
        ]
        for week in sorted(confirmed[plan.label]):
            kind = NoticeKind.REGRESSION
            outcome.notices.append(Notice(week, kind, named_metrics(series[week], kind)))
        if change_points:
            for week, due in enumerate(notices_by_week(outcome.verdicts)):
                if due is NoticeKind.DRIFT:
                    outcome.notices.append(Notice(week, due, named_metrics(series[week], due)))
        outcome.notices.sort(key=lambda n: n.week)
    return [outcomes[p.label] for p in plans]


def thresholds_of(lake: YearLake) -> tuple[float, float, float]:
    """The thresholds the mart itself carries (cost %, p95 TTFT %, hit rate points)."""
    with lake.store.connect() as con:
        row = con.execute(
            "SELECT any_value(cost_threshold_pct), any_value(p95_ttft_threshold_pct), "
            "any_value(hit_rate_threshold_pts) FROM weekly_trends"
        ).fetchone()
    assert row is not None, "weekly_trends is empty"
    return (row[0], row[1], row[2])


def judge_batch(
    plans: Sequence[SeriesPlan],
    sources: dict[tuple[str, str], Sequence[RunSource]],
    runs_per_week: int,
    pool_sizes: dict[str, int],
    log: Callable = print,
    root: Path | None = None,
) -> tuple[list[SeriesOutcome], int, tuple[float, float, float]]:
    """Judge `plans` in one fresh lake (a temporary folder unless `root`); outcomes, refreshes, mart thresholds."""
    with tempfile.TemporaryDirectory(prefix="gate-year-") as tmp:
        lake = YearLake(Path(root or tmp), sources)
        outcomes = judge_series(lake, plans, runs_per_week, pool_sizes, log)
        return outcomes, lake.refreshes, thresholds_of(lake)


def variant_sources(runs: Sequence[RunSource], changes: Sequence[Change]) -> dict[str, list[RunSource]]:
    """The pool as each variant writes it: "aa" unchanged, and each change's slug with the change made."""
    out = {"aa": list(runs)}
    for change in changes:
        out[change.slug] = [RunSource(*change.apply(r.runs, r.requests)) for r in runs]
    return out
