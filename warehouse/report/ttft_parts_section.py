"""The weekly report's TTFT section: where a live scenario's time to first token goes, week by week (a stacked bar of
the mean TTFT by part) and in a sentence for the report's week.

Reads ttft_parts rows only (dbt model ttft_parts); every number shown is one of its columns, or a part's
share of the week's mean TTFT. A real SGLang reports at most the queue and the prefill; what the server did not
report (and the network between client and server) is drawn as "not reported by the server", never split up.
"""

from __future__ import annotations

import html
from datetime import date

import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative

from warehouse.report import interactive_plots as plots_js

UNREPORTED = "mean_ttft_unreported_ms"
# The parts in the order a request passes them, with the label a reader sees; the unreported rest last.
TTFT_PARTS = (
    ("mean_ttft_prealloc_ms", "decode prealloc queue"),
    ("mean_ttft_bootstrap_ms", "bootstrap with the prefill server"),
    ("mean_ttft_queue_ms", "waiting queue"),
    ("mean_ttft_prefill_ms", "prefill"),
    ("mean_ttft_kv_transfer_ms", "KV transfer"),
    ("mean_ttft_decode_wait_ms", "decode server's wait for the first token"),
    (UNREPORTED, "not reported by the server"),
)
_UNREPORTED_GREY = "#bdbdbd"


def _value(row: dict, column: str) -> float | None:
    value = row.get(column)
    return None if value is None or pd.isna(value) else float(value)


def ttft_parts_figure(rows: pd.DataFrame, scenario: str) -> go.Figure:
    """One scenario's weeks: a bar per week, the mean TTFT stacked by part (the parts no week reported left out)."""
    rows = rows.sort_values("week_start")
    weeks = [str(w) for w in rows["week_start"]]
    fig = go.Figure()
    for i, (column, label) in enumerate(TTFT_PARTS):
        values = [None if pd.isna(v) else float(v) for v in rows[column]]
        if all(v is None for v in values):
            continue
        colour = _UNREPORTED_GREY if column == UNREPORTED else qualitative.Plotly[i % len(qualitative.Plotly)]
        fig.add_trace(
            go.Bar(
                x=weeks,
                y=values,
                name=label,
                marker_color=colour,
                hovertemplate=f"{html.escape(label)}: %{{y:,.1f}} ms<extra>%{{x}}</extra>",
            )
        )
    fig.update_layout(
        title={"text": f"{scenario}: mean time to first token by part", "font": {"size": 14}},
        barmode="stack",
        height=380,
        margin={"l": 70, "r": 20, "t": 50, "b": 50},
        legend={"font": {"size": 10}},
        xaxis_title="week",
        yaxis_title="mean TTFT (ms)",
        template="plotly_white",
    )
    return fig


def where_ttft_goes(row: dict) -> str:
    """The week's mean TTFT of one scenario in words: each part reported, largest first, with its share."""
    mean_ms = float(row["mean_ttft_ms"])
    parts = [(label, ms) for column, label in TTFT_PARTS if (ms := _value(row, column)) is not None]
    parts.sort(key=lambda part: -part[1])

    def share(ms: float) -> str:
        return f"{max(ms, 0.0) / mean_ms:.0%}" if mean_ms > 0 else "—"

    # round() to an int: a part left over by float subtraction (-1e-12 ms) reads 0 ms, not -0 ms.
    said = "; ".join(f"{label} {round(ms):,} ms ({share(ms)})" for label, ms in parts)
    reporting = f"{int(row['reporting_requests']):,} of its {int(row['completed_requests']):,} completed requests"
    return (
        f"In the week of {row['week_start']}, {row['scenario']}'s mean time to first token was {mean_ms:,.0f} ms: "
        f"{said}. The server reported parts of it for {reporting}."
    )


def ttft_parts_section(parts: pd.DataFrame | None, week_start: date) -> tuple[str, int]:
    """The section for every live scenario with a row this week (its figure over the weeks so far and the sentence),
    and how many figures it drew; nothing in a week without one."""
    if parts is None or parts.empty:
        return "", 0
    live = parts[(parts["role"] == "live") & (parts["week_start"] <= week_start)]
    this_week = live[live["week_start"] == week_start]
    if this_week.empty:
        return "", 0
    blocks = []
    for index, (_, row) in enumerate(this_week.sort_values("scenario").iterrows()):
        scenario = str(row["scenario"])
        figure = plots_js.figure_html(ttft_parts_figure(live[live["scenario"] == scenario], scenario), f"ttft-{index}")
        blocks.append(
            f"<figure class='plot ttft-parts'>{figure}</figure>"
            f"<p class='ttft-sentence'>{html.escape(where_ttft_goes(row.to_dict()))}</p>"
        )
    note = (
        "<p class='note'>Each part is the mean over the week's completed requests of what the server reported for it "
        "(a request without it counts 0), so the parts add up to the mean TTFT. A real SGLang reports only its queue "
        "and prefill times (meta_info.queue_time, forward_entry_time, prefill_finished_time); the twin reports every "
        "stage, disaggregated ones included. 'Not reported by the server' is the TTFT the client measured less the "
        "parts: the stages the server did not report, and the network and router between client and server.</p>"
    )
    return f"<h2>Where the time to first token goes</h2>{''.join(blocks)}{note}", len(blocks)
