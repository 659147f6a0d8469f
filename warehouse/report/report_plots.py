"""The report's pictures, drawn with matplotlib into SVG text (inline in the HTML) or PNG files.

Each function takes the report's data frames and returns one figure; none computes a metric."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")  # files only, no display

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

_SIZE = (7.5, 3.6)


def _series(frame: pd.DataFrame):
    for (scenario, endpoint), rows in frame.sort_values("week_start").groupby(["scenario", "endpoint"]):
        yield f"{scenario} ({endpoint})", rows


def _finish(fig: Figure, ax, title: str, ylabel: str) -> Figure:
    ax.set_title(title, fontsize=11)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="best")
    fig.autofmt_xdate()
    fig.tight_layout()
    return fig


def cost_trend(trends: pd.DataFrame) -> Figure:
    """Cost per request per scenario, with this week's bootstrap interval and the 4-week baseline."""
    fig, ax = plt.subplots(figsize=_SIZE)
    for label, rows in _series(trends):
        weeks = pd.to_datetime(rows["week_start"])
        line = ax.plot(weeks, rows["cost_per_request_usd"], marker="o", label=label)[0]
        ax.fill_between(
            weeks,
            rows["cost_per_request_low_usd"].astype(float),
            rows["cost_per_request_high_usd"].astype(float),
            color=line.get_color(),
            alpha=0.15,
        )
        ax.plot(
            weeks,
            rows["baseline_cost_per_request_usd"].astype(float),
            linestyle="--",
            color=line.get_color(),
            alpha=0.7,
        )
        regressed = rows[rows["regression_verdict"] == "regression"]
        ax.scatter(
            pd.to_datetime(regressed["week_start"]),
            regressed["cost_per_request_usd"],
            s=120,
            facecolors="none",
            edgecolors="red",
            linewidths=2,
        )
    return _finish(
        fig,
        ax,
        "Cost per request (band: 95% bootstrap interval; dashed: baseline; red ring: regression)",
        "USD per request",
    )


def latency_percentiles(trends: pd.DataFrame) -> Figure:
    fig, ax = plt.subplots(figsize=_SIZE)
    for label, rows in _series(trends):
        weeks = pd.to_datetime(rows["week_start"])
        line = ax.plot(weeks, rows["p95_ttft_ms"], marker="o", label=f"{label} p95 TTFT")[0]
        ax.plot(
            weeks, rows["p50_ttft_ms"], marker=".", linestyle=":", color=line.get_color(), label=f"{label} p50 TTFT"
        )
    return _finish(fig, ax, "Time to first token, p50 and p95", "ms")


def hit_rate_vs_cost(runs: pd.DataFrame) -> Figure:
    fig, ax = plt.subplots(figsize=_SIZE)
    for label, rows in _series(runs):
        ax.scatter(
            rows["prefix_cache_hit_rate"].astype(float) * 100, rows["cost_per_request_usd"], label=label, alpha=0.8
        )
    ax.set_xlabel("prefix-cache hit rate (%)")
    return _finish(fig, ax, "Prefix-cache hit rate against cost, one point per replay", "USD per request")


def _weekly_share(runs: pd.DataFrame, column: str, title: str) -> Figure:
    """A run_summary ratio, averaged per week and scenario, as a percentage over time."""
    fig, ax = plt.subplots(figsize=_SIZE)
    weekly = runs.groupby(["week_start", "scenario", "endpoint"], as_index=False)[column].mean()
    for label, rows in _series(weekly):
        ax.plot(pd.to_datetime(rows["week_start"]), rows[column].astype(float) * 100, marker="o", label=label)
    return _finish(fig, ax, title, "%")


def occupancy(runs: pd.DataFrame) -> Figure:
    return _weekly_share(runs, "batch_occupancy", "Batch occupancy (running requests / max running requests)")


def reasoning_share(runs: pd.DataFrame) -> Figure:
    return _weekly_share(runs, "reasoning_token_share", "Reasoning tokens as a share of output tokens")


def to_svg(fig: Figure) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg")
    plt.close(fig)
    text = buffer.getvalue()
    return text[text.index("<svg") :]  # drop the XML prolog and doctype: the SVG sits inside HTML


def to_png(fig: Figure, path) -> None:
    fig.savefig(path, format="png", dpi=110)
    plt.close(fig)
