"""One SGLang /metrics scrape turned into ServerSample rows: `sglang:*` series with their labels,
summed over `dp_rank` (each DP-attention rank reports its own series), counters and histograms as
deltas from the first scrape of the run.

A fleet's router (smg) serves its own metrics, named `smg_*`, on a port of their own; of those the probes
keep the families that say where requests went and how the workers stood (ROUTER_FAMILIES), not the
router's allocator, tokio and tokenizer internals. Rows carry their role (router, worker, or server for a
single server) and the worker they describe: the scraped worker, or a router series' `worker` label.

Parsing is prometheus-client's (`text_string_to_metric_families`), so every exposition quirk
(escaping, `_total`/`_created` suffixes, exemplars) is handled by the reference implementation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import orjson
from prometheus_client.parser import text_string_to_metric_families

from common.secret_redaction import REDACTED, is_secret_name
from endpoints.probes.probe_records import ServerSample

SGLANG_PREFIX = "sglang:"
SUMMED_LABEL = "dp_rank"
# Fractions and averages: a sum over DP ranks would exceed 1 or double-count, so they are averaged.
MEAN_GAUGES = frozenset(
    {
        "sglang:token_usage",
        "sglang:full_token_usage",
        "sglang:cache_hit_rate",
        "sglang:utilization",
        "sglang:spec_accept_length",
        "sglang:spec_accept_rate",
        "sglang:new_token_ratio",
    }
)
# smg 1.13.0's families (prometheus-client names: a counter's without its _total) about routing and workers.
ROUTER_PREFIX = "smg_"
ROUTER_FAMILIES = frozenset(
    {
        "smg_router_requests",  # by endpoint (generate, chat) and streaming
        "smg_router_request_errors",
        "smg_router_upstream_responses",
        "smg_router_request_duration_seconds",
        "smg_worker_requests",  # per worker: where the router sent each request
        "smg_worker_requests_active",
        "smg_worker_health",
        "smg_worker_pool_size",
        "smg_engine_running_requests",  # per worker, as the router's load monitor last read it
        "smg_engine_waiting_requests",
        "smg_engine_cache_hit_rate",
        "smg_engine_token_usage",
    }
)
ROUTER_MEAN_GAUGES = frozenset({"smg_engine_cache_hit_rate", "smg_engine_token_usage"})
WORKER_LABEL = "worker"
_CUMULATIVE_KINDS = ("counter", "histogram")
_SKIPPED_SUFFIXES = ("_created", "_gcount", "_gsum")  # creation timestamps and gauge-histogram parts


@dataclass(frozen=True, slots=True)
class SeriesValue:
    metric: str  # full sample name, e.g. sglang:prompt_tokens_total
    kind: str  # counter | gauge | histogram
    labels_json: str  # sorted JSON, dp_rank removed
    value: float  # raw (cumulative for counters), already combined over dp_rank
    worker: str | None = None  # the series' `worker` label (a router's per-worker series)


def parse_sglang_metrics(text: str) -> list[SeriesValue]:
    """The sglang:* series of one exposition, combined over dp_rank. Raises ValueError on bad text."""
    return _parse(text, lambda name: name.startswith(SGLANG_PREFIX), MEAN_GAUGES)


def parse_router_metrics(text: str) -> list[SeriesValue]:
    """The ROUTER_FAMILIES series of smg's exposition, combined over dp_rank. Raises ValueError on bad text."""
    return _parse(text, ROUTER_FAMILIES.__contains__, ROUTER_MEAN_GAUGES)


def _parse(text: str, keep: Callable[[str], bool], mean_gauges: frozenset[str]) -> list[SeriesValue]:
    sums: dict[tuple[str, str, str], list[float]] = {}
    workers: dict[tuple[str, str, str], str | None] = {}
    for family in text_string_to_metric_families(text):
        if not keep(family.name):
            continue
        kind = family.type if family.type in ("counter", "gauge", "histogram") else "gauge"
        for sample in family.samples:
            if sample.name.endswith(_SKIPPED_SUFFIXES):
                continue
            # Labels are stored: a secret-named one (no SGLang build sends any) is redacted too.
            labels = {k: REDACTED if is_secret_name(k) else v for k, v in sample.labels.items() if k != SUMMED_LABEL}
            key = (sample.name, kind, orjson.dumps(labels, option=orjson.OPT_SORT_KEYS).decode())
            sums.setdefault(key, []).append(float(sample.value))
            workers[key] = labels.get(WORKER_LABEL)
    out = []
    for (name, kind, labels_json), values in sums.items():
        combined = sum(values) / len(values) if name in mean_gauges else sum(values)
        out.append(SeriesValue(name, kind, labels_json, combined, workers[(name, kind, labels_json)]))
    return out


@dataclass(slots=True)
class _Baseline:
    start: float  # value the run's deltas are measured from (shifted on a counter reset)
    last: float


@dataclass(slots=True)
class DeltaTracker:
    """Per (source, series): counters relative to the run's first scrape, surviving a server restart.

    A series absent from the first scrape was created during the run, so it counts from 0.
    """

    _baselines: dict[tuple[str, str, str], _Baseline] = field(default_factory=dict)
    _first_seen: set[str] = field(default_factory=set)

    def samples(
        self,
        run_id: str,
        wall_s: float,
        source_url: str,
        series: list[SeriesValue],
        role: str | None = None,
        worker: str | None = None,
    ) -> list[ServerSample]:
        """Rows of one scrape of `source_url`; `worker`: the worker scraped (else each series' own label)."""
        first_scrape = source_url not in self._first_seen
        self._first_seen.add(source_url)
        rows = []
        for s in series:
            value = s.value
            if s.kind in _CUMULATIVE_KINDS:
                key = (source_url, s.metric, s.labels_json)
                base = self._baselines.get(key)
                if base is None:
                    base = self._baselines[key] = _Baseline(s.value if first_scrape else 0.0, s.value)
                if s.value < base.last:  # the counter went back: the server restarted
                    base.start -= base.last
                base.last = s.value
                value = s.value - base.start
            row = ServerSample(
                run_id, wall_s, source_url, s.metric, s.kind, s.labels_json, value, role, worker or s.worker
            )
            rows.append(row)
        return rows
