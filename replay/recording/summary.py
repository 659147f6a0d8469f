"""The one-screen summary of a replay: `summarize` does the math, `print_summary` only prints.

Every number means what the warehouse's column of the same name means (warehouse/schema.sql): the
console and run_summary never disagree about a run.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from rich.console import Console
from rich.table import Table

from replay.recording.records import RequestStatus, RunInfo


@dataclass(frozen=True, slots=True)
class ReplaySummary:
    """The run as the warehouse will define it (warehouse/schema.sql, run_summary): warm-up requests
    enter nothing, latency, tokens and hit rate come from completed requests only, rates divide by the
    measured window."""

    run_id: str
    partial: bool
    requests_total: int  # in the replayed window, warm-up included
    requests_warmup: int  # recorded warm-up requests (in no metric)
    requests_completed: int  # status ok, not warm-up
    requests_failed: int  # status error or timeout, not warm-up
    requests_cancelled: int  # status cancelled (the run stopped), not warm-up
    window_s: float | None  # the measured window: t0 + warmup_s to the last request's end
    request_rate_per_s: float | None  # completed requests / window
    output_tokens_per_s: float | None  # Σ completion_tokens of completed requests / window
    ttft_p50_ms: float | None  # first token − sent
    ttft_p95_ms: float | None
    e2e_p50_ms: float | None  # finish − sent
    e2e_p95_ms: float | None
    e2e_from_scheduled_p95_ms: float | None  # finish − scheduled: what a user of the trace waited
    prefix_cache_hit_rate: float | None  # run_summary.prefix_cache_hit_rate, over completed requests
    schedule_lag_p99_ms: float | None  # replay/recording/schedule_lag.py: sent − scheduled − held, warm-up out
    client_degraded: bool
    errors_by_kind: tuple[tuple[str, int], ...]  # not ok and not warm-up, most frequent first


# The columns `summarize` reads: read only these back from a large requests.parquet.
SUMMARY_COLUMNS = (
    "status",
    "error_kind",
    "is_warmup",
    "scheduled_mono_s",
    "sent_mono_s",
    "first_token_mono_s",
    "finish_mono_s",
    "prompt_tokens",
    "cached_tokens",
    "completion_tokens",
)
_FAILED = (RequestStatus.ERROR.value, RequestStatus.TIMEOUT.value)


def _column(table: pa.Table, name: str) -> np.ndarray:
    """Float column with nulls as NaN."""
    return np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=np.float64)


def _percentile_ms(values_s: np.ndarray, q: float) -> float | None:
    values_s = values_s[~np.isnan(values_s)]
    return float(np.percentile(values_s, q) * 1000.0) if values_s.size else None


def summarize(requests: pa.Table, run: RunInfo) -> ReplaySummary:
    """`requests` has (at least) the SUMMARY_COLUMNS of REQUEST_RECORD_SCHEMA, e.g. requests.parquet read back."""
    status = np.asarray(requests.column("status").to_pylist(), dtype=object)
    warmup = np.asarray(requests.column("is_warmup").to_pylist(), dtype=bool)
    measured = ~warmup
    completed_mask = measured & (status == RequestStatus.OK.value)
    completed = requests.filter(pa.array(completed_mask, type=pa.bool_()))
    sent = _column(completed, "sent_mono_s")
    finish = _column(completed, "finish_mono_s")
    ttft_s = _column(completed, "first_token_mono_s") - sent
    e2e_s = finish - sent
    e2e_scheduled_s = finish - _column(completed, "scheduled_mono_s")

    completion = _column(completed, "completion_tokens")
    window_s = run.window_s if run.window_s and run.window_s > 0 else None
    # As run_summary.sql: prompt tokens of requests that reported cached tokens, over cached tokens
    # of requests that reported prompt tokens.
    prompt = _column(completed, "prompt_tokens")
    cached = _column(completed, "cached_tokens")
    prompt_sum = prompt[~np.isnan(cached)].sum()
    cached_sum = cached[~np.isnan(prompt)].sum()

    kinds = Counter(
        k or "unknown"
        for k, s, m in zip(requests.column("error_kind").to_pylist(), status, measured)
        if m and s != RequestStatus.OK.value
    )
    return ReplaySummary(
        run_id=run.run_id,
        partial=run.partial,
        requests_total=run.requests_total,
        requests_warmup=int(warmup.sum()),
        requests_completed=completed.num_rows,
        requests_failed=int((measured & np.isin(status, _FAILED)).sum()),
        requests_cancelled=int((measured & (status == RequestStatus.CANCELLED.value)).sum()),
        window_s=window_s,
        request_rate_per_s=completed.num_rows / window_s if window_s else None,
        output_tokens_per_s=float(np.nansum(completion)) / window_s if window_s else None,
        ttft_p50_ms=_percentile_ms(ttft_s, 50),
        ttft_p95_ms=_percentile_ms(ttft_s, 95),
        e2e_p50_ms=_percentile_ms(e2e_s, 50),
        e2e_p95_ms=_percentile_ms(e2e_s, 95),
        e2e_from_scheduled_p95_ms=_percentile_ms(e2e_scheduled_s, 95),
        prefix_cache_hit_rate=float(cached_sum / prompt_sum) if prompt_sum > 0 else None,
        schedule_lag_p99_ms=run.schedule_lag_p99_ms,
        client_degraded=run.client_degraded,
        errors_by_kind=tuple(kinds.most_common()),
    )


def _fmt(value: float | None, spec: str, unit: str = "") -> str:
    return "—" if value is None else f"{value:{spec}}{unit}"


def print_summary(summary: ReplaySummary, console: Console | None = None) -> None:
    console = console or Console()
    table = Table(
        title=f"replay {summary.run_id}" + ("  [bold red](partial)[/]" if summary.partial else ""),
        show_header=False,
        box=None,
        pad_edge=False,
    )
    table.add_column(style="bold")
    table.add_column(justify="right")
    table.add_row(
        "requests completed / failed / total",
        f"{summary.requests_completed} / {summary.requests_failed} / {summary.requests_total}",
    )
    if summary.requests_cancelled:
        table.add_row("  cancelled (run stopped)", str(summary.requests_cancelled))
    if summary.requests_warmup:
        table.add_row("  warm-up (not measured)", str(summary.requests_warmup))
    table.add_row("measured window", _fmt(summary.window_s, ".1f", " s"))
    table.add_row("request rate", _fmt(summary.request_rate_per_s, ".2f", " req/s"))
    table.add_row("output throughput", _fmt(summary.output_tokens_per_s, ",.0f", " tok/s"))
    table.add_row("TTFT p50 / p95", f"{_fmt(summary.ttft_p50_ms, ',.0f')} / {_fmt(summary.ttft_p95_ms, ',.0f', ' ms')}")
    table.add_row(
        "end-to-end p50 / p95", f"{_fmt(summary.e2e_p50_ms, ',.0f')} / {_fmt(summary.e2e_p95_ms, ',.0f', ' ms')}"
    )
    table.add_row("end-to-end p95 from schedule", _fmt(summary.e2e_from_scheduled_p95_ms, ",.0f", " ms"))
    table.add_row(
        "prefix cache hit rate",
        _fmt(None if summary.prefix_cache_hit_rate is None else summary.prefix_cache_hit_rate * 100, ".1f", " %"),
    )
    degraded = "[bold red]DEGRADED[/]" if summary.client_degraded else "ok"
    table.add_row("schedule lag p99", f"{_fmt(summary.schedule_lag_p99_ms, '.2f', ' ms')}  ({degraded})")
    for kind, count in summary.errors_by_kind[:5]:
        table.add_row(f"  error: {kind}", str(count))
    console.print(table)
