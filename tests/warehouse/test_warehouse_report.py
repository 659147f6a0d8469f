"""The weekly report: a self-contained page whose plotly plots really render in a browser (headless Chromium
over its DevTools protocol) and answer the mouse (hover shows values, a legend click hides a series), with
the week's verdicts, the attribution waterfall, cost at the SLO capacity, and a PNG of the cost trend."""

from __future__ import annotations

import re
from datetime import date, timedelta

import pytest

from chromium_devtools import Browser, require_chromium
from warehouse.backends.store import Warehouse
from warehouse.marts.run_rows import RunContext
from warehouse.report.weekly_report import write_weekly_report
from warehouse_builders import endpoint, request, run_info, write_run

WEEKS = [date(2026, 10, 5) + timedelta(weeks=n) for n in range(5)]
TREND_PLOTS = 6


def _week(store: Warehouse, week: date, cost_window_s: float, cached: int, capacity_rps: float) -> None:
    run_id = f"chat-{week.isoformat()}"
    records = [
        request(
            run_id, f"q{i}", 200.0 + i, 2000.0 + i, cached_tokens=cached, reasoning_tokens=40, sent_mono_s=1 + i * 0.5
        )
        for i in range(40)
    ]
    info = run_info(run_id, cost_window_s, requests_total=40, requests_recorded=40, requests_ok=40)
    context = RunContext(
        slo_ttft_ms=1000.0,
        slo_tpot_ms=100.0,
        target_rps=20.0,
        prefix_reuse_share=0.6,
        capacity_rps_at_slo=capacity_rps,
        capacity_source="twin_sweep",
    )
    write_run(store.lake_root, week, "chat", info, endpoint(), records, context)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Warehouse:
    store = Warehouse(tmp_path_factory.mktemp("report") / "wh")
    for week in WEEKS[:4]:
        _week(store, week, 30.0, cached=600, capacity_rps=6.0)
    _week(store, WEEKS[4], 45.0, cached=0, capacity_rps=4.0)  # the last week: cache gone, cost up by half
    store.refresh()
    return store


@pytest.fixture(scope="module")
def report(store):
    return write_weekly_report(store, WEEKS[4])


def test_report_files_and_verdicts(report):
    assert report.html_path.name == f"week={WEEKS[4].isoformat()}.html"
    assert report.cost_png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert report.regressions == 1
    page = report.html_path.read_text()
    assert "verdict-regression" in page and "prefix_cache_hit_rate -60.0 points" in page
    assert page.count("<figure class='plot") == report.plots == TREND_PLOTS + 1  # + this week's waterfall


def test_the_page_opens_offline(report):
    page = report.html_path.read_text()
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=", page)  # nothing fetched: plotly.js is inline
    assert page.count("Plotly.newPlot(") == report.plots


def test_the_page_shows_why_cost_moved_and_the_cost_at_slo_capacity(store, report):
    page = report.html_path.read_text()
    with store.connect() as con:
        change, runtime, price = con.execute(
            "SELECT change_usd, runtime_usd, price_usd FROM cost_attribution WHERE week_start = ?", [WEEKS[4]]
        ).fetchone()
    assert change > 0 and runtime == pytest.approx(change) and price == pytest.approx(0, abs=1e-15)
    section = page[page.index("<h2>Why cost per request moved</h2>") : page.index("<h2>Diagnoses")]
    assert f"<td>${change:+.6f}</td>" in section and "runtime: cache hit vs offered" in section
    capacity = page[page.index("<h2>Cost at the SLO capacity") : page.index("<h2>Fleet sizing")]
    # 8 GPUs x $2/h / 3600 / 4 req/s at the SLO against 8 x 2 x 45 s / 3600 / 40 requests realised.
    assert "<td>4 req/s</td>" in capacity and "<td>$0.00111</td>" in capacity and "<td>$0.00500</td>" in capacity
    assert "<td>endpoint</td>" in capacity  # the price book: the endpoint's own figure


def test_plots_render_and_answer_the_mouse_in_headless_chromium(report, tmp_path):
    require_chromium()
    browser = Browser(tmp_path / "profile")
    try:
        browser.open(report.html_path.as_uri())
        # The page's own script counts the plots the browser drew with a real size and real marks.
        rendered = browser.wait_for("document.body.getAttribute('data-plots-rendered')")
        assert int(rendered) == report.plots
        assert browser.evaluate("document.querySelectorAll('#waterfall-0 .waterfalllayer .point').length") == 10
        # Hover over the cost trend's last point: plotly's hover label shows its value.
        x, y = browser.evaluate(
            "(() => { const gd = document.getElementById('trend-0'); gd.scrollIntoView();"
            " const pts = gd.querySelectorAll('.scatterlayer .trace:first-child .points path.point');"
            " const r = pts[pts.length - 1].getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        browser.mouse_move(x, y)
        label = browser.wait_for(
            "(() => { const t = document.querySelector('#trend-0 .hoverlayer .hovertext'); return t && t.textContent; })()"
        )
        assert "$0.005000 per request" in label and "regression" in label
        # A click on the first legend entry hides that series; plotly marks it legendonly.
        x, y = browser.evaluate(
            "(() => { const r = document.querySelector('#trend-0 .legend .traces').getBoundingClientRect();"
            " return [r.x + 20, r.y + r.height / 2]; })()"
        )
        browser.click(x, y)
        hidden = browser.wait_for("document.getElementById('trend-0').data[0].visible === 'legendonly'", 5.0)
        assert hidden is True
    finally:
        browser.close()
