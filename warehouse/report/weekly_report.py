"""The weekly report: one HTML page per week (warehouse/reports/week=YYYY-MM-DD.html) that opens on the week's
answers (first_screen.py: what each endpoint spent, the verdicts, why and what to do), then the verdicts, why
cost moved (the attribution waterfall), fleet sizing, the fleet plan (every shape tried), where the live scenarios'
time to first token goes, and interactive plots
(plotly: hover for values, click a legend entry to hide or show a series), plotly.js inline so the page opens
offline; plus a PNG of the cost trend beside it. Consumes the marts only."""

from __future__ import annotations

import html
import os
import uuid
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import orjson
import pandas as pd

from endpoints.capacity.deployment import shape_workers
from warehouse.backends.backend import WarehouseBackend
from warehouse.marts.judged_metrics import REGRESSED_VERDICTS
from warehouse.marts.mart_rows import FleetPlanRow, TwinErrorBand
from warehouse.report import interactive_plots as plots_js
from warehouse.report.first_screen import STYLE as FIRST_SCREEN_STYLE
from warehouse.report.first_screen import first_screen, verdict_anchor, waterfall_anchor
from warehouse.report.fleet_plan_summary import plan_comparison
from warehouse.report.report_data import ReportData, load_report_data
from warehouse.report.structured_output import structured_output_section
from warehouse.report.ttft_parts_section import ttft_parts_section
from warehouse.report.value_text import fmt, pct, usd
from warehouse.report.verdict_words import json_list, why_in_words


@dataclass(frozen=True, slots=True)
class WeeklyReport:
    html_path: Path
    cost_png_path: Path
    plots: int  # plots embedded in the page
    regressions: int  # this week's rows whose verdict is regression or sustained


def _reasons(raw) -> str:
    items = json_list(raw)
    return "<br>".join(html.escape(item if isinstance(item, str) else orjson.dumps(item).decode()) for item in items)


def _caveats(row) -> str:
    """The row's caveats (weekly_trends.caveats: a fleet that lost a worker, a lake week incomplete) not already among
    its reasons, each on a line of its own."""
    raw, reasons = row.get("caveats"), row.get("regression_reasons")
    if raw is None or (isinstance(raw, float) and pd.isna(raw)):
        return ""
    said = {r for r in orjson.loads(reasons) if isinstance(r, str)} if isinstance(reasons, str) else set()
    return "".join(f"<br><b>caveat:</b> {html.escape(c)}" for c in orjson.loads(raw) if c not in said)


def _verdict_table(data: ReportData) -> str:
    rows = []
    for _, row in data.this_week.sort_values(["scenario", "endpoint"]).iterrows():
        verdict = row["regression_verdict"]
        rows.append(
            f"<tr class='verdict-{html.escape(verdict)}' id='{verdict_anchor(row)}'>"
            f"<td>{html.escape(row['scenario'])}</td><td>{html.escape(row['endpoint'])}</td>"
            f"<td>{html.escape(row['backend'])}</td>"
            f"<td>{usd(row['efficiency_cost_per_request_usd'], '.5f')}</td>"
            f"<td>{fmt(row['efficiency_cost_change_pct'], '+.1f', '%')}</td>"
            f"<td>{usd(row['realised_cost_per_request_usd'], '.5f')}</td>"
            f"<td>{_idle(row)}</td>"
            f"<td>{fmt(row['p95_ttft_ms'], ',.0f', ' ms')}</td>"
            f"<td>{fmt(pct(row['prefix_cache_hit_rate']), '.1f', '%')}</td>"
            f"<td><b>{html.escape(verdict)}</b>{' (configuration changed)' if row['config_changed'] else ''}</td>"
            f"<td>{html.escape(why_in_words(row))}{_caveats(row)}</td></tr>"
        )
    columns = (
        "scenario", "endpoint", "backend", "efficiency cost/request", "vs baseline", "realised cost/request",
        "idle/request", "p95 TTFT", "cache hit", "verdict", "why",
    )  # fmt: skip
    head = "<tr>" + "".join(f"<th>{c}</th>" for c in columns) + "</tr>"
    return f"<table>{head}{''.join(rows)}</table>"


def _idle(row) -> str:
    """The idle part of a request's realised cost, or the overload in words (never a negative idle cost)."""
    if row.get("load_state") == "overloaded":
        return f"overloaded ({fmt(pct(row.get('load_share_of_capacity')), '.0f', '%')} of capacity)"
    return usd(row.get("idle_cost_per_request_usd"), ".5f")


def _diagnosis_table(data: ReportData) -> str:
    if data.diagnoses.empty:
        return "<p>No diagnoses for this week.</p>"
    rows = [
        f"<tr><td>{html.escape(r['scenario'])}</td><td>{html.escape(r['run_id'])}</td><td><b>{html.escape(r['verdict'])}</b></td>"
        f"<td>{_reasons(r['reasons'])}</td></tr>"
        for _, r in data.diagnoses.sort_values(["scenario", "run_id"]).iterrows()
    ]
    return (
        "<table><tr><th>scenario</th><th>run</th><th>verdict</th><th>the four numbers</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _fleet_table(data: ReportData) -> str:
    """The scenarios' own targets: the fleet that carries target_rps inside the SLO, and the budget per request."""
    week = data.runs[data.runs["week_start"] == data.week_start] if not data.runs.empty else data.runs
    if not week.empty:
        week = week[week["target_rps"].notna() | week["budget_usd_per_request"].notna()]
    if week.empty:
        return (
            "<p class='note'>No scenario this week sets target_rps or budget_usd_per_request "
            "(workloads/scenarios.yaml).</p>"
        )
    rows = [
        f"<tr><td>{html.escape(r['scenario'])}</td><td>{html.escape(r['endpoint'])}</td><td>{html.escape(r['run_id'])}</td>"
        f"<td>{fmt(r['target_rps'], ',.4g', ' req/s')}</td><td>{fmt(r['goodput_rps'], ',.4g', ' req/s')}</td>"
        f"<td>{_replicas(r)}</td><td>{usd(r['fleet_usd_per_hour'], ',.2f')}</td>"
        f"<td>{usd(r['realised_cost_per_request_usd'], '.5f')}</td>"
        f"<td>{usd(r['budget_usd_per_request'], '.5f')}</td></tr>"
        for _, r in week.sort_values(["scenario", "run_id"]).iterrows()
    ]
    head = (
        "<tr><th>scenario</th><th>endpoint</th><th>run</th><th>target load</th><th>goodput per replica</th>"
        "<th>replicas for target</th><th>fleet $/hour</th><th>realised cost/request</th><th>budget/request</th></tr>"
    )
    note = (
        "<p class='note'>Replicas for target, and from where: fleet_plan (the plan's chosen shape, below), capacity "
        "(the target over the capacity at the SLO) or goodput (the target over the goodput, conservative when the run "
        "was not saturated).</p>"
    )
    return f"<table class='fleet'>{head}{''.join(rows)}</table>{note}"


def _replicas(row: pd.Series) -> str:
    """replicas_for_target with where it came from (run_summary.replicas_for_target_source)."""
    count, source = fmt(row["replicas_for_target"], ",.0f"), row.get("replicas_for_target_source")
    return count if count == "—" or _text(source) == "—" else f"{count} ({html.escape(str(source))})"


def _fleet_plan_section(data: ReportData) -> str:
    """Every shape each planned run tried, at the run's own price, the chosen one marked, and what the other router
    policy needs to hold the same target; nothing in a week without a plan."""
    plans = data.plans[data.plans["run_price"].astype(bool)] if not data.plans.empty else data.plans
    if plans.empty:
        return ""
    head = "<tr>" + "".join(f"<th>{c}</th>" for c in _PLAN_COLUMNS) + "</tr>"
    parts = []
    for (scenario, run_id), shapes in plans.sort_values(["scenario", "run_id"]).groupby(["scenario", "run_id"]):
        first = shapes.iloc[0]
        order = shapes.assign(pd_shape=shapes.get("prefill_workers", 0) > 0)
        rows = "".join(_plan_row(r) for _, r in order.sort_values(["pd_shape", "router_policy", "replicas"]).iterrows())
        ttft, tpot = fmt(first["slo_ttft_ms"], ",.0f", " ms"), fmt(first["slo_tpot_ms"], ",.0f", " ms")
        slo = f"SLO TTFT {ttft} and TPOT {tpot}"
        parts.append(
            f"<h3>{html.escape(scenario)}</h3><p>{html.escape(first['endpoint'])}, run {html.escape(run_id)}: "
            f"target {fmt(first['target_rps'], ',.4g', ' req/s')}, {slo}, priced with "
            f"{html.escape(first['price_book'])} at {usd(first['usd_per_gpu_hour'], '.2f')}/GPU-hour</p>"
            f"<table class='plan'>{head}{rows}</table>"
            f"<p class='plan-comparison'>{html.escape(_plan_comparison(shapes))}</p>"
        )
    error = _plan_error(data.error_band, data.pd_error_band)
    note = (
        "<p class='note'>Each shape is one replay of the week's window at the target rate on the twin (a model, not a "
        "measurement); it holds the target when its share of requests inside the SLO (good share) is at least 95% of "
        "the share one idle replica keeps. A disaggregated shape (xP + yD) is x prefill and y decode workers behind "
        "the router in PD mode, each with the endpoint's GPUs per worker. Cost per request at the target: the fleet's "
        "$/hour over the target rate. The same shapes at the other price books of the GPU are in the mart "
        f"fleet_plans.</p><p class='plan-error'>{error}</p>"
    )
    return f"<h2>Fleet plan</h2>{''.join(parts)}{note}"


def _plan_error(band: TwinErrorBand | None, pd_band: TwinErrorBand | None) -> str:
    """How far to trust the plan's shapes: single servers and replicas with the single-server band, disaggregated
    shapes with the disaggregated one (twin_error_band.sql)."""
    if band is None and pd_band is None:
        return "The twin's validation error has not been computed in this warehouse yet (job twin_calibration_weekly)."
    single = f"Read one-server and replica shapes with {band.text()}." if band is not None else ""
    pd_text = (
        f"Read disaggregated shapes (xP + yD) with {pd_band.text()}."
        if pd_band is not None
        else "No disaggregated point has been validated in this warehouse: read disaggregated shapes with no band."
    )
    return html.escape(f"{single} {pd_text}".strip())


_PLAN_COLUMNS = (
    "", "policy", "workers", "GPUs", "holds target", "good share", "p95 TTFT", "hit rate", "fleet $/hour",
    "$/request at target", "capacity at SLO", "break-even vs API",
)  # fmt: skip


def _plan_row(r: pd.Series) -> str:
    chosen = bool(r["chosen"])
    return (
        f"<tr class='{'plan-chosen' if chosen else 'plan-shape'}'><td>{'<b>chosen</b>' if chosen else ''}</td>"
        f"<td>{html.escape(r['router_policy'])}</td><td>{_workers(r)}</td>"
        f"<td>{fmt(r['gpus'], ',.0f')}</td>"
        f"<td>{'yes' if r['holds_target'] else 'no'}</td><td>{fmt(pct(r['good_share']), '.1f', '%')}</td>"
        f"<td>{fmt(r['p95_ttft_ms'], ',.0f', ' ms')}</td><td>{fmt(pct(r['hit_rate']), '.1f', '%')}</td>"
        f"<td>{usd(r['fleet_usd_per_hour'], ',.2f')}</td><td>{usd(r['usd_per_request_at_target'], '.5f')}</td>"
        f"<td>{fmt(r['capacity_rps_at_slo'], ',.3g', ' req/s')}</td>"
        f"<td>{fmt(r['break_even_rps'], ',.3g', ' req/s')}</td></tr>"
    )


def _workers(r: pd.Series) -> str:
    return shape_workers(
        int(r["replicas"]), int(r.get("prefill_workers", 0) or 0), int(r.get("decode_workers", 0) or 0),
        int(r.get("decode_ep_size", 0) or 0),
    )  # fmt: skip


def _plan_comparison(shapes: pd.DataFrame) -> str:
    """fleet_plan_summary.plan_comparison of one planned run's shapes at one price (the demo prints the same)."""
    return plan_comparison([FleetPlanRow(**record) for record in shapes.to_dict("records")])


def _capacity_table(data: ReportData) -> str:
    """The efficiency cost (at the SLO capacity) beside the realised cost (the gap: idle capacity, or the overload in
    words), the fleet it sizes and the break-even rate against the API, with the price book each run was costed with."""
    week = data.runs[data.runs["week_start"] == data.week_start] if not data.runs.empty else data.runs
    if week.empty:
        return ""
    rows = [
        f"<tr><td>{html.escape(r['scenario'])}</td><td>{html.escape(r['endpoint'])}</td>"
        f"<td>{html.escape(_text(r.get('price_book')))}</td><td>{usd(r['usd_per_gpu_hour'], '.2f')}</td>"
        f"<td>{fmt(r.get('capacity_rps_at_slo'), ',.3g', ' req/s')}</td>"
        f"<td>{html.escape(_text(r.get('capacity_source')))}</td>"
        f"<td>{usd(r.get('efficiency_cost_per_request_usd'), '.5f')}</td>"
        f"<td>{usd(r['realised_cost_per_request_usd'], '.5f')}</td>"
        f"<td>{_idle(r)}</td>"
        f"<td>{fmt(r['replicas_for_target'], ',.0f')}</td>"
        f"<td>{usd(r.get('api_cost_per_request_usd'), '.5f')}</td>"
        f"<td>{fmt(r.get('break_even_rps'), ',.3g', ' req/s')}</td></tr>"
        for _, r in week.sort_values(["scenario", "run_id"]).iterrows()
    ]
    head = (
        "<tr><th>scenario</th><th>endpoint</th><th>price book</th><th>$/GPU-hour</th><th>capacity at SLO</th>"
        "<th>capacity from</th><th>efficiency cost/request</th><th>realised cost/request</th><th>idle/request</th>"
        "<th>replicas for target</th><th>API cost/request</th><th>break-even vs API</th></tr>"
    )
    return (
        f"<table class='capacity'>{head}{''.join(rows)}</table><p class='note'>Capacity at SLO: the highest request "
        "rate the endpoint sustains inside the scenario's SLO on the week's traffic (twin_sweep: a load sweep in "
        "virtual time on the twin, modelled; rate_ramp: measured on the endpoint; shadow_twin: the twin's sweep scaled "
        "by the measured/twin throughput, modelled). Efficiency cost: the GPUs' price over that capacity, what a "
        "request costs loaded to the SLO; realised: the window's GPU cost over its requests; idle: the difference. "
        "Break-even: above this rate one replica costs less per request than the API.</p>"
    )


def _attribution_section(data: ReportData) -> tuple[str, int]:
    """The week's waterfalls (one per scenario and configuration with a baseline) and their parts, one column each, so
    the table keeps to the page's width; and how many."""
    week = data.waterfalls
    if week.empty:
        return "<p>No baseline yet for any scenario this week: nothing to attribute.</p>", 0
    figures, columns = [], []
    for index, (_, r) in enumerate(week.sort_values(["scenario", "endpoint"]).iterrows()):
        row = r.to_dict()
        div = plots_js.figure_html(plots_js.attribution_waterfall(row), f"waterfall-{index}")
        caption = f"<figcaption>{html.escape(plots_js.waterfall_title(row))}</figcaption>"
        figures.append(f"<figure class='plot waterfall' id='{waterfall_anchor(row)}'>{caption}{div}</figure>")
        columns.append(row)
    head = "<tr><th></th>" + "".join(
        f"<th>{html.escape(c['scenario'])} <small>({html.escape(c['endpoint'])})</small></th>" for c in columns
    )
    lines = [
        ("baseline", "baseline_realised_cost_per_request_usd", ".6f"),
        *((label, part, "+.6f") for part, label in plots_js.ATTRIBUTION_PARTS),
        ("this week", "realised_cost_per_request_usd", ".6f"),
        ("change", "change_usd", "+.6f"),
    ]
    rows = "".join(
        f"<tr><th>{html.escape(label)}</th>" + "".join(f"<td>{usd(c.get(column), spec)}</td>" for c in columns)
        for label, column, spec in lines
    )
    note = (
        "<p class='note'>The parts add up to the change exactly (docs/warehouse.md, \"Cost attribution\"): price is "
        "the price book's; traffic is what the week's requests asked for (how many, how long, how much prefix they "
        "share); runtime is what the serving made of them (cache hits against what the traffic offered, speed at the "
        "SLO capacity, idle capacity).</p>"
    )
    table = f"<table class='attribution'>{head}</tr>{rows}</table>"
    return f"{''.join(figures)}{table}{note}", len(figures)


def _text(value) -> str:
    return "—" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)


_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px;color:#222;overflow-wrap:break-word}
h1{margin:.3em 0}
table{border-collapse:collapse;margin:1em 0;font-size:13px;display:block;max-width:100%;overflow-x:auto}
td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}
tr.verdict-regression,tr.verdict-sustained{background:#fde2e2}tr.verdict-drift{background:#fff4d6}tr.verdict-within_noise{background:#fffbea}tr.verdict-ok{background:#e8f6e8}
tr.plan-chosen{background:#e8f6e8;font-weight:600}
figure{margin:1.5em 0}.note{color:#666;font-size:12px}
@media (max-width:600px){body{margin:12px}h1{font-size:22px}}
"""

# Marks the page once the browser has drawn every plot with a real size and real marks (checked by the tests).
_RENDER_CHECK = """
<script>
window.addEventListener('load', function () {
  var plots = document.querySelectorAll('figure.plot .js-plotly-plot');
  var drawn = Array.prototype.filter.call(plots, function (gd) {
    var svg = gd.querySelector('svg.main-svg');
    if (!svg) { return false; }
    var box = svg.getBoundingClientRect();
    return box.width > 100 && box.height > 50 && gd.querySelectorAll('.plot path, .plot .point').length > 0;
  }).length;
  document.body.setAttribute('data-plots-rendered', String(drawn));
});
</script>
"""


def trend_figures(data: ReportData) -> dict[str, str]:
    """The trend plots, each a plotly <div> (plotly.js itself is inlined once by render_html)."""
    figures = {
        "Cost per request": plots_js.cost_trend(data.trends),
        "Cost per request against p95 TTFT": plots_js.cost_vs_ttft(data.runs),
        "Latency percentiles": plots_js.latency_percentiles(data.trends),
        "Prefix-cache hit rate against cost": plots_js.hit_rate_vs_cost(data.runs),
        "Batch occupancy": plots_js.weekly_share(
            data.runs,
            "batch_occupancy",
            "Batch occupancy: running requests / the batch run at the SLO capacity (100% = loaded to capacity, "
            "above it past the SLO; the KV pool's usage where no capacity was swept)",
        ),
        "Reasoning share": plots_js.weekly_share(
            data.runs, "reasoning_token_share", "Reasoning tokens as a share of output tokens"
        ),
    }
    frontier = plots_js.fleet_frontier(data.plans)
    if frontier.data:  # only a week with a plan: an empty figure would still count as a plot
        figures["Fleet plan: cost per request against p95 TTFT"] = frontier
    twin_error = plots_js.twin_error(data.runs)
    if twin_error.data:  # only with a run on a real endpoint, whose shadow canary ran on the twin
        figures["The twin's error: shadow canaries, twin / real"] = twin_error
    return {title: plots_js.figure_html(fig, f"trend-{i}") for i, (title, fig) in enumerate(figures.items())}


def render_html(data: ReportData, plots: dict[str, str]) -> str:
    """The page; `plots` maps a title to a plotly <div> (trend_figures)."""
    sim_note = ""
    if not data.trends.empty and (data.trends["backend"] == "sim").any():
        sim_note = "<p class='note'>Rows with backend 'sim' come from the SGLang twin: modelled, not measured cost.</p>"
    figures = "".join(
        f"<figure class='plot'><figcaption>{html.escape(title)}</figcaption>{div}</figure>"
        for title, div in plots.items()
    )
    attribution, waterfalls = _attribution_section(data)
    ttft_parts, ttft_figures = ttft_parts_section(data.ttft_parts, data.week_start)
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>costbench week {data.week_start}</title>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<style>{_STYLE}{FIRST_SCREEN_STYLE}</style><script>{plots_js.plotly_js()}</script></head>"
        f"<body data-plots='{len(plots) + waterfalls + ttft_figures}'>"
        f"<h1>costbench: week of {data.week_start}</h1>{sim_note}{first_screen(data)}"
        f"<h2>Verdicts</h2>{_verdict_table(data)}"
        f"<h2>Why the realised cost per request moved</h2>{attribution}"
        f"<h2>Diagnoses (the four numbers)</h2>{_diagnosis_table(data)}"
        "<h2>Two costs per request: efficiency (at the SLO capacity), realised, the idle part, and the API "
        f"break-even</h2>{_capacity_table(data)}"
        f"<h2>Fleet sizing and budget</h2>{_fleet_table(data)}"
        f"{_fleet_plan_section(data)}"
        f"{ttft_parts}"
        f"{structured_output_section(data.trends, data.week_start)}"
        f"<h2>Trends</h2>{figures}{_RENDER_CHECK}</body></html>"
    )


def write_weekly_report(store: WarehouseBackend, week_start: date, reports_dir: Path | None = None) -> WeeklyReport:
    """Writes the week's page and cost PNG (replacing earlier versions atomically) and says where they are."""
    reports_dir = Path(reports_dir or store.root / "reports")
    reports_dir.mkdir(parents=True, exist_ok=True)
    data = load_report_data(store, week_start)
    if data.this_week.empty:
        raise ValueError(f"{store.location}: weekly_trends has no rows for the week of {week_start}")
    plots = trend_figures(data)
    html_path = reports_dir / f"week={week_start.isoformat()}.html"
    png_path = reports_dir / f"cost_trend_week={week_start.isoformat()}.png"
    # Two scenarios' runs of one week build its report at the same moment: each writes its own temporary files.
    unique = f"{os.getpid()}.{uuid.uuid4().hex[:8]}"
    tmp_html, tmp_png = html_path.with_suffix(f".html.{unique}.tmp"), png_path.with_suffix(f".png.{unique}.tmp")
    page = render_html(data, plots)
    tmp_html.write_text(page)
    # matplotlib (through report_plots) is imported here, not with this module: the pipeline's definitions import
    # this module in every process that loads them, and only the report step draws.
    from warehouse.report import report_plots

    with open(tmp_png, "wb") as out:
        report_plots.to_png(report_plots.cost_trend(data.trends), out)
    os.replace(tmp_html, html_path)
    os.replace(tmp_png, png_path)
    regressions = int(data.this_week["regression_verdict"].isin(REGRESSED_VERDICTS).sum())
    return WeeklyReport(html_path, png_path, page.count("<figure class='plot"), regressions)
