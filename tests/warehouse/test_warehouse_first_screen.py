"""The weekly page's first screen answers what the week cost, whether it regressed, why and what to do: in the HTML,
and as headless Chromium draws it at 1,400 x 900 and on a phone (390 x 844); a sustained regression links to the
week it began; the attribution table keeps to its column; the waterfall's bars are to scale (its axis from $0)."""

from __future__ import annotations

import html
import re
from datetime import date, timedelta
from typing import get_args

import pytest
import yaml

from chromium_devtools import Browser, require_chromium
from warehouse.backends.store import Warehouse
from warehouse.marts.dbt_build import model_sql, project_dir
from warehouse.marts.judged_metrics import JUDGED_METRICS
from warehouse.marts.run_rows import RunContext
from warehouse.report import interactive_plots
from warehouse.report.first_screen import verdict_anchor, waterfall_anchor
from warehouse.report.verdict_words import (
    ACTIONS,
    LEVER_ACTIONS,
    METRIC_WORDS,
    DiagnosisVerdict,
    Lever,
    what_to_do,
    why_in_words,
)
from warehouse.report.weekly_report import write_weekly_report
from warehouse_builders import endpoint, request, run_info, server_sample, write_run

WEEKS = [date(2026, 10, 5) + timedelta(weeks=n) for n in range(6)]
BEGAN, LATEST = WEEKS[4], WEEKS[5]  # the prefix cache is gone from WEEKS[4] on: a regression, then sustained
SPEND_USD = 8 * 2.0 * 168  # the builders' endpoint: 8 GPUs at $2/GPU-hour, held the whole week


def _week(store: Warehouse, week: date, cached: int, window_s: float, capacity_rps: float) -> None:
    run_id = f"chat-{week.isoformat()}"
    records = [
        request(run_id, f"q{i}", 200.0 + i, 2000.0 + i, cached_tokens=cached, sent_mono_s=1 + i * 0.5)
        for i in range(40)
    ]
    info = run_info(run_id, window_s, requests_total=40, requests_recorded=40, requests_ok=40)
    context = RunContext(
        slo_ttft_ms=1000.0, slo_tpot_ms=100.0, prefix_reuse_share=0.6, capacity_rps_at_slo=capacity_rps,
        capacity_source="twin_sweep", running_requests_at_slo=16.0,
    )  # fmt: skip
    samples = [server_sample(run_id, t, "sglang:num_running_reqs", 12.0) for t in (0.5, window_s / 2)]
    write_run(store.lake_root, week, "chat", info, endpoint(), records, context, server_samples=samples)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Warehouse:
    store = Warehouse(tmp_path_factory.mktemp("first") / "wh")
    for week in WEEKS[:4]:
        _week(store, week, cached=600, window_s=30.0, capacity_rps=6.0)
    for week in (BEGAN, LATEST):
        _week(store, week, cached=0, window_s=45.0, capacity_rps=4.0)
    store.refresh()
    return store


@pytest.fixture(scope="module")
def pages(store):
    """The week the regression began and the latest week, each on its own page in the same folder."""
    return {week: write_weekly_report(store, week).html_path for week in (BEGAN, LATEST)}


def _trend(store: Warehouse, week: date) -> dict:
    rows = [r for r in store.weekly_trends() if r.week_start == week]
    assert len(rows) == 1
    return {name: getattr(rows[0], name) for name in rows[0].__slots__}


def _first_screen(page: str) -> str:
    return page[page.index("<section class='first-screen'") : page.index("</section>")]


def test_the_first_screen_says_what_the_week_cost_whether_it_regressed_why_and_what_to_do(store, pages):
    trend = _trend(store, LATEST)
    assert trend["regression_verdict"] == "sustained" and trend["week_spend_usd"] == pytest.approx(SPEND_USD)
    screen = _first_screen(pages[LATEST].read_text())
    # The week's spend is the endpoint's for the whole week, not the 45 s replay's ($0.20).
    assert (
        "<span class='spend'>$2,688.00</span> this week" in screen and "GPU spend this week: <b>$2,688.00</b>" in screen
    )
    assert (
        "1 of 1 series regressed" in screen
        and "<dd class='verdict'><b>sustained</b>: regressed since the week" in screen
    )
    why = html.unescape(screen[screen.index("<dd class='why'>") :])
    # In words: the metric as a reader names it, its baseline in its unit; no column names, no JSON.
    assert "efficiency cost per request +50.0% against its baseline of $0.000741 (threshold +10%)" in why
    assert (
        "prefix-cache hit rate -60.0 points against its baseline of 60.0%" in why and "beyond this week's noise" in why
    )
    assert "_usd" not in why and "[" not in why
    with store.connect() as con:
        change, cache = con.execute(
            "SELECT change_usd, prefix_cache_usd FROM cost_attribution WHERE week_start = ?", [LATEST]
        ).fetchone()
    assert change > 0 and cache > change  # the cache's loss, part offset by the others
    assert f"moved +${change:.6f} against its baseline, its largest part runtime: prefix cache at +${cache:.6f}" in why
    action = screen[screen.index("<dd class='action'>") :]
    assert "Find the change that moved it" in action and "Tune the runtime: the prefix cache misses reuse" in action
    assert screen.index("<dt>spent</dt>") < screen.index("<dt>verdict</dt>") < screen.index("<dt>what to do</dt>")


def test_a_sustained_regression_links_to_the_week_it_began_and_each_to_its_waterfall(store, pages):
    began = _trend(store, BEGAN)
    assert began["regression_verdict"] == "regression"
    latest = pages[LATEST].read_text()
    target = f"week={BEGAN.isoformat()}.html#{verdict_anchor(began)}"
    assert f"regressed since the week of <a href='{target}'>{BEGAN}</a>" in _first_screen(latest)
    assert f"Earlier regressions (each week's page): <a href='{target}'>" in latest
    page = pages[BEGAN].read_text()  # the page the link opens has the row it names
    assert f"<tr class='verdict-regression' id='{verdict_anchor(began)}'>" in page
    for html_page in (latest, page):  # the why links to the week's own waterfall, which the page has
        anchors = re.findall(r"<a href='#(why-[^']+)'>waterfall</a>", _first_screen(html_page))
        assert len(anchors) == 1 and f"<figure class='plot waterfall' id='{anchors[0]}'>" in html_page
    assert anchors[0] == waterfall_anchor(began)


def test_every_judged_metric_diagnosis_and_lever_has_its_words():
    assert set(METRIC_WORDS) == {metric.name for metric in JUDGED_METRICS}
    sql = model_sql("diagnoses")
    judged = sql[sql.index("judged AS (") :]
    verdicts = set(re.findall(r"(?:THEN|ELSE) '(\w+)'", judged[: judged.index("AS verdict")]))
    assert verdicts == set(get_args(DiagnosisVerdict)) == set(ACTIONS) == set(_accepted_values("diagnoses", "verdict"))
    assert set(re.findall(r"\{'name': '(\w+)'", sql)) == set(get_args(Lever)) == set(LEVER_ACTIONS)


def _accepted_values(model: str, column: str) -> list[str]:
    """The values the model's dbt test accepts for `column` (its YAML's accepted_values)."""
    marts = yaml.safe_load((project_dir() / "models" / "marts" / "_marts.yml").read_text())
    [entry] = [c for m in marts["models"] if m["name"] == model for c in m["columns"] if c["name"] == column]
    [test] = [t["accepted_values"] for t in entry["data_tests"] if "accepted_values" in t]
    return test["arguments"]["values"]


def test_what_to_do_follows_the_runs_diagnoses_once_each():
    lever = {"verdict": "runtime_lever", "levers": '["routing", "queueing"]', "reasons": "[]"}
    missing = {"verdict": "inconclusive", "levers": "[]", "reasons": '["queueing share unknown"]'}
    assert what_to_do([lever, lever, missing]) == [
        f"Tune the runtime: {LEVER_ACTIONS['routing']}; {LEVER_ACTIONS['queueing']}",
        "Measure what the diagnosis lacks: queueing share unknown",
    ]
    assert what_to_do([{"verdict": "oversized", "levers": "[]", "reasons": "[]"}])[0].startswith("Resize the fleet")


def test_a_reason_the_words_do_not_know_is_kept_as_the_rule_wrote_it():
    row = {
        "regression_verdict": "within_noise",
        "regression_reasons": '["configuration changed this week: tp: 8 -> 4"]',
    }
    assert why_in_words(row) == "configuration changed this week: tp: 8 -> 4"
    drift = {
        "regression_verdict": "drift",
        "regression_reasons": '["p95_ttft_ms drifted +12.0% since week 2026-11-02"]',
    }
    assert why_in_words(drift) == "p95 TTFT drifted +12.0% since week 2026-11-02"


def _waterfall_row(baseline_usd: float, **parts: float) -> dict:
    row = {part: parts.get(part, 0.0) for part, _ in interactive_plots.ATTRIBUTION_PARTS}
    realised = baseline_usd + sum(parts.values())
    return {**row, "scenario": "chat", "endpoint": "v3", "baseline_median_weeks": "2026-11-02",
            "baseline_realised_cost_per_request_usd": baseline_usd, "realised_cost_per_request_usd": realised}  # fmt: skip


def test_a_tenth_of_a_percent_is_a_sliver_of_the_waterfall():
    fig = interactive_plots.attribution_waterfall(_waterfall_row(0.001, prefix_cache_usd=-0.000001))
    low, high = fig.layout.yaxis.range
    assert low == 0.0 and 0.000001 / (high - low) < 0.002  # the axis holds the whole cost, from $0
    labels = list(fig.data[0].text)
    assert labels[0] == "$0.001000" and labels[-1] == "$0.000999"
    assert labels[1 + [p for p, _ in interactive_plots.ATTRIBUTION_PARTS].index("prefix_cache_usd")] == "-$0.000001"
    assert labels.count("") == len(interactive_plots.ATTRIBUTION_PARTS) - 1  # parts that moved nothing: no text
    # A step below $0 (a part larger than the cost it comes off) stays on the axis.
    low, high = interactive_plots.attribution_waterfall(_waterfall_row(0.001, batching_usd=-0.002)).layout.yaxis.range
    assert low < -0.001 and high > 0.001


# What the page reports of its first screen, as the browser laid it out: the first card's answers' boxes, and the
# widths that would show a cut at the right edge (the page's, the attribution table's).
_LAYOUT = """(() => {
  const card = document.querySelector('.first-screen .card');
  const box = el => { const r = el.getBoundingClientRect();
    return {left: r.left, right: r.right, top: r.top, bottom: r.bottom, text: el.textContent,
            px: parseFloat(getComputedStyle(el).fontSize)}; };
  const answers = {};
  for (const [name, selector] of [['spend', '.spend'], ['verdict', 'dd.verdict'], ['why', 'dd.why'],
                                  ['action', 'dd.action']]) { answers[name] = box(card.querySelector(selector)); }
  const table = document.querySelector('table.attribution');
  return {answers, page: [document.documentElement.scrollWidth, document.documentElement.clientWidth],
          body: [document.body.scrollWidth, document.body.clientWidth],
          table: [table.scrollWidth, table.clientWidth]};
})()"""


@pytest.mark.parametrize(("width", "height", "phone"), [(1400, 900, False), (390, 844, True)])
def test_the_first_screen_in_chromium_at_a_desktop_and_a_phone_width(store, pages, tmp_path, width, height, phone):
    require_chromium()
    browser = Browser(tmp_path / "profile")
    try:
        browser.viewport(width, height, phone)
        browser.open(pages[LATEST].as_uri())
        assert int(browser.wait_for("document.body.getAttribute('data-plots-rendered')")) > 0
        layout = browser.evaluate(_LAYOUT)
        answers = layout["answers"]
        assert answers["spend"]["text"] == "$2,688.00" and answers["verdict"]["text"].startswith("sustained")
        assert "prefix-cache hit rate" in answers["why"]["text"] and "Tune the runtime" in answers["action"]["text"]
        for answer in answers.values():  # nothing cut at either edge, and big enough to read
            assert 0 <= answer["left"] < answer["right"] <= width and answer["px"] >= 13
        # Desktop: all four answers above the fold; a phone: the spend and the verdict, the rest below them.
        shown = answers.values() if not phone else (answers["spend"], answers["verdict"])
        assert max(answer["bottom"] for answer in shown) <= height
        # No horizontal scroll: not the page's, not the body's, not the attribution table's inside its column.
        assert layout["page"][0] <= layout["page"][1] <= width and layout["body"][0] <= layout["body"][1]
        assert layout["table"][0] <= layout["table"][1]
    finally:
        browser.close()


def test_the_waterfall_draws_its_bars_to_scale_and_the_link_opens_the_week_it_began(store, pages, tmp_path):
    require_chromium()
    with store.connect() as con:
        baseline, latest = con.execute(
            "SELECT baseline_realised_cost_per_request_usd, realised_cost_per_request_usd FROM cost_attribution"
            " WHERE week_start = ?",
            [LATEST],
        ).fetchone()
    browser = Browser(tmp_path / "profile")
    try:
        browser.viewport(1400, 900)
        browser.open(pages[LATEST].as_uri())
        browser.wait_for("document.body.getAttribute('data-plots-rendered')")
        heights = browser.evaluate(
            "Array.from(document.querySelectorAll('#waterfall-0 .waterfalllayer .point path'))"
            ".map(p => p.getBoundingClientRect().height)"
        )
        assert heights[-1] / heights[0] == pytest.approx(latest / baseline, rel=0.02)  # from $0: heights to scale
        # A real click on the verdict's link opens the week the regression began, at its row.
        x, y = browser.evaluate(
            "(() => { const a = document.querySelector('.first-screen dd.verdict a'); a.scrollIntoView();"
            " const r = a.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        browser.click(x, y)
        browser.wait_for(f"location.pathname.endsWith('week={BEGAN.isoformat()}.html')")
        browser.wait_for("document.readyState === 'complete'")
        row = browser.evaluate(
            "(() => { const r = document.getElementById(location.hash.slice(1)); return r && r.className; })()"
        )
        assert row == "verdict-regression"
    finally:
        browser.close()
