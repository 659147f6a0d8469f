"""bench/gate_error_rates.py's year-judging part on a tiny noiseless pool (one synthetic run, tests/warehouse_builders.py):
the real refresh judges an A/A year and a year with cost per request +40% from week 20 in one lake. The A/A year raises
no notice; the injected one raises exactly one, confirmed, in its injection week, naming cost per request."""

from __future__ import annotations

import sys
from datetime import date
from pathlib import Path

import pyarrow.compute as pc
import pytest

from warehouse.marts.notice_rule import NoticeKind
from warehouse.marts.run_rows import RunContext, build_run_row
from warehouse_builders import endpoint, request, requests_table, run_info

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from gate_changes import Change, Metric  # noqa: E402
from gate_years import RunSource, judge_batch, plan_series, variant_sources  # noqa: E402

SCENARIO = "canary"
INJECTION_WEEK = 20


def _pool() -> list[RunSource]:
    """One run: 60 requests over 120 s (24 interval blocks), every TTFT 100 ms, half of every prompt cached, at half
    its capacity."""
    run_id = "pool-0"
    records = [request(run_id, f"r{i}", 100.0, 900.0, cached_tokens=500, sent_mono_s=2.0 * i) for i in range(60)]
    info = run_info(run_id, window_s=120.0, requests_total=60, requests_recorded=60, requests_ok=60)
    context = RunContext(role="canary", capacity_rps_at_slo=1.0, capacity_source="twin_sweep")
    runs = build_run_row(info, endpoint(), SCENARIO, date(2025, 1, 6), context)
    return [RunSource(runs, requests_table(records))]


def test_changes_move_only_their_metric() -> None:
    [run] = _pool()
    cost = Change(Metric.COST, 20).apply(run.runs, run.requests)
    assert cost[0].column("capacity_rps_at_slo")[0].as_py() == pytest.approx(1.0 / 1.2)
    assert cost[0].column("usd_per_gpu_hour").equals(run.runs.column("usd_per_gpu_hour"))  # the realised cost stays
    assert cost[1].equals(run.requests)
    _, slow = Change(Metric.P95_TTFT, 40).apply(run.runs, run.requests)
    ttft_ms = pc.multiply(pc.subtract(slow.column("first_token_mono_s"), slow.column("sent_mono_s")), 1000).to_pylist()
    assert ttft_ms == pytest.approx([140.0] * 60)
    e2e_ms = pc.multiply(pc.subtract(slow.column("finish_mono_s"), slow.column("sent_mono_s")), 1000).to_pylist()
    assert e2e_ms == pytest.approx([940.0] * 60)  # the same 40 ms later
    _, fewer = Change(Metric.HIT_RATE, 20).apply(run.runs, run.requests)
    assert fewer.column("cached_tokens").to_pylist() == [300] * 60  # 20% of 1,000 prompt tokens
    _, none_left = Change(Metric.HIT_RATE, 60).apply(run.runs, run.requests)
    assert none_left.column("cached_tokens").to_pylist() == [0] * 60  # floored at 0


@pytest.mark.timeout(120)
def test_an_aa_year_raises_nothing_and_a_40pct_cost_change_is_caught_in_its_week(tmp_path) -> None:
    change = Change(Metric.COST, 40)
    sources = {(SCENARIO, k): v for k, v in variant_sources(_pool(), [change]).items()}
    plans = [plan_series(SCENARIO, 0, c, 1, 2, 0, INJECTION_WEEK) for c in (None, change)]
    outcomes, refreshes, thresholds = judge_batch(plans, sources, 2, {SCENARIO: 1}, root=tmp_path / "wh")
    assert thresholds == (10.0, 20.0, -10.0)
    aa, injected = outcomes
    assert aa.notices == [] and aa.confirmations == 0
    assert all(v in ("no_baseline", "ok") for v in aa.verdicts), aa.verdicts
    assert [(n.week, n.kind, n.metrics) for n in injected.notices] == [
        (INJECTION_WEEK, NoticeKind.REGRESSION, ("efficiency_cost_per_request_usd",))
    ]
    assert injected.confirmations == 1 and injected.unconfirmed == 0
    assert injected.changes[INJECTION_WEEK]["cost"] == pytest.approx(40.0)
    assert refreshes == 2  # the year's, and the confirmation's
