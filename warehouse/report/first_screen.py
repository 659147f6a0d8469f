"""The weekly page's first screen: for each scenario and endpoint of the week, what its endpoint spent, the judged
cost per request and its change, the verdict, why (in words), and what to do, the worst verdicts first; then the
earlier regressions of the weeks shown, each a link to its week's page. Above the fold at 1,400 x 900, one card
under another on a phone (tests/warehouse/test_warehouse_first_screen.py renders both in Chromium).

Every figure is a column of weekly_trends, diagnoses or cost_attribution (warehouse/schema.sql); the anchors here are
also the ids the rest of the page gives a row's verdict and its waterfall (weekly_report.py)."""

from __future__ import annotations

import html
import re
from datetime import date, timedelta

import pandas as pd

from warehouse.marts.judged_metrics import REGRESSED_VERDICTS
from warehouse.report.interactive_plots import ATTRIBUTION_PARTS
from warehouse.report.report_data import ReportData
from warehouse.report.value_text import fmt, usd
from warehouse.report.verdict_words import JUDGED_BY_REASONS, METRIC_WORDS, json_list, what_to_do, why_in_words

# The order the cards come in: what needs a reader first.
_VERDICT_ORDER = ("regression", "sustained", "drift", "within_noise", "ok", "no_baseline", "not_judged")
_EARLIER_SHOWN = 8  # the most recent earlier regressions listed

STYLE = """
.first-screen h2{margin:.4em 0}.first-screen .headline{margin:.3em 0 .6em;font-size:15px}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(420px,1fr));gap:10px}
.card{border:1px solid #ccc;border-left-width:6px;border-radius:4px;padding:6px 10px;font-size:13px;min-width:0}
.card h3{margin:0 0 4px;font-size:15px}.card h3 small{font-weight:normal;color:#666}
.card dl{display:grid;grid-template-columns:auto 1fr;gap:2px 10px;margin:0}.card dt{color:#666}.card dd{margin:0}
.card .spend{font-size:16px;font-weight:600}
.card.verdict-regression,.card.verdict-sustained{border-left-color:#c0392b;background:#fdf0f0}
.card.verdict-drift,.card.verdict-within_noise{border-left-color:#e0a800}.card.verdict-ok{border-left-color:#27ae60}
.earlier{font-size:13px}
@media (max-width:600px){.cards{grid-template-columns:1fr}.card dl{grid-template-columns:1fr}.card dt{margin-top:4px}}
"""


def _grain_slug(row) -> str:
    """A weekly_trends or cost_attribution row's grain (bar its week) as id text."""
    fingerprint = row.get("config_fingerprint")
    grain = (row["scenario"], row["endpoint"], row["backend"], fingerprint if isinstance(fingerprint, str) else "none")
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", "--".join(grain))


def verdict_anchor(row) -> str:
    """The id of a weekly_trends row's line in its week's verdict table."""
    return f"verdict-{_grain_slug(row)}"


def waterfall_anchor(row) -> str:
    """The id of a cost_attribution row's waterfall on its week's page."""
    return f"why-{_grain_slug(row)}"


def card_anchor(row) -> str:
    """The id of a weekly_trends row's card on the first screen of its week's page."""
    return f"week-{_grain_slug(row)}"


def week_page(week: date) -> str:
    """A week's page, as weekly_report.py names it, beside this one."""
    return f"week={week.isoformat()}.html"


def _link(href: str, text: str) -> str:
    return f"<a href='{html.escape(href)}'>{html.escape(text)}</a>"


def _series(frame: pd.DataFrame, row) -> pd.DataFrame:
    """The rows of `row`'s series (scenario, endpoint, backend: weekly_trends' regression episodes run over it)."""
    keys = ("scenario", "endpoint", "backend")
    return frame[(frame[list(keys)] == pd.Series({k: row[k] for k in keys})).all(axis=1)]


def episode_start(trends: pd.DataFrame, row) -> pd.Series | None:
    """The weekly_trends row of the week a sustained regression began: the first of the weeks before `row`'s, one a
    week without a gap, in which its series regressed (None when the week before is not among `trends`)."""
    series = _series(trends, row)
    regressed = series[series["regression_verdict"].isin(REGRESSED_VERDICTS)]
    week, start = row["week_start"], None
    while True:
        earlier = regressed[regressed["week_start"] == week - timedelta(days=7)]
        if earlier.empty:
            return start
        start, week = earlier.iloc[0], week - timedelta(days=7)


def _cost(row) -> str:
    cost = usd(row.get("efficiency_cost_per_request_usd"), ".5f")
    if cost == "—":
        return "— (no capacity at the SLO: no efficiency cost)"
    change = fmt(row.get("efficiency_cost_change_pct"), "+.1f", "%")
    return f"{cost} at the SLO capacity" + ("" if change == "—" else f", {change} vs baseline")


def _verdict(data: ReportData, row) -> str:
    verdict = row["regression_verdict"]
    text = f"<b>{html.escape(verdict)}</b>"
    if verdict == "sustained":
        start = episode_start(data.trends, row)
        if start is not None:
            since = start["week_start"]
            text += f": regressed since the week of {_link(week_page(since) + '#' + verdict_anchor(start), str(since))}"
    if verdict == "drift" and isinstance(row.get("drift_start_week"), date):
        text += f" since the week of {html.escape(str(row['drift_start_week']))}"
    if verdict in JUDGED_BY_REASONS:
        text += f" ({_link('#' + verdict_anchor(row), 'its line in the verdicts')})"
    return text


def _largest_part(attribution: pd.DataFrame, row) -> str:
    """The attribution part that moved the realised cost most, and a link to the row's waterfall ('' without one)."""
    if attribution.empty:
        return ""
    match = attribution[(attribution["scenario"] == row["scenario"]) & (attribution["endpoint"] == row["endpoint"])]
    match = match[match["backend"] == row["backend"]]
    fingerprint = row.get("config_fingerprint")
    if isinstance(fingerprint, str):
        match = match[match["config_fingerprint"] == fingerprint]
    if match.empty:
        return ""
    part = match.iloc[0]
    moved = [(abs(part[c]), label, part[c]) for c, label in ATTRIBUTION_PARTS if c in part and pd.notna(part[c])]
    largest = max(moved, default=None)
    what = "" if largest is None else f", its largest part {html.escape(largest[1])} at {usd(largest[2], '+.6f')}"
    return (
        f"; the realised cost per request moved {usd(part['change_usd'], '+.6f')} against its baseline{what}: "
        f"{_link('#' + waterfall_anchor(part), 'waterfall')}"
    )


def _card(data: ReportData, row) -> str:
    verdict = row["regression_verdict"]
    why = html.escape(why_in_words(row))
    if verdict in JUDGED_BY_REASONS:
        why += _largest_part(data.waterfalls, row)
    runs = data.diagnoses
    if not runs.empty:
        runs = runs[(runs["scenario"] == row["scenario"]) & (runs["endpoint"] == row["endpoint"])]
    advice = what_to_do(r for _, r in runs.iterrows())
    if verdict in REGRESSED_VERDICTS:
        advice.insert(0, "Find the change that moved it (why, above; the waterfall below), then undo or fix it")
    action = "<br>".join(html.escape(a) for a in advice) or "No diagnosis of this week's runs."
    return (
        f"<article class='card verdict-{html.escape(verdict)}' id='{card_anchor(row)}'>"
        f"<h3>{html.escape(row['scenario'])} <small>on {html.escape(row['endpoint'])} ({html.escape(row['backend'])})"
        f"</small></h3><dl>"
        f"<dt>spent</dt><dd><span class='spend'>{usd(row['week_spend_usd'], ',.2f')}</span> this week: "
        f"{html.escape(row['endpoint'])}'s GPUs at its price, whichever scenarios it served</dd>"
        f"<dt>cost/request</dt><dd class='cost'>{_cost(row)}</dd>"
        f"<dt>verdict</dt><dd class='verdict'>{_verdict(data, row)}</dd>"
        f"<dt>why</dt><dd class='why'>{why}</dd>"
        f"<dt>what to do</dt><dd class='action'>{action}</dd></dl></article>"
    )


def _headline(week: pd.DataFrame) -> str:
    # weekly_trends.week_spend_usd is the endpoint's, on each of its rows: counted once per endpoint.
    endpoints = week.groupby("endpoint")["week_spend_usd"].max()
    spent = ""
    if endpoints.notna().any():
        each = ", ".join(f"{html.escape(str(e))} {usd(s, ',.2f')}" for e, s in endpoints.dropna().items())
        spent = f"GPU spend this week: <b>{usd(endpoints.sum(), ',.2f')}</b> ({each}). "
    regressed = week[week["regression_verdict"].isin(REGRESSED_VERDICTS)]
    if regressed.empty:
        said = f"Nothing regressed this week ({len(week)} series)."
    else:
        names = ", ".join(
            _link("#" + card_anchor(r), f"{r['scenario']} ({r['regression_verdict']})") for _, r in regressed.iterrows()
        )
        said = f"{len(regressed)} of {len(week)} series regressed: {names}."
    return f"<p class='headline'>{spent}{said}</p>"


def _earlier_regressions(data: ReportData) -> str:
    """The regressions that began in the weeks before this one, each a link to its row on its week's page."""
    trends = data.trends
    earlier = trends[(trends["week_start"] < data.week_start) & (trends["regression_verdict"] == "regression")]
    if earlier.empty:
        return ""
    recent = earlier.sort_values(["week_start", "scenario"], ascending=[False, True]).head(_EARLIER_SHOWN)
    links = [
        _link(week_page(r["week_start"]) + "#" + verdict_anchor(r), f"{r['week_start']}: {r['scenario']}")
        + html.escape(f" ({', '.join(_metric_label(m) for m in json_list(r['regressed_metrics']))})")
        for _, r in recent.iterrows()
    ]
    return f"<p class='earlier'>Earlier regressions (each week's page): {'; '.join(links)}</p>"


def _metric_label(name: str) -> str:
    words = METRIC_WORDS.get(name)
    return words.label if words is not None else name


def first_screen(data: ReportData) -> str:
    """The first screen's HTML: the week's cards, worst verdict first, and the earlier regressions."""
    week = data.this_week
    order = {verdict: i for i, verdict in enumerate(_VERDICT_ORDER)}
    ranked = week.assign(rank=week["regression_verdict"].map(order).fillna(len(order)))
    cards = "".join(_card(data, r) for _, r in ranked.sort_values(["rank", "scenario", "endpoint"]).iterrows())
    return (
        f"<section class='first-screen' id='this-week'><h2>This week</h2>{_headline(week)}"
        f"<div class='cards'>{cards}</div>{_earlier_regressions(data)}</section>"
    )
