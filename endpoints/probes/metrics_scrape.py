"""One SGLang /metrics scrape turned into ServerSample rows: `sglang:*` series with their labels,
summed over `dp_rank` (each DP-attention rank reports its own series), counters and histograms as
deltas from the first scrape of the run.

A fleet's router (smg) serves its own metrics, named `smg_*`, on a port of their own; of those the probes
keep the families that say where requests went and how the workers stood (ROUTER_FAMILIES), not the
router's allocator, tokio and tokenizer internals. Rows carry their role (router, worker, or server for a
single server) and the worker they describe: the scraped worker, or a router series' `worker` label.

Parsing is prometheus-client's (`text_string_to_metric_families`), so every exposition quirk
(escaping, `_total`/`_created` suffixes, exemplars) is handled by the reference implementation.

A scrape is bounded (`ScrapeBounds`; docs/endpoints.md, "Bounds on what an endpoint sends"): in total time
and bytes as it is read (probe_session.py), then in lines parsed and series kept. An exposition past a
bound is refused whole (ExpositionTooLargeError), one failed scrape: no part of it becomes rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

import orjson
from prometheus_client.parser import text_string_to_metric_families

from endpoints.probes.probe_records import ServerSample
from redaction.secret_redaction import REDACTED, is_secret_name, redact_text

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
# One scrape's bounds; SGLang's own /metrics, its histograms and every DP rank's gauges included, is far below them.
METRICS_MAX_BYTES = 4 * 1024 * 1024  # read of one exposition; the rest is never read
METRICS_MAX_LINES = 50_000  # parsed (comments included): the parser takes 10-20 µs a line
METRICS_MAX_SERIES = 10_000  # kept after combining over dp_rank: the rows one scrape writes
METRICS_LIMIT_MIN_S = 0.5  # a scrape's total time is its interval, within these
METRICS_LIMIT_MAX_S = 5.0


@dataclass(frozen=True, slots=True)
class ScrapeBounds:
    max_bytes: int = METRICS_MAX_BYTES
    max_lines: int = METRICS_MAX_LINES
    max_series: int = METRICS_MAX_SERIES

    @staticmethod
    def limit_s(interval_s: float) -> float:
        """Connecting, the headers and the whole body of one scrape: at most the scrape interval."""
        return max(METRICS_LIMIT_MIN_S, min(METRICS_LIMIT_MAX_S, interval_s))


class ExpositionTooLargeError(ValueError):
    pass


LABEL_MAX_CHARS = 1024  # a label (name or value) longer than this is replaced whole: bounded redaction work


@lru_cache(maxsize=8192)  # a scrape repeats the same few labels every interval
def stored_label(text: str) -> str:
    """A label name or value as the row keeps it: every secret in it by shape (redaction/secret_shapes.py) or
    after a secret name (`url="…?sig=…"`) redacted; a label past LABEL_MAX_CHARS replaced whole."""
    return REDACTED if len(text) > LABEL_MAX_CHARS else redact_text(text)


@lru_cache(maxsize=8192)  # a scrape repeats the same label sets every interval
def _stored_labels(items: tuple[tuple[str, str], ...]) -> tuple[str, str | None]:
    """A series' labels as stored (sorted JSON, dp_rank removed), and its `worker` label."""
    # Labels are stored: redacted by their name and their values' shape (no SGLang build sends a secret).
    labels = {stored_label(k): REDACTED if is_secret_name(k) else stored_label(v)
              for k, v in items if k != SUMMED_LABEL}  # fmt: skip
    return orjson.dumps(labels, option=orjson.OPT_SORT_KEYS).decode(), labels.get(WORKER_LABEL)


@dataclass(frozen=True, slots=True)
class SeriesValue:
    metric: str  # full sample name, e.g. sglang:prompt_tokens_total
    kind: str  # counter | gauge | histogram
    labels_json: str  # sorted JSON, dp_rank removed
    value: float  # raw (cumulative for counters), already combined over dp_rank
    worker: str | None = None  # the series' `worker` label (a router's per-worker series)


def parse_sglang_metrics(text: str, bounds: ScrapeBounds | None = None) -> list[SeriesValue]:
    """The sglang:* series of one exposition, combined over dp_rank. Raises ValueError on bad text,
    ExpositionTooLargeError past `bounds`."""
    return _parse(text, lambda name: name.startswith(SGLANG_PREFIX), MEAN_GAUGES, bounds or ScrapeBounds())


def parse_router_metrics(text: str, bounds: ScrapeBounds | None = None) -> list[SeriesValue]:
    """The ROUTER_FAMILIES series of smg's exposition, combined over dp_rank. Raises ValueError on bad text,
    ExpositionTooLargeError past `bounds`."""
    return _parse(text, ROUTER_FAMILIES.__contains__, ROUTER_MEAN_GAUGES, bounds or ScrapeBounds())


def _parse(
    text: str, keep: Callable[[str], bool], mean_gauges: frozenset[str], bounds: ScrapeBounds
) -> list[SeriesValue]:
    sums: dict[tuple[str, str, str], list[float]] = {}
    workers: dict[tuple[str, str, str], str | None] = {}
    if text.count("\n") > bounds.max_lines:
        raise ExpositionTooLargeError(f"more than {bounds.max_lines} lines")
    for family in text_string_to_metric_families(text):
        if not keep(family.name):
            continue
        kind = family.type if family.type in ("counter", "gauge", "histogram") else "gauge"
        for sample in family.samples:
            if sample.name.endswith(_SKIPPED_SUFFIXES):
                continue
            labels_json, worker = _stored_labels(tuple(sample.labels.items()))
            key = (sample.name, kind, labels_json)
            sums.setdefault(key, []).append(float(sample.value))
            workers[key] = worker
    if len(sums) > bounds.max_series:
        raise ExpositionTooLargeError(f"more than {bounds.max_series} series")
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
