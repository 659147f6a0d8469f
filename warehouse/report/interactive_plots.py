"""The weekly page's interactive plots, drawn with plotly: hover shows each point's values, a click on a
legend entry hides or shows that series. The page embeds plotly.js once, inline (plotly_js()), so it opens
offline; each figure is a <div> and a call that draws it (figure_html).

Each function takes the report's data frames and returns one figure; none computes a metric (every value is a
column of weekly_trends, run_summary, cost_attribution or fleet_plans, defined in the dbt models' YAML,
warehouse/dbt/models/marts/_marts.yml)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.offline import get_plotlyjs

from endpoints.capacity.deployment import shape_label
from warehouse.marts.judged_metrics import REGRESSED_VERDICTS
from warehouse.report.value_text import usd

_HEIGHT_PX = 380
_MISSED_GREY = "#9e9e9e"  # a shape that misses the target: drawn, but not an option
_CONFIG = {"displaylogo": False, "responsive": True, "modeBarButtonsToRemove": ["sendDataToCloud"]}
# The parts of cost_attribution, in the waterfall's order, with the label a reader sees.
ATTRIBUTION_PARTS = (
    ("price_usd", "price (price book)"),
    ("traffic_volume_usd", "traffic: volume (idle share)"),
    ("traffic_mix_usd", "traffic: token mix"),
    ("traffic_prefix_reuse_usd", "traffic: offered prefix reuse"),
    ("prefix_cache_usd", "runtime: prefix cache"),
    ("batching_usd", "runtime: batching"),
    ("speculative_decoding_usd", "runtime: speculative decoding"),
    ("routing_usd", "runtime: routing"),
    ("structured_output_usd", "runtime: structured output"),
    ("unattributed_usd", "unattributed"),
)


def plotly_js() -> str:
    """plotly.js itself, for one inline <script> in the page (no CDN: the page opens offline)."""
    return get_plotlyjs()


def figure_html(fig: go.Figure, div_id: str) -> str:
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config=_CONFIG)


def _series(frame: pd.DataFrame, keys: tuple[str, ...] = ("scenario", "endpoint")):
    if frame.empty:
        return
    for key, rows in frame.sort_values("week_start").groupby(list(keys), dropna=False):
        yield f"{key[0]} ({key[1]})" + "".join(f" {k}" for k in key[2:]), rows


def _configurations(runs: pd.DataFrame):
    """One series per configuration of a scenario on its endpoint, named by the week it first ran ("chat (v3) from
    2026-11-16") where the endpoint ran more than one, with the note of the revision that brought it in, where that
    week's runs have one ("... from 2026-11-16: radix cache disabled while debugging"), never by its fingerprint's hash
    (cost_attribution's runtime_changes says what changed)."""
    for series, of_series in _series(runs):
        configurations = list(of_series.groupby("config_fingerprint", dropna=False, sort=False))
        for _, rows in configurations:
            weeks = pd.to_datetime(rows["week_start"])
            first_week = rows[weeks == weeks.min()]
            notes = first_week["revision_note"].dropna().tolist() if "revision_note" in first_week else []
            note = f": {notes[0]}" if notes else ""
            yield (series if len(configurations) == 1 else f"{series} from {weeks.min():%Y-%m-%d}{note}"), rows


def figure_layout(fig: go.Figure, title: str, yaxis: str, xaxis: str = "week") -> go.Figure:
    fig.update_layout(
        title={"text": title, "font": {"size": 14}},
        height=_HEIGHT_PX,
        margin={"l": 70, "r": 20, "t": 50, "b": 50},
        hovermode="closest",
        legend={"font": {"size": 10}},
        xaxis_title=xaxis,
        yaxis_title=yaxis,
        template="plotly_white",
    )
    return fig


def float_values(series: pd.Series) -> list[float | None]:
    return [None if pd.isna(v) else float(v) for v in series]


def cost_trend(trends: pd.DataFrame) -> go.Figure:
    """The efficiency cost per request per scenario (at the SLO capacity: what the runtime costs, the judged figure)
    with this week's interval (error bars), the baseline (dashed), regressions (red rings), and the realised cost
    (dotted), which moves with the week's volume too."""
    fig = go.Figure()
    for label, rows in _series(trends):
        weeks = pd.to_datetime(rows["week_start"])
        cost = float_values(rows["efficiency_cost_per_request_usd"])
        low = float_values(rows["efficiency_cost_low_usd"])
        high = float_values(rows["efficiency_cost_high_usd"])
        fig.add_trace(
            go.Scatter(
                x=weeks,
                y=cost,
                mode="lines+markers",
                name=label,
                legendgroup=label,
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": [None if h is None or c is None else h - c for c, h in zip(cost, high)],
                    "arrayminus": [None if lo is None or c is None else c - lo for c, lo in zip(cost, low)],
                    "thickness": 1,
                },
                customdata=list(zip(rows["regression_verdict"], float_values(rows["efficiency_cost_change_pct"]))),
                hovertemplate="%{x|%Y-%m-%d}: $%{y:.6f} per request at capacity<br>vs baseline %{customdata[1]:+.1f}%"
                "<br>verdict %{customdata[0]}<extra>%{fullData.name}</extra>",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=weeks,
                y=float_values(rows["baseline_efficiency_cost_per_request_usd"]),
                mode="lines",
                line={"dash": "dash", "width": 1},
                name=f"{label} baseline",
                legendgroup=label,
                hovertemplate="baseline $%{y:.6f}<extra>%{fullData.name}</extra>",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=weeks,
                y=float_values(rows["realised_cost_per_request_usd"]),
                mode="lines",
                line={"dash": "dot", "width": 1},
                name=f"{label} realised",
                legendgroup=label,
                hovertemplate="realised $%{y:.6f} per request (the window's GPU cost / its requests)"
                "<extra>%{fullData.name}</extra>",
            )
        )
        regressed = rows[rows["regression_verdict"].isin(REGRESSED_VERDICTS)]
        if not regressed.empty:
            fig.add_trace(
                go.Scatter(
                    x=pd.to_datetime(regressed["week_start"]),
                    y=float_values(regressed["efficiency_cost_per_request_usd"]),
                    mode="markers",
                    marker={"size": 16, "color": "rgba(0,0,0,0)", "line": {"color": "red", "width": 2}},
                    name=f"{label} regression",
                    legendgroup=label,
                    hovertemplate="regression<extra>%{fullData.name}</extra>",
                )
            )
    return figure_layout(
        fig,
        "Efficiency cost per request, at the SLO capacity (bars: 95% interval; dashed: baseline; dotted: realised)",
        "USD per request",
    )


def latency_percentiles(trends: pd.DataFrame) -> go.Figure:
    fig = go.Figure()
    for label, rows in _series(trends):
        weeks = pd.to_datetime(rows["week_start"])
        for column, name, dash in (("p95_ttft_ms", "p95", "solid"), ("p50_ttft_ms", "p50", "dot")):
            fig.add_trace(
                go.Scatter(
                    x=weeks,
                    y=float_values(rows[column]),
                    mode="lines+markers",
                    line={"dash": dash},
                    name=f"{label} {name} TTFT",
                    legendgroup=label,
                    hovertemplate="%{x|%Y-%m-%d}: %{y:,.0f} ms<extra>%{fullData.name}</extra>",
                )
            )
    return figure_layout(fig, "Time to first token, p50 and p95", "ms")


def cost_vs_ttft(runs: pd.DataFrame) -> go.Figure:
    """Cost per request against p95 TTFT, one point per replay, one series per configuration (endpoint and
    fingerprint, named by the week it first ran); hollow points: the same replay's cost at the SLO capacity (the
    gap is idle capacity)."""
    fig = go.Figure()
    for label, rows in _configurations(runs):
        hover = list(zip(pd.to_datetime(rows["week_start"]).dt.strftime("%Y-%m-%d"), rows["run_id"]))
        fig.add_trace(
            go.Scatter(
                x=float_values(rows["p95_ttft_ms"]),
                y=float_values(rows["realised_cost_per_request_usd"]),
                mode="markers",
                marker={"size": 10},
                name=label,
                legendgroup=label,
                customdata=hover,
                hovertemplate="week %{customdata[0]} (%{customdata[1]})<br>p95 TTFT %{x:,.0f} ms"
                "<br>realised $%{y:.6f} per request<extra>%{fullData.name}</extra>",
            )
        )
        if "efficiency_cost_per_request_usd" in rows and rows["efficiency_cost_per_request_usd"].notna().any():
            fig.add_trace(
                go.Scatter(
                    x=float_values(rows["p95_ttft_ms"]),
                    y=float_values(rows["efficiency_cost_per_request_usd"]),
                    mode="markers",
                    marker={"size": 10, "symbol": "circle-open"},
                    name=f"{label} at SLO capacity",
                    legendgroup=label,
                    customdata=hover,
                    hovertemplate="week %{customdata[0]} (%{customdata[1]})<br>at SLO capacity "
                    "$%{y:.6f} per request<extra>%{fullData.name}</extra>",
                )
            )
    fig = figure_layout(fig, "Cost per request against p95 TTFT, per configuration", "USD per request", "p95 TTFT (ms)")
    fig.update_yaxes(type="log")
    return fig


def hit_rate_vs_cost(runs: pd.DataFrame) -> go.Figure:
    fig = go.Figure()
    for label, rows in _series(runs):
        fig.add_trace(
            go.Scatter(
                x=[None if v is None else v * 100 for v in float_values(rows["prefix_cache_hit_rate"])],
                y=float_values(rows["efficiency_cost_per_request_usd"]),
                mode="markers",
                name=label,
                customdata=pd.to_datetime(rows["week_start"]).dt.strftime("%Y-%m-%d"),
                hovertemplate="week %{customdata}: hit rate %{x:.1f}%, $%{y:.6f} per request at capacity"
                "<extra>%{fullData.name}</extra>",
            )
        )
    return figure_layout(
        fig,
        "Prefix-cache hit rate against the efficiency cost (at the SLO capacity), one point per replay",
        "USD per request",
        "hit rate (%)",
    )


def weekly_share(runs: pd.DataFrame, column: str, title: str) -> go.Figure:
    """A run_summary ratio, averaged per week and scenario, as a percentage over time."""
    fig = go.Figure()
    if not runs.empty:
        weekly = runs.groupby(["week_start", "scenario", "endpoint"], as_index=False)[column].mean()
        for label, rows in _series(weekly):
            fig.add_trace(
                go.Scatter(
                    x=pd.to_datetime(rows["week_start"]),
                    y=[None if v is None else v * 100 for v in float_values(rows[column])],
                    mode="lines+markers",
                    name=label,
                    hovertemplate="%{x|%Y-%m-%d}: %{y:.1f}%<extra>%{fullData.name}</extra>",
                )
            )
    return figure_layout(fig, title, "%")


# run_summary's shadow canary ratios (twin / real), with what the legend calls them.
SHADOW_RATIOS = (
    ("shadow_output_tokens_per_s_ratio", "output tokens/s"),
    ("shadow_p50_ttft_ratio", "median TTFT"),
    ("shadow_p50_tpot_ratio", "median TPOT"),
)


def twin_error(runs: pd.DataFrame) -> go.Figure:
    """The shadow canaries' twin / real ratios per week, scenario and endpoint (the week's runs averaged), against
    1 (the twin right) and the calibration target's 0.75-1.33 band; no trace without a shadow canary."""
    fig = go.Figure()
    columns = [column for column, _ in SHADOW_RATIOS]
    shadowed = runs.dropna(subset=columns, how="all") if not runs.empty else runs
    if not shadowed.empty:
        weekly = shadowed.groupby(["week_start", "scenario", "endpoint"], as_index=False)[columns].mean()
        for label, rows in _series(weekly):
            for column, name in SHADOW_RATIOS:
                fig.add_trace(
                    go.Scatter(
                        x=pd.to_datetime(rows["week_start"]),
                        y=float_values(rows[column]),
                        mode="lines+markers",
                        name=f"{label} {name}",
                        hovertemplate="%{x|%Y-%m-%d}: twin / real %{y:.3f}<extra>%{fullData.name}</extra>",
                    )
                )
        fig.add_hrect(y0=0.75, y1=1.33, fillcolor="#27ae60", opacity=0.08, line_width=0)
        fig.add_hline(y=1.0, line_dash="dash", line_color=_MISSED_GREY)
    return figure_layout(fig, "The twin's measured error: twin / real on the shadow canaries", "twin / real")


def attribution_waterfall(row: dict) -> go.Figure:
    """One cost_attribution row as a waterfall: the baseline, each part, this week's realised cost per request. The
    axis starts at $0, so a bar is as tall against the axis as its change is against the whole cost (a -0.1% part is
    a sliver); each step that moves the cost at the table's precision carries its amount as text."""
    labels = ["baseline"] + [label for _, label in ATTRIBUTION_PARTS] + ["this week"]
    values = [row["baseline_realised_cost_per_request_usd"]]
    values += [0.0 if row.get(part) is None or pd.isna(row.get(part)) else row[part] for part, _ in ATTRIBUTION_PARTS]
    values.append(row["realised_cost_per_request_usd"])
    steps = [usd(v, "+.6f") for v in values[1:-1]]
    text = [usd(values[0], ".6f"), *(s if s != "$0.000000" else "" for s in steps), usd(values[-1], ".6f")]
    fig = go.Figure(
        go.Waterfall(
            x=labels,
            y=values,
            measure=["absolute"] + ["relative"] * len(ATTRIBUTION_PARTS) + ["total"],
            name=f"{row['scenario']} ({row['endpoint']})",
            text=text,
            textposition="outside",
            textfont={"size": 10},
            cliponaxis=False,
            customdata=[usd(values[0], ".6f"), *steps, usd(values[-1], ".6f")],
            hovertemplate="%{x}: %{customdata} per request<extra></extra>",
            increasing={"marker": {"color": "#c0392b"}},
            decreasing={"marker": {"color": "#27ae60"}},
            totals={"marker": {"color": "#34495e"}},
        )
    )
    # Untitled: the page captions it (waterfall_title), in HTML that wraps on a phone where a plot's title would not.
    fig = figure_layout(fig, "", "USD per request (axis from $0)", "")
    fig.update_layout(showlegend=False, yaxis_range=waterfall_range(values), margin_t=30)
    return fig


def waterfall_title(row: dict) -> str:
    """What attribution_waterfall(row) shows, for its caption."""
    weeks = " and ".join(str(row["baseline_median_weeks"]).split(","))
    what = f"{row['scenario']} ({row['endpoint']})"
    return f"Why the realised cost per request moved: {what}, against the baseline of {weeks}"


def waterfall_range(values: list[float]) -> list[float]:
    """The waterfall's y axis: from $0 (or the lowest level, where a step takes the cost below it) to the highest
    level, with room above for the amounts' text."""
    levels = [values[0]]
    for step in values[1:-1]:
        levels.append(levels[-1] + step)
    low, high = min([0.0, *levels, values[-1]]), max([0.0, *levels, values[-1]])
    room = (high - low) * 0.12 or 1e-12
    return [low - room if low < 0 else 0.0, high + room]


def fleet_frontier(plans: pd.DataFrame) -> go.Figure:
    """The fleet plan's frontier: cost per request at the target rate against p95 TTFT at that rate, one point per
    shape tried (replicas x router policy, or xPyD: prefill and decode workers) at the run's own price, one series
    per policy and one for the disaggregated shapes. Hollow grey: misses the target inside the SLO (cheaper, but no
    option); ringed: the chosen shape; dashed: the SLO's TTFT. No rows at the run's price give a figure without
    traces."""
    fig = go.Figure()
    priced = plans[plans["run_price"].astype(bool)] if not plans.empty else plans
    if priced.empty:
        return fig
    priced = priced.assign(series=[
        (f"{p}, disaggregated, EP{w} decode" if w else f"{p}, disaggregated") if d else p
        for p, d, w in zip(priced["router_policy"], _prefill_workers(priced), _decode_ep_sizes(priced))
    ])  # fmt: skip
    runs = list(priced.sort_values(["scenario", "run_id"]).groupby(["scenario", "run_id"], sort=False))
    scenarios = priced["scenario"].nunique()
    colors = iter(qualitative.Plotly * 4)
    for (scenario, run_id), rows in runs:
        # One planned run in the week: the legend names policies alone; more, and each says whose it is.
        prefix = "" if len(runs) == 1 else f"{scenario}: " if scenarios == len(runs) else f"{scenario} ({run_id}): "
        for policy, shapes in rows.sort_values(["series", "replicas"]).groupby("series"):
            color = next(colors)
            label = f"{prefix}{policy}"
            holding = shapes["holds_target"].astype(bool)
            for holds, part in ((True, shapes[holding]), (False, shapes[~holding])):
                if part.empty:
                    continue
                marker = {"size": 11, "color": color} if holds else {
                    "size": 11, "symbol": "circle-open", "color": _MISSED_GREY, "line": {"width": 2}}  # fmt: skip
                name, text_color = (label, color) if holds else (f"{label}, misses the target", _MISSED_GREY)
                fig.add_trace(_frontier_points(part, name, label, marker, text_color))
        chosen = rows[rows["chosen"].astype(bool)]
        if not chosen.empty:
            ring = {"size": 24, "symbol": "star-open", "color": "#111", "line": {"width": 2}}
            fig.add_trace(_frontier_points(chosen, f"{prefix}chosen: cheapest holding the target", None, ring))
    slos = priced[priced["slo_ttft_ms"].notna()].groupby("slo_ttft_ms")["scenario"].unique()
    for slo_ttft_ms, names in slos.items():
        whose = f" ({', '.join(sorted(names))})" if scenarios > 1 else ""
        fig.add_vline(
            x=float(slo_ttft_ms),
            line={"dash": "dash", "width": 1, "color": "#555"},
            annotation_text=f"SLO TTFT {slo_ttft_ms:,.0f} ms{whose}",
            annotation_position="top right",  # fewer replicas miss to the right, lower: the top right stays clear
            annotation_font_size=10,
        )
    return figure_layout(
        fig,
        "One point per shape at the run's price (hollow grey: misses the target; star: chosen)",
        "USD per request at the target rate",
        "p95 TTFT at the target rate (ms)",
    )


def _prefill_workers(shapes: pd.DataFrame) -> list[int]:
    """Each shape's prefill workers (0: aggregated replicas, and for every shape of a database built before PD)."""
    if "prefill_workers" not in shapes:
        return [0] * len(shapes)
    return [int(x) for x in shapes["prefill_workers"].fillna(0)]


def _decode_ep_sizes(shapes: pd.DataFrame) -> list[int]:
    """Each shape's wide decode width (0: the endpoint's kind of worker, and every shape of an older database)."""
    if "decode_ep_size" not in shapes:
        return [0] * len(shapes)
    return [int(x) for x in shapes["decode_ep_size"].fillna(0)]


def _frontier_points(
    shapes: pd.DataFrame, name: str, group: str | None, marker: dict, text_color: str | None = None
) -> go.Scatter:
    """One trace of fleet_frontier: the shapes as points labelled 'N x policy' or 'xPyD x policy', hover with the
    shape's columns."""
    return go.Scatter(
        x=float_values(shapes["p95_ttft_ms"]),
        y=float_values(shapes["usd_per_request_at_target"]),
        mode="markers+text" if text_color else "markers",
        marker=marker,
        text=[
            shape_label(int(n), p, x, int(n) - x, w)
            for n, x, p, w in zip(
                shapes["replicas"], _prefill_workers(shapes), shapes["router_policy"], _decode_ep_sizes(shapes)
            )
        ],  # fmt: skip
        textposition="top center",
        textfont={"size": 10, "color": text_color},
        name=name,
        legendgroup=group or name,
        customdata=list(
            zip(
                shapes["replicas"].astype(int),
                shapes["gpus"].astype(int),
                float_values(shapes["good_share"]),
                float_values(shapes["hit_rate"]),
                float_values(shapes["fleet_usd_per_hour"]),
                ["yes" if h else "no" for h in shapes["holds_target"]],
            )
        ),
        hovertemplate="%{text}: %{customdata[0]} replicas, %{customdata[1]} GPUs<br>p95 TTFT %{x:,.0f} ms"
        "<br>$%{y:.6f} per request at the target<br>good share %{customdata[2]:.1%}, hit rate %{customdata[3]:.1%}"
        "<br>fleet $%{customdata[4]:,.2f}/h; holds the target: %{customdata[5]}<extra>%{fullData.name}</extra>",
    )
