"""A week's verdicts in words: why a weekly_trends row got its verdict (the rule's reasons, with the judged metrics
named as people say them and their figures in their units), and what to do about a run's diagnosis (tune the
runtime, resize the fleet, or replace the model: docs/warehouse.md, "The four numbers").

Takes mart rows (a pandas row or a dict with weekly_trends' or diagnoses' columns); computes no metric."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

import orjson
import pandas as pd

from warehouse.marts.judged_metrics import REGRESSED_VERDICTS, judged_metric
from warehouse.report.value_text import fmt, pct, usd


@dataclass(frozen=True, slots=True)
class MetricWords:
    label: str  # what a reader calls the metric
    value_text: Callable[[float], str]  # one of its values, in its unit


# Every metric the regression rule judges (warehouse/marts/judged_metrics.py), keyed by its weekly_trends column.
METRIC_WORDS: dict[str, MetricWords] = {
    "efficiency_cost_per_request_usd": MetricWords("efficiency cost per request", lambda v: usd(v, ".6f")),
    "p95_ttft_ms": MetricWords("p95 TTFT", lambda v: fmt(v, ",.0f", " ms")),
    "prefix_cache_hit_rate": MetricWords("prefix-cache hit rate", lambda v: fmt(pct(v), ".1f", "%")),
}

# The verdicts whose regression_reasons say why in full (weekly_trends.sql); the others' only name a change.
JUDGED_BY_REASONS = REGRESSED_VERDICTS | {"drift"}

DiagnosisVerdict = Literal["runtime_lever", "oversized", "model_candidate", "healthy", "inconclusive"]
Lever = Literal["prefix_cache", "routing", "queueing", "cuda_graphs"]

# What to do about a run's diagnosis (diagnoses.verdict), and about each runtime lever that applies (diagnoses.levers).
ACTIONS: dict[DiagnosisVerdict, str] = {
    "runtime_lever": "Tune the runtime",
    "oversized": "Resize the fleet: the batch ran below half of what the endpoint carries inside its SLO, so fewer "
    "GPUs would carry this traffic (Fleet sizing below gives the replicas for the target)",
    "model_candidate": "Consider another model or the API: no runtime lever is left and, even loaded to its SLO "
    "capacity, a request costs more than the budget",
    "healthy": "Nothing to change: within budget, and no runtime lever applies",
    "inconclusive": "Measure what the diagnosis lacks",
}
LEVER_ACTIONS: dict[Lever, str] = {
    "prefix_cache": "the prefix cache misses reuse the traffic offers (is the radix cache on, does the KV pool hold "
    "the shared prefixes?)",
    "routing": "the router spreads shared prefixes over the replicas (a cache-aware policy keeps them on one)",
    "queueing": "requests wait in the queue for most of the p95 tail (scheduling, or more capacity)",
    "cuda_graphs": "decode steps run without a CUDA graph, their batch per rank past --cuda-graph-max-bs (raise the "
    "cap to the largest batch a rank runs)",
}


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and pd.isna(value))


def json_list(raw) -> list:
    """A JSON list column (regression_reasons, regressed_metrics, reasons, levers); [] for a null."""
    if _missing(raw):
        return []
    try:
        items = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return [str(raw)]
    return items if isinstance(items, list) else [items]


def why_in_words(row) -> str:
    """Why a weekly_trends row got its verdict, in words: its reasons with each judged metric as a reader says it and
    its figures in their units, or, where the rule left no reasons, what the verdict means for the row."""
    reasons = [r for r in json_list(row.get("regression_reasons")) if isinstance(r, str)]
    regressed = set(json_list(row.get("regressed_metrics")))
    worded = [_worded(row, reason, regressed) for reason in reasons]
    # A regression's reasons are its own words; any other verdict's reasons say only what changed (a new
    # configuration), so the verdict's meaning follows them.
    if row["regression_verdict"] not in JUDGED_BY_REASONS:
        worded.append(verdict_in_words(row))
    return "; ".join(w for w in worded if w)


def _worded(row, reason: str, regressed: set[str]) -> str:
    for name, words in METRIC_WORDS.items():
        if not reason.startswith(name + " "):
            continue
        if reason.startswith(name + " drifted"):  # a change point's reason (warehouse/marts/change_points.py)
            return words.label + reason[len(name) :]
        metric = judged_metric(name)
        change, baseline = row.get(metric.change_column), row.get(metric.baseline_column)
        threshold = row.get(metric.threshold_column)
        if _missing(change) or _missing(baseline) or _missing(threshold):
            return words.label + reason[len(name) :]
        unit = "%" if metric.change_unit == "%" else " points"
        noise = "beyond this week's noise" if name in regressed else "but inside this week's noise"
        return (
            f"{words.label} {change:+.1f}{unit} against its baseline of {words.value_text(baseline)} "
            f"(threshold {threshold:+g}{unit}), {noise}"
        )
    return reason


def verdict_in_words(row) -> str:
    """The verdict in words where the rule left no reasons (those it left are the regressions' own)."""
    verdict = row["regression_verdict"]
    if verdict == "no_baseline":
        return "the first week of this series (or configuration): nothing earlier to compare with yet"
    if verdict == "not_judged":
        return "live traffic: its cost moves with the week's traffic, so the canaries are judged instead"
    change, threshold = row.get("efficiency_cost_change_pct"), row.get("cost_threshold_pct")
    if _missing(change):
        return "no efficiency cost to judge (no capacity at the SLO)" if verdict == "ok" else ""
    limit = "" if _missing(threshold) else f" (threshold +{threshold:.0f}%)"
    if verdict == "within_noise":
        return f"efficiency cost {change:+.1f}% vs baseline{limit}, inside this week's run-to-run noise"
    if verdict == "ok":
        return f"efficiency cost {change:+.1f}% vs baseline{limit}; latency and hit rate inside theirs too"
    return ""


def what_to_do(diagnoses: Iterable) -> list[str]:
    """What to do about the runs' diagnoses (diagnoses rows of one scenario and endpoint in one week), one sentence
    per distinct advice, in the order the runs give them."""
    advice: list[str] = []
    for row in diagnoses:
        sentence = _action(row["verdict"], json_list(row.get("levers")), json_list(row.get("reasons")))
        if sentence not in advice:
            advice.append(sentence)
    return advice


def _action(verdict: str, levers: list, reasons: list) -> str:
    action = ACTIONS.get(verdict)  # type: ignore[call-overload]  # any verdict a newer mart may write
    if action is None:
        return f"diagnosis {verdict}: see the diagnoses below"
    if verdict == "runtime_lever":
        named = [LEVER_ACTIONS[lever] for lever in levers if lever in LEVER_ACTIONS]
        return f"{action}: {'; '.join(named)}" if named else action
    if verdict == "inconclusive" and reasons:
        return f"{action}: {'; '.join(str(r) for r in reasons)}"
    return action
