"""Plots of the notebook's answers: each takes the rows an example query returned (as the analyst has edited it) and
draws them; none computes a metric. A query edited so that a column a plot needs is gone gets a sentence naming it
instead of a plot."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd
import plotly.graph_objects as go

from warehouse.report.interactive_plots import figure_layout, float_values

COST_TREND_COLUMNS = ("week_start", "scenario", "endpoint", "efficiency_cost_per_request_usd")
CACHE_VS_COST_COLUMNS = ("scenario", "endpoint", "mean_hit_rate", "mean_efficiency_cost_per_request_usd")


def missing_columns(frame: pd.DataFrame, needed: Iterable[str]) -> str | None:
    """None when the rows have every column the plot needs, else a sentence naming the missing ones."""
    missing = [c for c in needed if c not in frame.columns]
    if not missing:
        return None
    return f"No plot: the query above no longer returns {', '.join(f'`{c}`' for c in missing)}."


def cost_trend_figure(frame: pd.DataFrame) -> go.Figure:
    """One line per scenario on its endpoint: the efficiency cost per request week by week (solid), and the realised
    cost (dotted) when the rows have it."""
    fig = go.Figure()
    for (scenario, endpoint), rows in frame.sort_values("week_start").groupby(["scenario", "endpoint"]):
        label = f"{scenario} ({endpoint})"
        weeks = pd.to_datetime(rows["week_start"])
        fig.add_trace(
            go.Scatter(
                x=weeks,
                y=float_values(rows["efficiency_cost_per_request_usd"]),
                mode="lines+markers",
                name=label,
                legendgroup=label,
                hovertemplate="%{x|%Y-%m-%d}: $%{y:.6f} per request at capacity<extra>%{fullData.name}</extra>",
            )
        )
        if "realised_cost_per_request_usd" in rows:
            fig.add_trace(
                go.Scatter(
                    x=weeks,
                    y=float_values(rows["realised_cost_per_request_usd"]),
                    mode="lines",
                    line={"dash": "dot", "width": 1},
                    name=f"{label} realised",
                    legendgroup=label,
                    hovertemplate="%{x|%Y-%m-%d}: realised $%{y:.6f} per request<extra>%{fullData.name}</extra>",
                )
            )
    return figure_layout(fig, "Efficiency cost per request (solid) and realised cost (dotted)", "USD per request")


def cache_vs_cost_figure(frame: pd.DataFrame) -> go.Figure:
    """One point per scenario on its endpoint: its mean prefix-cache hit rate against its mean efficiency cost."""
    fig = go.Figure()
    for (scenario, endpoint), rows in frame.groupby(["scenario", "endpoint"]):
        fig.add_trace(
            go.Scatter(
                x=[None if v is None else v * 100 for v in float_values(rows["mean_hit_rate"])],
                y=float_values(rows["mean_efficiency_cost_per_request_usd"]),
                mode="markers",
                marker={"size": 12},
                name=f"{scenario} ({endpoint})",
                hovertemplate="hit rate %{x:.1f}%, $%{y:.6f} per request at capacity<extra>%{fullData.name}</extra>",
            )
        )
    title = "Prefix-cache hit rate against the efficiency cost"
    return figure_layout(fig, title, "USD per request", xaxis="mean hit rate (%)")
