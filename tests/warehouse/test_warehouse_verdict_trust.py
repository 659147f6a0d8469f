"""What makes a verdict worth trusting, on real lakes: a week of several runs widens its interval by how much the
runs differ (pooled over the series' weeks), and a creep or a step that no week's threshold catches is a `drift`
with the week it started, while a flat canary is never one."""

from __future__ import annotations

import json
import math
from datetime import date, timedelta

import pytest

from warehouse.backends.store import Warehouse
from warehouse.marts.mart_rows import WeeklyTrendRow
from warehouse_builders import capacity_context, endpoint, request, run_info, write_runs

W1 = date(2025, 1, 6)
WEEKS = [W1 + timedelta(days=7 * i) for i in range(14)]
SPEC = endpoint(usd_per_gpu_hour=200.0)  # a window of c x 2.25 s costs c USD
N = 200  # requests a run: arriving evenly, every block alike, so a run's own interval is its point
SERVER_INFO = {"version": "0.5.4", "backend": "sim", "tp_size": 8}


def _run(store: Warehouse, week: date, scenario: str, *costs_per_request: float) -> None:
    """The week's runs, one per cost per request (realised, and efficiency: each run at its capacity)."""
    runs = []
    for run, cost_per_request in enumerate(costs_per_request):
        window_s = cost_per_request * N * 2.25
        run_id = f"{scenario}-{week.isoformat()}-{run}"
        records = [request(run_id, f"q{i}", 100.0, 200.0, cached_tokens=500,
                           sent_mono_s=(i + 0.5) * window_s / N + 0.01) for i in range(N)]  # fmt: skip
        info = run_info(run_id, window_s, duration_s=window_s, speedup=1.0, requests_total=N, requests_recorded=N,
                        requests_ok=N, server_info=SERVER_INFO)  # fmt: skip
        runs.append((info, records))
    write_runs(store.lake_root, week, scenario, runs, SPEC, [capacity_context(c) for c in costs_per_request])


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Warehouse:
    store = Warehouse(tmp_path_factory.mktemp("trust") / "wh")
    for week in WEEKS[:6]:
        # Two runs a week, 4% apart (the same window on two nodes), against one run a week of the same costs.
        _run(store, week, "two-runs", 0.100, 0.104)
        _run(store, week, "one-run", 0.102)
    for i, week in enumerate(WEEKS):
        jitter = 0.002 * (-1) ** i  # +-0.2%: the weeks are not all alike
        _run(store, week, "creep", 0.100 * (1.015**i) * (1 + jitter))  # +1.5% a week: never +10% on a week
        _run(store, week, "flat", 0.100 * (1 + jitter))
        _run(store, week, "step", 0.100 * (1.07 if i >= 9 else 1.0) * (1 + jitter))  # +7% from the 10th week
    store.refresh()
    return store


def _row(rows: list[WeeklyTrendRow], scenario: str, week: date) -> WeeklyTrendRow:
    [row] = [r for r in rows if r.scenario == scenario and r.week_start == week]
    return row


def _width(row: WeeklyTrendRow) -> float:
    assert row.realised_cost_low_usd is not None and row.realised_cost_high_usd is not None
    return math.log(row.realised_cost_high_usd / row.realised_cost_low_usd)


def test_a_week_of_two_runs_widens_its_interval_by_their_spread(store):
    rows = store.weekly_trends()
    one, two = _row(rows, "one-run", WEEKS[5]), _row(rows, "two-runs", WEEKS[5])
    assert (one.runs, two.runs) == (1, 2)
    assert _width(one) == pytest.approx(0.0, abs=1e-9)  # one run, every block alike: no spread is known
    # The spread of ln(cost) between two runs 4% apart: sd = ln(1.04) / sqrt(2), pooled over 6 weeks (df 6);
    # the mean of two runs has sd / sqrt(2), and the 95% interval t(0.975, 6) = 2.447 of it on each side.
    sd = math.log(1.04) / math.sqrt(2)
    assert _width(two) == pytest.approx(2 * 2.447 * sd / math.sqrt(2), rel=0.01)
    # The efficiency cost is one figure a run (its own capacity sweep): its interval is the spread alone.
    assert math.log(two.efficiency_cost_high_usd / two.efficiency_cost_low_usd) == pytest.approx(
        2 * 2.447 * sd / math.sqrt(2), rel=0.01
    )
    assert one.efficiency_cost_low_usd == one.efficiency_cost_high_usd == pytest.approx(0.102)
    with store.connect() as con:
        interval = con.execute(
            "SELECT runs, run_spread_df, cost_run_sd_log, efficiency_run_sd_log FROM cost_intervals "
            "WHERE scenario = 'two-runs' AND week_start = ?", [WEEKS[5]],
        ).fetchone()  # fmt: skip
    assert interval[:2] == (2, 6) and interval[2] == pytest.approx(sd, rel=1e-6)
    assert interval[3] == pytest.approx(sd, rel=1e-6)
    # The first week knows only its own two runs (df 1): its interval is far wider.
    assert _width(_row(rows, "two-runs", WEEKS[0])) > 4 * _width(two)


def test_a_creep_no_week_catches_is_a_drift_with_the_week_it_started(store):
    rows = [r for r in store.weekly_trends() if r.scenario == "creep"]
    assert all(r.regression_verdict not in ("regression", "sustained") for r in rows)  # never +10% on a week
    drifts = [r for r in rows if r.regression_verdict == "drift"]
    assert drifts, [r.regression_verdict for r in rows]
    first = drifts[0]
    assert json.loads(first.drift_metrics) == ["efficiency_cost_per_request_usd"]
    assert first.drift_start_week is not None and first.drift_start_week < first.week_start
    assert any("drifted" in reason for reason in json.loads(first.regression_reasons))


def test_a_step_under_the_threshold_is_a_drift_from_the_week_it_happened(store):
    rows = [r for r in store.weekly_trends() if r.scenario == "step"]
    drifts = [r for r in rows if r.regression_verdict == "drift"]
    assert drifts and drifts[0].drift_start_week == WEEKS[9]
    assert all(r.regression_verdict in ("ok", "no_baseline") for r in rows if r.week_start < WEEKS[9])


def test_a_flat_canary_never_drifts(store):
    rows = [r for r in store.weekly_trends() if r.scenario == "flat"]
    assert {r.regression_verdict for r in rows} <= {"ok", "no_baseline"}
