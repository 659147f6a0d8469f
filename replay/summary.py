"""The one-screen summary of a replay: `summarize` does the math, `print_summary` only prints."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from rich.console import Console
from rich.table import Table

from replay.records import RequestStatus, RunInfo


@dataclass(frozen=True, slots=True)
class ReplaySummary:
    run_id: str
    partial: bool
    requests_total: int  # in the replayed window
    requests_ok: int
    requests_failed: int  # recorded with status other than ok
    window_s: float | None  # t0 to the last finish
    request_rate_per_s: float | None  # ok requests / window
    output_tokens_per_s: float | None  # Σ completion_tokens of ok requests / window
    ttft_p50_ms: float | None  # first token − sent
    ttft_p95_ms: float | None
    e2e_p50_ms: float | None  # finish − sent
    e2e_p95_ms: float | None
    e2e_from_scheduled_p95_ms: float | None  # finish − scheduled: what a user of the trace waited
    prefix_cache_hit_rate: float | None  # Σ cached_tokens / Σ prompt_tokens, where both were reported
    schedule_lag_p99_ms: float | None
    client_degraded: bool
    errors_by_kind: tuple[tuple[str, int], ...]  # most frequent first


# The columns `summarize` reads: read only these back from a large requests.parquet.
SUMMARY_COLUMNS = (
    "status", "error_kind", "scheduled_mono_s", "sent_mono_s", "first_token_mono_s", "finish_mono_s",
    "prompt_tokens", "cached_tokens", "completion_tokens",
)


def _column(table: pa.Table, name: str) -> np.ndarray:
    """Float column with nulls as NaN."""
    return np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=np.float64)


def _percentile_ms(values_s: np.ndarray, q: float) -> float | None:
    values_s = values_s[~np.isnan(values_s)]
    return float(np.percentile(values_s, q) * 1000.0) if values_s.size else None


def summarize(requests: pa.Table, run: RunInfo) -> ReplaySummary:
    """`requests` has (at least) the SUMMARY_COLUMNS of REQUEST_RECORD_SCHEMA, e.g. requests.parquet read back."""
    ok_mask = np.asarray(requests.column("status").to_pylist(), dtype=object) == RequestStatus.OK.value
    ok = requests.filter(pa.array(ok_mask, type=pa.bool_())) if requests.num_rows else requests
    sent = _column(ok, "sent_mono_s")
    finish = _column(ok, "finish_mono_s")
    ttft_s = _column(ok, "first_token_mono_s") - sent
    e2e_s = finish - sent
    e2e_scheduled_s = finish - _column(ok, "scheduled_mono_s")

    completion = _column(ok, "completion_tokens")
    window_s = run.window_s if run.window_s and run.window_s > 0 else None
    prompt = _column(requests, "prompt_tokens")
    cached = _column(requests, "cached_tokens")
    both = ~np.isnan(prompt) & ~np.isnan(cached)
    prompt_sum = prompt[both].sum()

    kinds = Counter(k or "unknown" for k, good in zip(requests.column("error_kind").to_pylist(), ok_mask) if not good)
    return ReplaySummary(
        run_id=run.run_id,
        partial=run.partial,
        requests_total=run.requests_total,
        requests_ok=ok.num_rows,
        requests_failed=requests.num_rows - ok.num_rows,
        window_s=window_s,
        request_rate_per_s=ok.num_rows / window_s if window_s else None,
        output_tokens_per_s=float(np.nansum(completion)) / window_s if window_s else None,
        ttft_p50_ms=_percentile_ms(ttft_s, 50),
        ttft_p95_ms=_percentile_ms(ttft_s, 95),
        e2e_p50_ms=_percentile_ms(e2e_s, 50),
        e2e_p95_ms=_percentile_ms(e2e_s, 95),
        e2e_from_scheduled_p95_ms=_percentile_ms(e2e_scheduled_s, 95),
        prefix_cache_hit_rate=float(cached[both].sum() / prompt_sum) if prompt_sum > 0 else None,
        schedule_lag_p99_ms=run.schedule_lag_p99_ms,
        client_degraded=run.client_degraded,
        errors_by_kind=tuple(kinds.most_common()),
    )


def _fmt(value: float | None, spec: str, unit: str = "") -> str:
    return "—" if value is None else f"{value:{spec}}{unit}"


def print_summary(summary: ReplaySummary, console: Console | None = None) -> None:
    console = console or Console()
    table = Table(title=f"replay {summary.run_id}" + ("  [bold red](partial)[/]" if summary.partial else ""),
                  show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column(justify="right")
    table.add_row("requests ok / failed / total", f"{summary.requests_ok} / {summary.requests_failed} / {summary.requests_total}")
    table.add_row("window", _fmt(summary.window_s, ".1f", " s"))
    table.add_row("request rate", _fmt(summary.request_rate_per_s, ".2f", " req/s"))
    table.add_row("output throughput", _fmt(summary.output_tokens_per_s, ",.0f", " tok/s"))
    table.add_row("TTFT p50 / p95", f"{_fmt(summary.ttft_p50_ms, ',.0f')} / {_fmt(summary.ttft_p95_ms, ',.0f', ' ms')}")
    table.add_row("end-to-end p50 / p95", f"{_fmt(summary.e2e_p50_ms, ',.0f')} / {_fmt(summary.e2e_p95_ms, ',.0f', ' ms')}")
    table.add_row("end-to-end p95 from schedule", _fmt(summary.e2e_from_scheduled_p95_ms, ",.0f", " ms"))
    table.add_row("prefix cache hit rate", _fmt(None if summary.prefix_cache_hit_rate is None else summary.prefix_cache_hit_rate * 100, ".1f", " %"))
    degraded = "[bold red]DEGRADED[/]" if summary.client_degraded else "ok"
    table.add_row("schedule lag p99", f"{_fmt(summary.schedule_lag_p99_ms, '.2f', ' ms')}  ({degraded})")
    for kind, count in summary.errors_by_kind[:5]:
        table.add_row(f"  error: {kind}", str(count))
    console.print(table)
