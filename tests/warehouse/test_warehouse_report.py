"""The weekly report: a self-contained page whose plotly plots really render in a browser (headless Chromium
over its DevTools protocol) and answer the mouse (hover shows values, a legend click hides a series), with
the week's verdicts, the attribution waterfall, cost at the SLO capacity, the fleet plan (its frontier and
table), and a PNG of the cost trend."""

from __future__ import annotations

import html
import re
from dataclasses import replace
from datetime import date, timedelta

import pytest

from chromium_devtools import Browser, require_chromium
from endpoints.capacity.fleet_plan import FleetPlan, ShapeProbe, fleet_plan_text
from endpoints.router.router_spec import RouterSpec
from endpoints.spec import EndpointMode, FleetSpec, WorkerGroup, WorkerRole
from warehouse.backends.store import Warehouse
from warehouse.marts.mart_rows import FleetPlanRow
from warehouse.marts.run_rows import RunContext
from warehouse.report import interactive_plots
from warehouse.report.report_data import load_report_data
from warehouse.report.weekly_report import trend_figures, write_weekly_report
from warehouse_builders import endpoint, request, run_info, server_sample, write_run

WEEKS = [date(2026, 10, 5) + timedelta(weeks=n) for n in range(5)]
TREND_PLOTS = 6
PLAN_WEEK = date(2026, 11, 23)
FRONTIER = "Fleet plan: cost per request against p95 TTFT"  # its figure's caption, in a week with a plan


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
        running_requests_at_slo=16.0,
    )
    samples = [server_sample(run_id, t, "sglang:num_running_reqs", 4.0) for t in (0.5, cost_window_s / 2)]
    write_run(store.lake_root, week, "chat", info, endpoint(), records, context, server_samples=samples)


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


def _hover(browser, div_id: str, mark_js: str) -> str:
    """Moves the mouse onto the mark `mark_js` returns (a JavaScript function body, the plot's div as gd) and
    returns the hover label plotly shows."""
    x, y = browser.evaluate(
        f"(() => {{ const gd = document.getElementById('{div_id}'); gd.scrollIntoView();"
        f" const mark = (() => {{ {mark_js} }})();"
        " const r = mark.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()"
    )
    browser.mouse_move(x, y)
    return browser.wait_for(
        f"(() => {{ const t = document.querySelector('#{div_id} .hoverlayer .hovertext'); return t && t.textContent; }})()"
    )


def test_report_files_and_verdicts(report):
    assert report.html_path.name == f"week={WEEKS[4].isoformat()}.html"
    assert report.cost_png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert report.regressions == 1
    page = report.html_path.read_text()
    assert "verdict-regression" in page and "prefix-cache hit rate -60.0 points against its baseline" in page
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
    section = page[page.index("<h2>Why the realised cost per request moved</h2>") : page.index("<h2>Diagnoses")]
    assert f"<td>{'+' if change > 0 else '-'}${abs(change):.6f}</td>" in section and "runtime: prefix cache" in section
    capacity = page[page.index("<h2>Two costs per request") : page.index("<h2>Fleet sizing")]
    # 8 GPUs x $2/h / 3600 / 4 req/s at the SLO (the efficiency cost) against 8 x 2 x 45 s / 3600 / 40 requests
    # (realised).
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
        assert browser.evaluate("document.querySelectorAll('#waterfall-0 .waterfalllayer .point').length") == 12
        # Hover over the cost trend's last point: plotly's hover label shows its value (the efficiency cost, at the
        # SLO capacity: 8 GPUs x $2/h / 3600 / 4 requests/s).
        last_point = (
            "const pts = gd.querySelectorAll('.scatterlayer .trace:first-child .points path.point');"
            " return pts[pts.length - 1];"
        )
        label = _hover(browser, "trend-0", last_point)
        assert "$0.001111 per request at capacity" in label and "regression" in label
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


def _shape(replicas: int, policy: str, p95_ttft_ms: float, holds: bool, chosen: bool = False) -> ShapeProbe:
    return ShapeProbe(replicas, policy, 8 * replicas, 0.99 if holds else 0.80, holds, 0.5 + replicas / 100,
                      p95_ttft_ms, 1 / replicas + 0.02, 28.3 if chosen else None, chosen)  # fmt: skip


# Per scenario: the shapes its plan tried. "planned": cache_aware holds at 4, round_robin only at 5;
# "rr-misses": no round_robin count tried holds.
PLANS = {
    "planned": (_shape(3, "cache_aware", 1250.0, False), _shape(4, "cache_aware", 800.0, True, True),
                _shape(5, "cache_aware", 600.0, True), _shape(4, "round_robin", 1400.0, False),
                _shape(5, "round_robin", 900.0, True)),
    "rr-misses": (_shape(2, "cache_aware", 700.0, True, True), _shape(2, "round_robin", 1600.0, False),
                  _shape(3, "round_robin", 1100.0, False)),
}  # fmt: skip


def _planned_run(store: Warehouse, scenario: str, shapes: tuple[ShapeProbe, ...] | None) -> None:
    run_id = f"{scenario}-run"
    records = [request(run_id, f"q{i}", 100.0, 300.0, sent_mono_s=(i + 1) * 0.5, lag_ms=0.0) for i in range(20)]
    info = run_info(run_id, 20.0, requests_total=20, requests_recorded=20, requests_ok=20)
    fleet = FleetSpec(RouterSpec("cache_aware"), (WorkerGroup(WorkerRole.REGULAR, 2, 8),))
    plan = None if shapes is None else fleet_plan_text(FleetPlan(20.0, 1000.0, 100.0, 1200, 1.0, shapes, 6, 12.5))
    context = RunContext(slo_ttft_ms=1000.0, slo_tpot_ms=100.0, target_rps=20.0, capacity_rps_at_slo=10.0,
                         capacity_source="twin_sweep", fleet_plan_json=plan)  # fmt: skip
    spec = endpoint("v3-fleet", gpu_count=16, fleet=fleet)
    write_run(store.lake_root, PLAN_WEEK, scenario, info, spec, records, context)


@pytest.fixture(scope="module")
def planned_store(tmp_path_factory) -> Warehouse:
    store = Warehouse(tmp_path_factory.mktemp("planned") / "wh")
    for scenario, shapes in PLANS.items():
        _planned_run(store, scenario, shapes)
    _planned_run(store, "unplanned", None)
    store.refresh()
    return store


@pytest.fixture(scope="module")
def planned_report(planned_store):
    return write_weekly_report(planned_store, PLAN_WEEK)


def _run_price(store: Warehouse, scenario: str) -> list[FleetPlanRow]:
    return [r for r in store.fleet_plans() if r.scenario == scenario and r.run_price]


def test_the_frontier_draws_each_shape_at_the_run_s_price(planned_store):
    fig = interactive_plots.fleet_frontier(load_report_data(planned_store, PLAN_WEEK).plans)
    traces = {t.name: t for t in fig.data}
    rows = {(r.router_policy, r.replicas): r for r in _run_price(planned_store, "planned")}
    assert len(rows) == len(PLANS["planned"])  # one point per shape, not one per price book
    held = traces["planned: cache_aware"]
    assert list(held.text) == ["4 x cache_aware", "5 x cache_aware"]
    assert list(held.x) == [rows["cache_aware", n].p95_ttft_ms for n in (4, 5)]
    assert list(held.y) == [rows["cache_aware", n].usd_per_request_at_target for n in (4, 5)]
    missed = traces["planned: round_robin, misses the target"]  # cheaper, but hollow and grey
    assert list(missed.text) == ["4 x round_robin"] and missed.marker.symbol == "circle-open"
    assert list(missed.y) == [rows["round_robin", 4].usd_per_request_at_target]
    assert missed.legendgroup == traces["planned: round_robin"].legendgroup == "planned: round_robin"
    chosen = traces["planned: chosen: cheapest holding the target"]
    assert list(chosen.text) == ["4 x cache_aware"] and chosen.marker.symbol == "star-open"
    four = rows["cache_aware", 4]
    assert tuple(held.customdata[0]) == (4, 32, four.good_share, four.hit_rate, four.fleet_usd_per_hour, "yes")
    assert "rr-misses: round_robin" not in traces  # none held: only its hollow series
    assert [(s.x0, s.line.dash) for s in fig.layout.shapes] == [(1000.0, "dash")]  # both scenarios' SLO TTFT
    assert not interactive_plots.fleet_frontier(load_report_data(planned_store, PLAN_WEEK).plans.iloc[0:0]).data


def test_the_page_shows_the_frontier_and_the_plan_table(planned_store, planned_report):
    page = planned_report.html_path.read_text()
    assert f"<figcaption>{FRONTIER}</figcaption>" in page and 'id="trend-6"' in page
    assert page.count("<figure class='plot") == planned_report.plots == TREND_PLOTS + 1  # no baseline: no waterfall
    assert f"data-plots='{planned_report.plots}'" in page and page.count("Plotly.newPlot(") == planned_report.plots
    section = page[page.index("<h2>Fleet plan</h2>") : page.index("<h2>Trends</h2>")]
    assert page.index("<h2>Fleet sizing and budget</h2>") < page.index("<h2>Fleet plan</h2>")
    assert "unplanned" not in section and section.count("<table class='plan'>") == 2
    rows = {(r.router_policy, r.replicas): r for r in _run_price(planned_store, "planned")}
    chosen, rr = rows["cache_aware", 4], rows["round_robin", 5]
    assert (chosen.fleet_usd_per_hour, rr.fleet_usd_per_hour) == (64.0, 80.0)  # 32 and 40 GPUs at $2/h
    assert (
        "<tr class='plan-chosen'><td><b>chosen</b></td><td>cache_aware</td><td>4</td><td>32</td><td>yes</td>"
        f"<td>99.0%</td><td>800 ms</td><td>54.0%</td><td>$64.00</td><td>${chosen.usd_per_request_at_target:.5f}</td>"
        f"<td>28.3 req/s</td><td>{chosen.break_even_rps:,.3g} req/s</td></tr>"
    ) in section
    assert section.count("plan-chosen") == 2 and section.count("<td>no</td>") == 4  # one chosen per plan
    extra_pct = (rr.fleet_usd_per_hour / chosen.fleet_usd_per_hour - 1) * 100
    assert (
        f"<p class='plan-comparison'>cheapest: 4 x cache_aware (32 GPUs, ${chosen.fleet_usd_per_hour:,.2f}/h); "
        f"round_robin needs 5 replicas (${rr.fleet_usd_per_hour:,.2f}/h, {extra_pct:+.0f}%)</p>"
    ) in section
    assert "round_robin needs 5 replicas ($80.00/h, +25%)" in section
    assert "cheapest: 2 x cache_aware (16 GPUs, $32.00/h); no round_robin count tried held the target" in section
    assert "95% of the share one idle replica keeps" in section and "mart fleet_plans" in section
    fleet = page[page.index("<h2>Fleet sizing and budget</h2>") : page.index("<h2>Fleet plan</h2>")]
    assert "<td>4 (fleet_plan)</td>" in fleet and "<td>4 (capacity)</td>" in fleet  # unplanned: 20 x 2 / 10


def test_a_week_without_plans_has_neither_figure_nor_table(report):
    page = report.html_path.read_text()
    assert FRONTIER not in page and "<h2>Fleet plan</h2>" not in page and "class='plan" not in page
    fleet = page[page.index("<h2>Fleet sizing and budget</h2>") : page.index("<h2>Trends</h2>")]
    assert "(capacity)</td>" in fleet


def test_a_database_refreshed_before_fleet_plans_renders_without_them(tmp_path):
    store = Warehouse(tmp_path / "wh")
    _planned_run(store, "planned", PLANS["planned"])
    store.refresh()
    with store.connect(read_only=False) as con:
        con.execute("DROP TABLE fleet_plans")  # as a database refreshed before the mart existed
    report = write_weekly_report(store, PLAN_WEEK)
    page = report.html_path.read_text()
    assert report.plots == TREND_PLOTS and FRONTIER not in page and "<h2>Fleet plan</h2>" not in page


def test_the_frontier_renders_and_answers_the_mouse_in_headless_chromium(planned_report, tmp_path):
    require_chromium()
    browser = Browser(tmp_path / "profile")
    try:
        browser.open(planned_report.html_path.as_uri())
        assert int(browser.wait_for("document.body.getAttribute('data-plots-rendered')")) == planned_report.plots
        # 8 shapes and 2 chosen rings.
        assert browser.evaluate("document.querySelectorAll('#trend-6 .scatterlayer .point').length") == 10
        ring = (
            "const i = gd.data.findIndex(t => t.name.startsWith('planned: chosen'));"
            " return gd.querySelectorAll('.scatterlayer .trace')[i].querySelector('path.point');"
        )
        label = _hover(browser, "trend-6", ring)
        assert "4 x cache_aware: 4 replicas, 32 GPUs" in label and "fleet $64.00/h" in label
    finally:
        browser.close()


TWIN_ERROR = html.escape("The twin's error: shadow canaries, twin / real")  # its figure's caption, as on the page


def test_the_shadow_canaries_ratios_are_plotted_per_week_only_where_a_real_endpoint_ran(tmp_path, report):
    assert TWIN_ERROR not in report.html_path.read_text()  # twins only: their runs are the model
    store = Warehouse(tmp_path / "wh")
    attached = endpoint("r1-attach", mode=EndpointMode.ATTACH, url="http://gpu-node:30000")
    for week, ttft_ratio in zip(WEEKS[:2], (0.9, 1.2)):
        run_id = f"real-{week.isoformat()}"
        records = [request(run_id, f"q{i}", 200.0, 2000.0, sent_mono_s=1 + i * 0.5) for i in range(10)]
        context = RunContext(
            shadow_output_tokens_per_s_ratio=1.05, shadow_p50_ttft_ratio=ttft_ratio, shadow_p50_tpot_ratio=0.97
        )
        write_run(store.lake_root, week, "chat", run_info(run_id, 30.0), attached, records, context)
    store.refresh()
    shadowed = write_weekly_report(store, WEEKS[1])
    assert TWIN_ERROR in shadowed.html_path.read_text()
    data = load_report_data(store, WEEKS[1])
    assert len(trend_figures(data)) == TREND_PLOTS + 1
    figure = interactive_plots.twin_error(data.runs)
    ttft = next(trace for trace in figure.data if trace.name.endswith("median TTFT"))
    assert list(ttft.y) == [0.9, 1.2] and len(figure.data) == 3


def _pd_shape(prefill: int, decode: int, p95_ttft_ms: float, holds: bool, chosen: bool = False) -> ShapeProbe:
    shape = _shape(prefill + decode, "cache_aware", p95_ttft_ms, holds, chosen)
    return replace(shape, prefill_workers=prefill, decode_workers=decode)


def test_a_plan_with_disaggregated_shapes_shows_them_beside_the_replicas_with_the_twins_error(tmp_path):
    shapes = (_shape(3, "cache_aware", 1300.0, False), _shape(4, "cache_aware", 800.0, True),
              _pd_shape(1, 1, 1400.0, False), _pd_shape(1, 2, 700.0, True, True))  # fmt: skip
    store = Warehouse(tmp_path / "wh")
    _planned_run(store, "pd-planned", shapes)
    store.refresh()
    data = load_report_data(store, PLAN_WEEK)
    traces = {t.name: t for t in interactive_plots.fleet_frontier(data.plans).data}
    assert list(traces["cache_aware, disaggregated"].text) == ["1P2D x cache_aware"]
    assert list(traces["cache_aware, disaggregated, misses the target"].text) == ["1P1D x cache_aware"]
    assert list(traces["cache_aware"].text) == ["4 x cache_aware"]
    page = write_weekly_report(store, PLAN_WEEK).html_path.read_text()
    section = page[page.index("<h2>Fleet plan</h2>") : page.index("<h2>Trends</h2>")]
    assert "<td><b>chosen</b></td><td>cache_aware</td><td>1P + 2D</td><td>24</td><td>yes</td>" in section
    assert "cheapest: 1P2D x cache_aware (24 GPUs, $48.00/h); cache_aware needs 4 replicas ($64.00/h, +33%)" in section
    # No twin_calibration week in this warehouse: the page says the error band is not known rather than none.
    assert data.error_band is None and "validation error has not been computed in this warehouse yet" in section


def test_wide_expert_parallel_decode_shapes_are_priced_by_their_gpus_and_named_on_the_frontier(tmp_path):
    wide = replace(_pd_shape(1, 1, 900.0, True), gpus=24, decode_ep_size=16)  # 8 prefill GPUs + one 16-GPU decode
    shapes = (_shape(2, "cache_aware", 800.0, True, True), _pd_shape(1, 1, 700.0, True), wide)
    store = Warehouse(tmp_path / "wh")
    _planned_run(store, "ep-planned", shapes)
    store.refresh()
    data = load_report_data(store, PLAN_WEEK)
    traces = {t.name: t for t in interactive_plots.fleet_frontier(data.plans).data}
    assert list(traces["cache_aware, disaggregated, EP16 decode"].text) == ["1P1D (EP16 decode) x cache_aware"]
    page = write_weekly_report(store, PLAN_WEEK).html_path.read_text()
    section = page[page.index("<h2>Fleet plan</h2>") : page.index("<h2>Trends</h2>")]
    assert "<td>1P + 1D of EP16</td><td>24</td>" in section
    assert (
        "cheapest: 2 x cache_aware (16 GPUs, $32.00/h); disaggregated, 1P1D x cache_aware ($32.00/h, +0%); "
        "disaggregated with EP16 decode, 1P1D (EP16 decode) x cache_aware ($48.00/h, +50%)"
    ) in section


def test_money_is_written_with_its_sign_before_the_dollar():
    from warehouse.report.value_text import usd as _usd

    assert _usd(-0.001293, "+.6f") == "-$0.001293" and _usd(0.000412, "+.6f") == "+$0.000412"
    assert _usd(0.0000001, "+.6f") == "$0.000000" and _usd(-0.0000001, "+.6f") == "$0.000000"  # rounds to nothing
    assert _usd(1234.5, ",.2f") == "$1,234.50" and _usd(None, ".5f") == "—"


def test_every_verdict_says_why_not_only_a_regression():
    from warehouse.report.verdict_words import verdict_in_words as _why

    row = {"regression_verdict": "ok", "efficiency_cost_change_pct": 2.5, "cost_threshold_pct": 10.0}
    assert _why(row) == "efficiency cost +2.5% vs baseline (threshold +10%); latency and hit rate inside theirs too"
    assert "inside this week's run-to-run noise" in _why({**row, "regression_verdict": "within_noise"})
    assert _why({**row, "regression_verdict": "no_baseline"}).startswith("the first week of this series")
    assert _why({**row, "regression_verdict": "not_judged"}).startswith("live traffic")


def test_a_configuration_is_named_by_the_week_it_first_ran_never_by_its_hash():
    import pandas as pd

    runs = pd.DataFrame(
        {
            "week_start": [date(2026, 11, 9), date(2026, 11, 16), date(2026, 11, 23), date(2026, 11, 9)],
            "scenario": ["chat", "chat", "chat", "r1"],
            "endpoint": ["v3", "v3", "v3", "r1-8x"],
            "config_fingerprint": ["f7f735d9053b", "8b7e70b96f97", "f7f735d9053b", "aaaaaaaaaaaa"],
        }
    )
    names = [name for name, _ in interactive_plots._configurations(runs)]
    assert names == ["chat (v3) from 2026-11-09", "chat (v3) from 2026-11-16", "r1 (r1-8x)"]


def test_a_configuration_s_legend_carries_the_note_of_the_revision_that_brought_it_in():
    import pandas as pd

    runs = pd.DataFrame(
        {
            "week_start": [date(2026, 11, 9), date(2026, 11, 16), date(2026, 11, 23), date(2026, 11, 9)],
            "scenario": ["chat", "chat", "chat", "r1"],
            "endpoint": ["v3", "v3", "v3", "r1-8x"],
            "config_fingerprint": ["f7f735d9053b", "8b7e70b96f97", "f7f735d9053b", "aaaaaaaaaaaa"],
            # The last week went back to the first configuration: its note is not that configuration's first.
            "revision_note": [None, "radix cache off while debugging a leak", "radix cache back on", None],
        }
    )
    names = [name for name, _ in interactive_plots._configurations(runs)]
    assert names == [
        "chat (v3) from 2026-11-09",
        "chat (v3) from 2026-11-16: radix cache off while debugging a leak",
        "r1 (r1-8x)",
    ]
