"""The weekly report: one HTML page per week (warehouse/reports/week=YYYY-MM-DD.html) with the plots
and verdicts, plus a PNG of the cost trend beside it. Consumes the marts only."""

from __future__ import annotations

import html
import os
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import orjson
import pandas as pd

from warehouse.report import report_plots
from warehouse.report.report_data import ReportData, load_report_data
from warehouse.store import Warehouse


@dataclass(frozen=True, slots=True)
class WeeklyReport:
    html_path: Path
    cost_png_path: Path
    plots: int  # plots embedded in the page
    regressions: int  # this week's rows whose verdict is regression


def _pct(share: float | None) -> float | None:
    return share * 100 if share is not None else None


def _fmt(value, spec: str, unit: str = "") -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "—"
    return f"{format(value, spec)}{unit}"


def _reasons(raw) -> str:
    if raw is None or (isinstance(raw, float) and pd.isna(raw)):
        return ""
    try:
        items = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return html.escape(str(raw))
    return "<br>".join(html.escape(item if isinstance(item, str) else orjson.dumps(item).decode()) for item in items)


def _verdict_table(data: ReportData) -> str:
    rows = []
    for _, row in data.this_week.sort_values(["scenario", "endpoint"]).iterrows():
        verdict = row["regression_verdict"]
        rows.append(
            f"<tr class='verdict-{html.escape(verdict)}'><td>{html.escape(row['scenario'])}</td>"
            f"<td>{html.escape(row['endpoint'])}</td><td>{html.escape(row['backend'])}</td>"
            f"<td>${_fmt(row['cost_per_request_usd'], '.5f')}</td>"
            f"<td>{_fmt(row['cost_change_pct'], '+.1f', '%')}</td>"
            f"<td>{_fmt(row['p95_ttft_ms'], ',.0f', ' ms')}</td>"
            f"<td>{_fmt(_pct(row['prefix_cache_hit_rate']), '.1f', '%')}</td>"
            f"<td><b>{html.escape(verdict)}</b>{' (configuration changed)' if row['config_changed'] else ''}</td>"
            f"<td>{_reasons(row['regression_reasons'])}</td></tr>"
        )
    columns = (
        "scenario", "endpoint", "backend", "cost/request", "vs baseline", "p95 TTFT", "cache hit", "verdict", "why"
    )  # fmt: skip
    head = "<tr>" + "".join(f"<th>{c}</th>" for c in columns) + "</tr>"
    return f"<table>{head}{''.join(rows)}</table>"


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
        f"<td>{_fmt(r['target_rps'], ',.4g', ' req/s')}</td><td>{_fmt(r['goodput_rps'], ',.4g', ' req/s')}</td>"
        f"<td>{_fmt(r['replicas_for_target'], ',.0f')}</td><td>{_usd(r['fleet_usd_per_hour'], ',.2f')}</td>"
        f"<td>{_usd(r['cost_per_request_usd'], '.5f')}</td><td>{_usd(r['budget_usd_per_request'], '.5f')}</td></tr>"
        for _, r in week.sort_values(["scenario", "run_id"]).iterrows()
    ]
    head = (
        "<tr><th>scenario</th><th>endpoint</th><th>run</th><th>target load</th><th>goodput per replica</th>"
        "<th>replicas for target</th><th>fleet $/hour</th><th>cost/request</th><th>budget/request</th></tr>"
    )
    return f"<table class='fleet'>{head}{''.join(rows)}</table>"


def _usd(value, spec: str) -> str:
    text = _fmt(value, spec)
    return text if text == "—" else f"${text}"


_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:13px}
td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}
tr.verdict-regression{background:#fde2e2}tr.verdict-drift{background:#fff4d6}tr.verdict-ok{background:#e8f6e8}
figure{margin:1.5em 0}figure svg{max-width:100%;height:auto}.note{color:#666;font-size:12px}
"""

# Marks the page once the browser has laid out every plot with a real size (checked by the tests).
_RENDER_CHECK = """
<script>
window.addEventListener('load', function () {
  var plots = document.querySelectorAll('figure.plot svg');
  var drawn = Array.prototype.filter.call(plots, function (svg) {
    var box = svg.getBoundingClientRect();
    return box.width > 100 && box.height > 50 && svg.querySelectorAll('path, line, use').length > 5;
  }).length;
  document.body.setAttribute('data-plots-rendered', String(drawn));
});
</script>
"""


def render_html(data: ReportData, plots: dict[str, str]) -> str:
    sim_note = ""
    if not data.trends.empty and (data.trends["backend"] == "sim").any():
        sim_note = "<p class='note'>Rows with backend 'sim' come from the SGLang twin: modelled, not measured cost.</p>"
    figures = "".join(
        f"<figure class='plot'><figcaption>{html.escape(title)}</figcaption>{svg}</figure>"
        for title, svg in plots.items()
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>costbench week {data.week_start}</title>"
        f"<style>{_STYLE}</style></head><body data-plots='{len(plots)}'>"
        f"<h1>costbench: week of {data.week_start}</h1>{sim_note}"
        f"<h2>Verdicts</h2>{_verdict_table(data)}<h2>Diagnoses (the four numbers)</h2>{_diagnosis_table(data)}"
        f"<h2>Fleet sizing and budget</h2>{_fleet_table(data)}"
        f"<h2>Trends</h2>{figures}{_RENDER_CHECK}</body></html>"
    )


def write_weekly_report(store: Warehouse, week_start: date, reports_dir: Path | None = None) -> WeeklyReport:
    """Writes the week's page and cost PNG (replacing earlier versions atomically) and says where they are."""
    reports_dir = Path(reports_dir or store.root / "reports")
    reports_dir.mkdir(parents=True, exist_ok=True)
    data = load_report_data(store, week_start)
    if data.this_week.empty:
        raise ValueError(f"{store.db_path}: weekly_trends has no rows for the week of {week_start}")
    plots = {
        "Cost per request": report_plots.to_svg(report_plots.cost_trend(data.trends)),
        "Latency percentiles": report_plots.to_svg(report_plots.latency_percentiles(data.trends)),
        "Prefix-cache hit rate against cost": report_plots.to_svg(report_plots.hit_rate_vs_cost(data.runs)),
        "Batch occupancy": report_plots.to_svg(report_plots.occupancy(data.runs)),
        "Reasoning share": report_plots.to_svg(report_plots.reasoning_share(data.runs)),
    }
    html_path = reports_dir / f"week={week_start.isoformat()}.html"
    png_path = reports_dir / f"cost_trend_week={week_start.isoformat()}.png"
    tmp_html, tmp_png = html_path.with_suffix(".html.tmp"), png_path.with_suffix(".png.tmp")
    tmp_html.write_text(render_html(data, plots))
    with open(tmp_png, "wb") as out:
        report_plots.to_png(report_plots.cost_trend(data.trends), out)
    os.replace(tmp_html, html_path)
    os.replace(tmp_png, png_path)
    regressions = int((data.this_week["regression_verdict"] == "regression").sum())
    return WeeklyReport(html_path, png_path, len(plots), regressions)
