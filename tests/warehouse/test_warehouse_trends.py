"""weekly_trends: baselines by configuration fingerprint, week-over-week change, the bootstrap interval and
the regression verdict, and the Dagster check that must agree with it."""

from __future__ import annotations

import json
from datetime import date, timedelta

import pandas as pd
import pytest

from endpoints.spec import EndpointRevision
from warehouse.backends.store import Warehouse
from warehouse.marts.mart_rows import WeeklyTrendRow
from warehouse.quality import check_weekly_trends
from warehouse_builders import capacity_context, endpoint, request, run_info, write_run, write_runs

W1 = date(2025, 2, 3)
WEEKS = [W1 + timedelta(days=7 * i) for i in range(6)]  # W1..W6
# 8 GPUs at $200/h: a window of c x 2.25 s costs c USD, so a week's window (N requests at $0.09-0.13) is
# 8-12 s long and gets the minimum 20 arrival blocks, two requests each when they arrive evenly.
SPEC = endpoint(usd_per_gpu_hour=200.0)
N = 40
SERVER_INFO = {"version": "0.5.4", "backend": "sim", "tp_size": 8}
TP4 = {**SERVER_INFO, "tp_size": 4}
# The "config" scenario's endpoint halves its tensor parallelism from WEEKS[4] on, and says why.
NOTE = "tp 4: two replicas per node while the other node is repaired"
RECONFIGURED = endpoint(usd_per_gpu_hour=200.0, revisions=(EndpointRevision(WEEKS[4], ("--tp", "4"), NOTE),))


def _run(week, scenario, cost_per_request, ttft_ms=100.0, cached=500, bunched=False, server_info=SERVER_INFO, run=""):
    """N completed requests in a window that makes the run cost `cost_per_request` each (realised).

    Arriving evenly over the window (every arrival block alike: a tight interval), or bunched into the
    first tenth of it (most blocks without arrivals: a wide interval)."""
    window_s = cost_per_request * N * 2.25
    span = window_s / 10 if bunched else window_s
    run_id = f"{scenario}-{week.isoformat()}{run}"
    records = [
        request(run_id, f"q{i}", ttft_ms, ttft_ms + 100, cached_tokens=cached, sent_mono_s=(i + 0.5) * span / N + 0.01)
        for i in range(N)
    ]
    # The replayed window is the whole cost window (speedup 1): arrival blocks span it.
    info = run_info(
        run_id, window_s, duration_s=window_s, speedup=1.0, requests_total=N, requests_recorded=N, requests_ok=N,
        server_info=server_info,
    )  # fmt: skip
    return info, records


def _week(store, week, scenario, cost_per_request, efficiency_cost=None, spec=SPEC, **kwargs):
    """One run; its efficiency cost is `efficiency_cost` (default: the realised cost, the endpoint at capacity)."""
    info, records = _run(week, scenario, cost_per_request, **kwargs)
    context = capacity_context(efficiency_cost or cost_per_request)
    write_run(store.lake_root, week, scenario, info, spec, records, context)


def _repeats(store, week, scenario, efficiency_costs, cost_per_request=0.10):
    """A week of runs (a canary's repeats) with the same realised cost and their own sweeps' efficiency costs."""
    runs = [_run(week, scenario, cost_per_request, run=f"-{i}") for i in range(len(efficiency_costs))]
    write_runs(store.lake_root, week, scenario, runs, SPEC, [capacity_context(e) for e in efficiency_costs])


@pytest.fixture(scope="module")
def trends(tmp_path_factory) -> list[WeeklyTrendRow]:
    store = Warehouse(tmp_path_factory.mktemp("trends") / "wh")
    for scenario in ("cost-up", "ttft-up", "hits-down", "config"):
        for week, cost in zip(WEEKS[:4], (0.10, 0.11, 0.09, 0.10)):  # baseline median 0.10
            _week(store, week, scenario, cost)
    _week(store, WEEKS[4], "cost-up", 0.13)
    _week(store, WEEKS[5], "cost-up", 0.13)  # still up the week after
    # Two runs a week whose own sweeps differ by about 20%: a rise of 15% is inside that spread.
    for week in WEEKS[:4]:
        _repeats(store, week, "cost-noisy", [0.09, 0.11])
    _repeats(store, WEEKS[4], "cost-noisy", [0.105, 0.125])
    # The same traffic at the same rate every week (a canary): the realised cost cannot move; the runtime got slower
    # (its capacity fell), which only the efficiency cost shows.
    for week in WEEKS[:4]:
        _week(store, week, "capacity-down", 0.10, efficiency_cost=0.06)
    _week(store, WEEKS[4], "capacity-down", 0.10, efficiency_cost=0.085)
    # Past its capacity: no idle part, and said so.
    _week(store, WEEKS[0], "overloaded", 0.10, efficiency_cost=0.125)
    _week(store, WEEKS[4], "ttft-up", 0.10, ttft_ms=150.0)
    _week(store, WEEKS[4], "hits-down", 0.10, cached=300)
    for week in WEEKS[4:]:  # another configuration, from the endpoint's dated revision
        _week(store, week, "config", 0.13, spec=RECONFIGURED.as_of(week), server_info={**SERVER_INFO, "tp_size": 4})
    # A week that ran two configurations (the server restarted with other flags between two runs), then a third:
    # the third's baseline counts weeks, not rows.
    _week(store, WEEKS[2], "two-configs", 0.10)
    two = [_run(WEEKS[3], "two-configs", 0.10), _run(WEEKS[3], "two-configs", 0.10, server_info=TP4, run="-b")]
    write_runs(store.lake_root, WEEKS[3], "two-configs", two, SPEC, [capacity_context(0.10)] * 2)
    _week(store, WEEKS[4], "two-configs", 0.10, server_info={**SERVER_INFO, "tp_size": 2})
    # Twice the GPUs at the same price: twice the week's spend.
    _week(store, WEEKS[0], "big-fleet", 0.10, spec=endpoint("v3-16xh200", gpu_count=16, usd_per_gpu_hour=200.0))
    store.refresh()
    return store.weekly_trends()


def _row(trends, scenario, week) -> WeeklyTrendRow:
    [row] = [r for r in trends if r.scenario == scenario and r.week_start == week]
    return row


def test_a_cost_rise_outside_the_noise_is_a_regression_with_its_reason(trends):
    row = _row(trends, "cost-up", WEEKS[4])
    assert row.baseline_weeks == 4 and row.baseline_efficiency_cost_per_request_usd == pytest.approx(0.10)
    assert row.efficiency_cost_change_pct == pytest.approx(30.0)
    assert row.efficiency_cost_wow_change_pct == pytest.approx(30.0) and row.prev_week_start == WEEKS[3]
    # One run a week, no spread between runs known: the interval is the point itself, above the baseline.
    assert row.efficiency_cost_low_usd == pytest.approx(0.13) == row.efficiency_cost_high_usd
    assert row.regression_verdict == "regression"
    [reason] = json.loads(row.regression_reasons)
    assert reason.startswith("efficiency_cost_per_request_usd +30.0% vs baseline 0.1 (threshold +10%)")
    assert reason.endswith("lies above the baseline")


def test_a_cost_rise_inside_the_spread_between_runs_is_within_noise_not_regression(trends):
    row = _row(trends, "cost-noisy", WEEKS[4])
    assert row.runs == 2 and row.efficiency_cost_per_request_usd == pytest.approx(0.115)
    assert row.efficiency_cost_change_pct == pytest.approx(15.0)
    # Pooled ln-spread of (0.09, 0.11) x 4 weeks and (0.105, 0.125): t(0.975, 5) x sd / sqrt(2) on each side.
    assert row.efficiency_cost_low_usd < 0.10 < 0.115 < row.efficiency_cost_high_usd
    assert row.regression_verdict == "within_noise"
    assert "within noise" in json.loads(row.regression_reasons)[0]


def test_a_slower_runtime_on_the_same_traffic_moves_the_efficiency_cost_not_the_realised_one(trends):
    row = _row(trends, "capacity-down", WEEKS[4])
    assert row.realised_cost_change_pct == pytest.approx(0.0)  # a canary: the same window at the same rate
    assert row.efficiency_cost_change_pct == pytest.approx(100 * (0.085 / 0.06 - 1))
    assert row.idle_cost_per_request_usd == pytest.approx(0.10 - 0.085)
    assert row.load_state == "idle_capacity" and row.load_share_of_capacity == pytest.approx(0.85)
    assert row.regression_verdict == "regression"
    assert json.loads(row.regressed_metrics) == ["efficiency_cost_per_request_usd"]


def test_an_overloaded_week_has_no_idle_part_and_says_why(trends):
    row = _row(trends, "overloaded", WEEKS[0])
    assert row.load_state == "overloaded" and row.load_share_of_capacity == pytest.approx(1.25)
    assert row.idle_cost_per_request_usd is None  # never a negative idle cost
    assert row.realised_cost_per_request_usd < row.efficiency_cost_per_request_usd


def test_a_regression_that_persists_the_next_week_is_sustained(trends):
    row = _row(trends, "cost-up", WEEKS[5])
    # Against the median of the four weeks before (0.11, 0.09, 0.10, 0.13): still past +10% and outside the noise.
    assert row.baseline_efficiency_cost_per_request_usd == pytest.approx(0.105)
    assert row.regression_verdict == "sustained" and json.loads(row.regressed_metrics) == [
        "efficiency_cost_per_request_usd"
    ]
    assert _row(trends, "cost-up", WEEKS[4]).regression_verdict == "regression"  # the first week stays the first


def test_p95_ttft_and_hit_rate_regressions(trends):
    ttft = _row(trends, "ttft-up", WEEKS[4])
    assert ttft.p95_ttft_change_pct == pytest.approx(50.0)
    assert ttft.p95_ttft_low_ms == pytest.approx(150.0, rel=0.01)  # 1 % log bins
    assert ttft.regression_verdict == "regression"
    assert json.loads(ttft.regression_reasons)[0].startswith("p95_ttft_ms +50.0% vs baseline 100")
    hits = _row(trends, "hits-down", WEEKS[4])
    assert hits.hit_rate_change_pts == pytest.approx(-20.0)
    assert hits.regression_verdict == "regression"
    assert json.loads(hits.regression_reasons)[0].startswith("prefix_cache_hit_rate -20.0 points vs baseline 0.5000")


def test_a_new_configuration_is_judged_against_the_previous_one_then_starts_its_own_baseline(trends):
    changed = _row(trends, "config", WEEKS[4])
    assert changed.config_changed is True
    # No week ran this configuration before: the change itself is judged against the old baseline (0.10).
    assert changed.baseline_source == "previous_config" and changed.baseline_weeks == 4
    assert changed.baseline_efficiency_cost_per_request_usd == pytest.approx(0.10)
    assert changed.regression_verdict == "regression"
    reasons = json.loads(changed.regression_reasons)
    # What changed, by the server fact that changed and the revision's note, not by two hashes.
    assert reasons[0] == (
        f"configuration changed this week: tp_size: 8 -> 4, note '{NOTE}'; compared with the previous configuration's "
        "baseline"
    )
    assert reasons[1].startswith("efficiency_cost_per_request_usd +30.0%")
    assert changed.revision_note == NOTE
    # Week over week: against last week, which ran the other configuration (0.10), config_changed beside it.
    assert changed.efficiency_cost_wow_change_pct == pytest.approx(30.0) and changed.prev_week_start == WEEKS[3]
    after = _row(trends, "config", WEEKS[5])
    assert after.config_changed is False
    assert after.baseline_source == "same_config"
    assert after.baseline_weeks == 1 and after.regression_verdict == "ok"
    # The same revision is still in force (its note on the row), but nothing changed against last week: no reason.
    assert after.revision_note == NOTE and after.regression_reasons is None
    assert after.config_fingerprint == changed.config_fingerprint != _row(trends, "config", WEEKS[3]).config_fingerprint


def test_a_new_configuration_s_baseline_counts_earlier_weeks_not_their_configurations(trends):
    third = _row(trends, "two-configs", WEEKS[4])
    assert third.config_changed is True and third.baseline_source == "previous_config"
    # Two earlier weeks, one of which ran two configurations: two weeks of baseline, one row each.
    assert third.baseline_weeks == 2
    assert third.baseline_efficiency_cost_per_request_usd == pytest.approx(0.10)


def test_the_week_s_spend_is_the_fleet_for_the_whole_week_whatever_was_replayed(trends):
    rows = [r for r in trends if r.scenario == "cost-up"]
    # Windows of 9 to 11.7 s were replayed (the cost per request times its requests), one fleet every week.
    assert [round(r.replay_cost_usd, 6) for r in rows] == [4.0, 4.4, 3.6, 4.0, 5.2, 5.2]
    assert {r.week_spend_usd for r in rows} == {8 * 200.0 * 168}  # 8 GPUs x $200 x 168 h, every week
    big = _row(trends, "big-fleet", WEEKS[0])
    assert big.week_spend_usd == 2 * _row(trends, "cost-up", WEEKS[0]).week_spend_usd


def test_steady_weeks_are_ok(trends):
    row = _row(trends, "cost-up", WEEKS[3])
    assert row.baseline_weeks == 3 and row.regression_verdict == "ok" and row.regression_reasons is None


def test_the_dagster_check_fails_exactly_where_the_verdict_says_a_metric_regressed(trends):
    for week in WEEKS:
        rows = [r for r in trends if r.week_start == week]
        result = check_weekly_trends(pd.DataFrame(rows))
        regressed = sorted(r.scenario for r in rows if r.regression_verdict in ("regression", "sustained"))
        assert result.success == (not regressed)
        if regressed:
            [failure] = result.failures
            assert failure.unexpected_count == len(regressed)
            assert sorted(e.split(" ")[1] for e in failure.examples) == regressed
    assert sorted(r.scenario for r in trends if r.regression_verdict == "regression") == [
        "capacity-down",
        "config",
        "cost-up",
        "hits-down",
        "ttft-up",
    ]


def test_the_console_says_why_in_words_and_the_week_s_spend_once_per_endpoint(trends):
    from rich.console import Console

    from pipelines.commands.trend_console import print_regression_verdicts, print_week_spend

    console = Console(record=True, width=400)
    print_regression_verdicts(trends, console)
    print_week_spend(trends, console)
    text = console.export_text()
    # The reasons as the report's first screen words them, the changed flag and the revision's note with them.
    assert "efficiency cost per request +30.0% against its baseline of $0.100000" in text
    assert f"configuration changed this week: tp_size: 8 -> 4, note '{NOTE}'" in text
    assert "efficiency_cost_per_request_usd +" not in text  # no column names for reasons
    # The last week's two scenarios run on one endpoint: its week (8 GPUs x $200 x 168 h) is counted once.
    assert f"GPU spend, week of {WEEKS[5]}: $268,800.00 (v3-8xh200 $268,800.00;" in text


def test_a_notice_of_a_week_whose_configuration_changed_names_the_change(trends):
    from pipelines.regression_notice import regression_notices
    from warehouse.marts.notice_rule import NoticeKind

    [notice] = regression_notices(_row(trends, "config", WEEKS[4]), NoticeKind.REGRESSION, "week.html")
    assert notice.metric == "efficiency_cost_per_request_usd"
    assert notice.configuration_change == (
        f"configuration changed this week: tp_size: 8 -> 4, note '{NOTE}'; compared with the previous configuration's "
        "baseline"
    )
