"""The bundled scenarios' windows are long enough: for every week of a year under their window rules, this
week's 95% interval on cost per request, from the window's arrivals alone (every arrival block costs the
same), is narrower than weekly_trends' cost threshold; and the blocking rule behaves as documented."""

from __future__ import annotations

import re
from datetime import date, timedelta
from pathlib import Path

import pytest

from warehouse.marts.bootstrap_interval import BLOCK_S, MIN_BLOCKS, cost_interval_width
from warehouse.marts.dbt_build import model_sql
from workloads.scenarios import load_scenarios
from workloads.weekly_traffic import week_traffic

REPO = Path(__file__).resolve().parents[2]


def _cost_threshold_pct() -> float:
    sql = model_sql("weekly_trends_undrifted")
    return float(re.search(r"([0-9.]+) AS max_cost_change_pct", sql).group(1))


def test_every_bundled_window_of_a_year_gives_an_interval_narrower_than_the_threshold(tmp_path):
    threshold = _cost_threshold_pct() / 100
    scenarios = load_scenarios(REPO / "workloads" / "scenarios.yaml", REPO)
    widest = {}
    for scenario in scenarios.values():
        for k in range(52):
            traffic = week_traffic(scenario, date(2026, 1, 5) + timedelta(weeks=k), tmp_path)
            arrivals = [t - traffic.start_s for t in traffic.window_rows().table.column("arrival_s").to_pylist()]
            span_s = traffic.duration_s / scenario.speedup
            width = cost_interval_width([t / scenario.speedup for t in arrivals], span_s)
            widest[scenario.name] = max(widest.get(scenario.name, 0.0), width)
            if scenario.weekly_window is None:
                break  # a canary: the same window every week
    assert widest and all(w < threshold for w in widest.values()), widest


def test_a_long_run_gets_a_block_every_five_seconds_and_a_short_one_twenty():
    evenly = [i * 0.5 + 0.25 for i in range(1200)]  # 600 s, two arrivals a second
    assert cost_interval_width(evenly, 600.0) == pytest.approx(0.0)  # every block alike: no width
    assert BLOCK_S == 5.0 and MIN_BLOCKS == 20
    # The same count per block whatever the span: 10 arrivals per 5 s block, or 1 per block of a 20 s run.
    bunched = [t for t in evenly if int(t // 5) % 2 == 0]  # every other 5 s block empty
    assert cost_interval_width(bunched, 600.0) > 0.2
    short = [i + 0.5 for i in range(20)]  # 20 s, one arrival per 1 s block
    assert cost_interval_width(short, 20.0) == pytest.approx(0.0)
