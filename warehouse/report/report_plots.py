"""The report's static picture: the cost trend drawn with matplotlib into a PNG file beside the page (for
mail, chat and anything that does not run the page's scripts; the page's own plots are interactive_plots).

Takes the report's data frames; computes no metric."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # files only, no display

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from warehouse.marts.judged_metrics import REGRESSED_VERDICTS  # noqa: E402

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
    """The efficiency cost per request per scenario (what the runtime costs at the SLO capacity, the judged figure)
    with this week's interval and the 4-week baseline; the realised cost dotted beside it (it moves with volume)."""
    fig, ax = plt.subplots(figsize=_SIZE)
    for label, rows in _series(trends):
        weeks = pd.to_datetime(rows["week_start"])
        line = ax.plot(weeks, rows["efficiency_cost_per_request_usd"].astype(float), marker="o", label=label)[0]
        ax.fill_between(
            weeks,
            rows["efficiency_cost_low_usd"].astype(float),
            rows["efficiency_cost_high_usd"].astype(float),
            color=line.get_color(),
            alpha=0.15,
        )
        ax.plot(
            weeks,
            rows["baseline_efficiency_cost_per_request_usd"].astype(float),
            linestyle="--",
            color=line.get_color(),
            alpha=0.7,
        )
        ax.plot(
            weeks,
            rows["realised_cost_per_request_usd"].astype(float),
            linestyle=":",
            color=line.get_color(),
            alpha=0.6,
            label=f"{label} realised",
        )
        regressed = rows[rows["regression_verdict"].isin(REGRESSED_VERDICTS)]
        ax.scatter(
            pd.to_datetime(regressed["week_start"]),
            regressed["efficiency_cost_per_request_usd"].astype(float),
            s=120,
            facecolors="none",
            edgecolors="red",
            linewidths=2,
        )
    return _finish(
        fig,
        ax,
        "Efficiency cost per request, at the SLO capacity (band: 95% interval; dashed: baseline; dotted: realised; "
        "red ring: regression)",
        "USD per request",
    )


def to_png(fig: Figure, path) -> None:
    fig.savefig(path, format="png", dpi=110)
    plt.close(fig)
