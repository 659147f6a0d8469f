"""The changes bench/gate_error_rates.py injects into a canary's runs, each moving exactly one judged metric.

- efficiency cost per request +x%: the run's capacity at the SLO divided by (1 + x/100), a runtime change that
  moves capacity but not latency at the replayed rate (a cache that stops hitting only under load, a scheduler that
  keeps a smaller batch inside the SLO): run_summary prices the efficiency cost as gpu_count x usd_per_gpu_hour /
  3600 / capacity_rps_at_slo, so it scales exactly; the replay's own latencies, hit rate and realised cost do not
  move, and no other judged metric can see it.
- p95 TTFT +x%: every request's first token (and first answer token, its chunks and its finish) later by x% of its
  TTFT, so every TTFT, and hence every percentile of them, scales by (1 + x/100) and each e2e grows by the same
  milliseconds. The run's measured window (runs.window_s) is kept, so its cost does not move.
- prefix-cache hit rate -x points: each request reporting both counts loses x% of its prompt tokens from its
  cached tokens, floored at 0 (a request already below x% loses what it has, so the realised drop can be
  smaller on a workload with uncached requests).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


class Metric(enum.Enum):
    """A judged metric, by the name weekly_trends.regressed_metrics spells it."""

    COST = "efficiency_cost_per_request_usd"
    P95_TTFT = "p95_ttft_ms"
    HIT_RATE = "prefix_cache_hit_rate"


# The rule's thresholds (dbt model weekly_trends_undrifted, `thresholds`), in the unit each change is given in; the
# bench prints the mart's own cost_threshold_pct etc. beside them and refuses to run if they differ.
THRESHOLDS = {Metric.COST: 10.0, Metric.P95_TTFT: 20.0, Metric.HIT_RATE: 10.0}
UNITS = {Metric.COST: "%", Metric.P95_TTFT: "%", Metric.HIT_RATE: " pts"}


@dataclass(frozen=True, slots=True)
class Change:
    metric: Metric
    size: float  # % for cost and p95 TTFT (up), points for the hit rate (down)

    @property
    def label(self) -> str:
        sign = "-" if self.metric is Metric.HIT_RATE else "+"
        return f"{self.metric.value} {sign}{self.size:g}{UNITS[self.metric]}"

    @property
    def slug(self) -> str:
        return f"{self.metric.name.lower().replace('_', '')}{self.size:g}"

    @property
    def times_threshold(self) -> float:
        return self.size / THRESHOLDS[self.metric]

    def apply(self, runs: pa.Table, requests: pa.Table) -> tuple[pa.Table, pa.Table]:
        """One run's `runs` row and requests with the change made."""
        if self.metric is Metric.COST:
            return _lower_capacity(runs, 1 + self.size / 100), requests
        if self.metric is Metric.P95_TTFT:
            return runs, _slower_first_token(requests, 1 + self.size / 100)
        return runs, _fewer_cached_tokens(requests, self.size / 100)


# The grid: half the threshold, the threshold, twice the threshold, for each metric.
CHANGES = tuple(
    Change(metric, size)
    for metric, sizes in ((Metric.COST, (5, 10, 20)), (Metric.P95_TTFT, (10, 20, 40)), (Metric.HIT_RATE, (5, 10, 20)))
    for size in sizes
)


def _replace(table: pa.Table, name: str, values: pa.Array) -> pa.Table:
    index = table.schema.get_field_index(name)
    return table.set_column(index, table.schema.field(index), values.cast(table.schema.field(index).type))


def _lower_capacity(runs: pa.Table, factor: float) -> pa.Table:
    return _replace(runs, "capacity_rps_at_slo", pc.divide(runs.column("capacity_rps_at_slo"), factor))


def _slower_first_token(requests: pa.Table, factor: float) -> pa.Table:
    sent = requests.column("sent_mono_s").to_numpy(zero_copy_only=False).astype(float)
    first = requests.column("first_token_mono_s").to_numpy(zero_copy_only=False).astype(float)
    added_s = np.nan_to_num((factor - 1) * (first - sent))  # 0 for a request with no first token
    out = requests
    for name in ("first_token_mono_s", "first_answer_mono_s", "finish_mono_s"):
        column = requests.column(name).combine_chunks()
        out = _replace(out, name, pc.add(column, pa.array(added_s)))  # null stays null
    chunks = requests.column("chunk_mono_s").combine_chunks()
    lengths = pc.fill_null(pc.list_value_length(chunks), 0).to_numpy(zero_copy_only=False)
    values = pc.list_flatten(chunks).to_numpy(zero_copy_only=False) + np.repeat(added_s, lengths)
    moved = pa.ListArray.from_arrays(chunks.offsets, pa.array(values, pa.float64()), mask=chunks.is_null())
    return _replace(out, "chunk_mono_s", moved)


def _fewer_cached_tokens(requests: pa.Table, share: float) -> pa.Table:
    prompt = requests.column("prompt_tokens").combine_chunks()
    cached = requests.column("cached_tokens").combine_chunks()
    taken = pc.round(pc.multiply(prompt.cast(pa.float64()), share))
    fewer = pc.max_element_wise(pc.subtract(cached.cast(pa.float64()), taken), 0.0)
    both = pc.and_(pc.is_valid(prompt), pc.is_valid(cached))
    return _replace(requests, "cached_tokens", pc.if_else(both, fewer, cached.cast(pa.float64())))
