"""The weekly report's structured-output section: how often answers parse, what a parseable answer costs,
and what the server-side constraint costs (TPOT) and saves (retries) against a prompt-only variant.

Reads weekly_trends rows only; every number shown is a column defined in its dbt model's YAML, except the
comparison, which is the ratio or difference of two such columns and says which rows it compares.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from datetime import date

import pandas as pd

from warehouse.report.value_text import fmt, usd

PER_STRUCTURED = 1000  # retries are shown per this many structured requests, so variants of any size compare


def retries_per_structured(retries: float | None, structured_requests: int | None) -> float | None:
    """Retries per PER_STRUCTURED structured requests, the one way the report, its sentence and the console show
    them (weekly_trends.retries is the week's count)."""
    if retries is None or not structured_requests:
        return None
    return retries * PER_STRUCTURED / structured_requests


@dataclass(frozen=True, slots=True)
class StructuredRow:
    """One weekly_trends row of the week with structured requests."""

    scenario: str
    endpoint: str
    backend: str
    config_fingerprint: str | None
    role: str | None  # live | canary (null: not recorded)
    constrained: bool  # the format was sent to the server (else it was only in the prompt)
    structured_requests: int
    valid_answer_rate: float | None
    min_valid_rate: float | None
    realised_cost_per_request_usd: float | None
    usd_per_valid_request: float | None
    retries: float | None
    tpot_constrained_ms: float | None
    tpot_unconstrained_ms: float | None

    @property
    def retries_per_1000(self) -> float | None:
        return retries_per_structured(self.retries, self.structured_requests)

    @property
    def below_threshold(self) -> bool:
        """What the structured_output asset check fails on: a constrained rate under the scenario's threshold."""
        return (
            self.constrained
            and self.valid_answer_rate is not None
            and self.min_valid_rate is not None
            and self.valid_answer_rate < self.min_valid_rate
        )


@dataclass(frozen=True, slots=True)
class ConstraintComparison:
    """A constrained scenario against a prompt-only one of the same week and server configuration (the same
    endpoint, or another replica of the same fleet: comparisons() says how they are paired)."""

    constrained: StructuredRow
    prompt_only: StructuredRow

    @property
    def tpot_change_pct(self) -> float | None:
        """The constrained requests' p50 TPOT against the prompt-only variant's. Not against the other requests
        of the same runs: SGLang fills the grammar masks inside each decode step, so they slow the whole batch."""
        return _change_pct(self.constrained.tpot_constrained_ms, self.prompt_only.tpot_unconstrained_ms)

    @property
    def cost_per_request_change_pct(self) -> float | None:
        return _change_pct(
            self.constrained.realised_cost_per_request_usd, self.prompt_only.realised_cost_per_request_usd
        )

    @property
    def usd_per_valid_request_change_pct(self) -> float | None:
        return _change_pct(self.constrained.usd_per_valid_request, self.prompt_only.usd_per_valid_request)

    @property
    def retries_avoided_per_1000(self) -> float | None:
        if self.prompt_only.retries_per_1000 is None or self.constrained.retries_per_1000 is None:
            return None
        return self.prompt_only.retries_per_1000 - self.constrained.retries_per_1000


def structured_rows(trends: pd.DataFrame, week_start: date) -> list[StructuredRow]:
    """This week's weekly_trends rows that had structured requests, by scenario and endpoint."""
    if trends.empty or "structured_requests" not in trends.columns:
        return []
    structured = pd.to_numeric(trends["structured_requests"]).fillna(0) > 0
    week = trends[(trends["week_start"] == week_start) & structured]
    rows = [
        StructuredRow(
            scenario=str(r["scenario"]),
            endpoint=str(r["endpoint"]),
            backend=str(r["backend"]),
            config_fingerprint=_text(r["config_fingerprint"]),
            role=_text(r["role"]),
            constrained=bool(r["constrained_requests"] > 0),
            structured_requests=int(r["structured_requests"]),
            valid_answer_rate=_number(r["valid_answer_rate"]),
            min_valid_rate=_number(r["min_valid_rate"]),
            realised_cost_per_request_usd=_number(r["realised_cost_per_request_usd"]),
            usd_per_valid_request=_number(r["usd_per_valid_request"]),
            retries=_number(r["retries"]),
            tpot_constrained_ms=_number(r["tpot_constrained_ms"]),
            tpot_unconstrained_ms=_number(r["tpot_unconstrained_ms"]),
        )
        for _, r in week.iterrows()
    ]
    return sorted(rows, key=lambda row: (row.scenario, row.endpoint))


def comparisons(rows: list[StructuredRow]) -> list[ConstraintComparison]:
    """Each prompt-only row of the week paired with the constrained row that replayed the same traffic on the same
    server configuration: the constrained rows of its backend and config_fingerprint (its endpoint, or another
    replica with the same flags), narrowed to its role (a canary with a canary: the same fixed window) and then
    to its number of structured requests when several remain. No pair when none or several are left."""
    found = []
    for prompt_only in (r for r in rows if not r.constrained):
        candidates = [
            r
            for r in rows
            if r.constrained
            and (r.backend, r.config_fingerprint) == (prompt_only.backend, prompt_only.config_fingerprint)
        ]
        for narrowed_by in ("role", "structured_requests"):
            if len(candidates) > 1:
                wanted = getattr(prompt_only, narrowed_by)
                candidates = [r for r in candidates if getattr(r, narrowed_by) == wanted]
        if len(candidates) == 1:
            found.append(ConstraintComparison(candidates[0], prompt_only))
    return found


def structured_output_section(trends: pd.DataFrame, week_start: date) -> str:
    """The section as HTML (its heading included): the table, then one sentence per compared pair."""
    rows = structured_rows(trends, week_start)
    heading = "<h2>Structured output</h2>"
    if not rows:
        return (
            f"{heading}<p class='note'>No scenario this week sent requests with a response format "
            "(structured_output in workloads/scenarios.yaml).</p>"
        )
    columns = (
        "scenario", "endpoint", "format sent as", "structured requests", "valid answers", "threshold",
        f"retries per {PER_STRUCTURED:,}", "cost/request", "cost/valid request", "TPOT constrained", "TPOT other",
    )  # fmt: skip
    head = "<tr>" + "".join(f"<th>{c}</th>" for c in columns) + "</tr>"
    body = "".join(_row_html(row) for row in rows)
    sentences = "".join(f"<p>{html.escape(comparison_sentence(c))}</p>" for c in comparisons(rows))
    note = (
        "<p class='note'>Cost per valid request = cost per request / valid-answer rate: every answer that does not "
        "parse is sent again. Retries: the extra requests that takes. TPOT constrained vs other: the same runs' "
        "requests decoded under the grammar and without it; the masks are filled inside each decode step, so a "
        "constrained request slows its whole batch, and the sentence above compares with the prompt-only variant."
        "</p>"
    )
    return f"{heading}<table class='structured'>{head}{body}</table>{sentences}{note}"


def _row_html(row: StructuredRow) -> str:
    rate = fmt(row.valid_answer_rate, ".1%")
    if row.below_threshold:
        rate = f"<b>{rate} below threshold</b>"
    cells = (
        html.escape(row.scenario),
        html.escape(row.endpoint),
        "server constraint" if row.constrained else "prompt only",
        f"{row.structured_requests:,}",
        rate,
        fmt(row.min_valid_rate, ".1%"),
        fmt(row.retries_per_1000, ",.1f"),
        usd(row.realised_cost_per_request_usd, ".5f"),
        usd(row.usd_per_valid_request, ".5f"),
        fmt(row.tpot_constrained_ms, ",.2f", " ms"),
        fmt(row.tpot_unconstrained_ms, ",.2f", " ms"),
    )
    css = " class='verdict-regression'" if row.below_threshold else ""
    return f"<tr{css}>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>"


def comparison_sentence(c: ConstraintComparison) -> str:
    """What the constraint costs and saves, in one plain-text sentence (the page and the console)."""
    return (
        f"The constraint ({c.constrained.scenario} on {c.constrained.endpoint} against the prompt-only "
        f"{c.prompt_only.scenario} on {c.prompt_only.endpoint}) costs {fmt(c.tpot_change_pct, '+.1f', '%')} TPOT and "
        f"{fmt(c.cost_per_request_change_pct, '+.1f', '%')} cost per request, and saves "
        f"{fmt(c.retries_avoided_per_1000, ',.1f')} retries per {PER_STRUCTURED:,} structured requests: "
        f"cost per valid request {fmt(c.usd_per_valid_request_change_pct, '+.1f', '%')}."
    )


def _change_pct(value: float | None, reference: float | None) -> float | None:
    if value is None or not reference:
        return None
    return 100.0 * (value - reference) / reference


def _text(value) -> str | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def _number(value) -> float | None:
    if value is None or (isinstance(value, float) and math.isnan(value)) or pd.isna(value):
        return None
    return float(value)
