"""The twin's /metrics: SGLang's `sglang:*` names, types and label names, in a per-app registry.

Labels as SGLang 0.5.23 sets them on a unified server (`make conformance` checks them against its
collectors): the tokenizer manager's metrics carry `model_name` and `engine_type` (plus `is_streaming` on
the per-request counters, TTFT and end-to-end latency, `cache_source` on cached tokens); the scheduler's,
rank 0's `model_name`, `engine_type`, `tp_rank`, `pp_rank` and `moe_ep_rank`. A split series appears once
a request of its kind finished, as a prometheus child does. DP attention's per-rank series (`dp_rank`) are
one series here, the ranks' figures summed (their pools' slots and usage together), as the probe sums over `dp_rank`.

Like SGLang's tokenizer manager, it watches what reaches the client: TTFT at a request's first
delivered chunk (for a non-streaming request that is its only one), inter-token latency per chunk
(the gap divided by the chunk's new tokens, recorded once per token), end-to-end latency and the
token counters when it finishes. Gauges read the engine when scraped. Histograms are counted here
with a bisect per chunk, because prometheus_client's per-observation locking is too slow to run
for every streamed token. The exposition is generate_latest's: the library writes each layout (which series
exist) once, and a render of a layout seen before puts its values into that text (the probes and the router
scrape every server every few virtual seconds).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from prometheus_client import generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from endpoints.sim.engine.disaggregation import DisaggregationMode, RoomDone
from endpoints.sim.engine.engine import SimEngine
from endpoints.sim.engine.sim_request import HEALTH_CHECK_PREFIX, SimRequest, TokenUpdate

# SGLang's default buckets (metrics_collector.py, 0.5.23; `make conformance` compares them).
TTFT_BUCKETS_S = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
ITL_BUCKETS_S = (0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1,
                 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8)  # fmt: skip
E2E_BUCKETS_S = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400)
QUEUE_BUCKETS_S = (0.0, 0.001, 0.005, 0.01, 0.05, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70,
                   80, 90, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500,
                   3000)  # fmt: skip

CONTENT_TYPE = CONTENT_TYPE_LATEST


# The engine_type label: "unified" for a server that is not PD-disaggregated, else its role (DisaggregationMode).
TOKENIZER_LABELS = ["model_name", "engine_type"]  # tokenizer_metric_labels()
SCHEDULER_LABELS = ["model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank"]  # rank 0's, init_new
STREAM_MODES = ("true", "false")  # the is_streaming label's values
CACHE_SOURCE = "device"  # the one cache the twin has: the radix cache in GPU memory
# SGLang's KV-transfer histogram buckets (metrics_collector.py, 0.5.23).
KV_TRANSFER_LATENCY_BUCKETS_MS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000)
KV_TRANSFER_SPEED_BUCKETS_GB_S = (0.1, 0.5, 1, 5, 10, 25, 50, 100, 200, 400)
KV_TRANSFER_SIZE_BUCKETS_MB = (1, 5, 10, 50, 100, 500, 1000, 5000, 10000)


class _Histogram:
    __slots__ = ("bounds", "counts", "les", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.les = (*map(str, bounds), "+Inf")  # the le label's values
        self.counts = [0] * (len(bounds) + 1)  # the last slot is +Inf
        self.total = 0.0

    def observe(self, value: float, times: int = 1) -> None:
        self.counts[bisect_left(self.bounds, value)] += times
        self.total += value * times

    def cumulative(self) -> list[int]:
        cumulative, out = 0, []
        for n in self.counts:
            cumulative += n
            out.append(cumulative)
        return out

    def add_to(self, family: HistogramMetricFamily, values: Sequence[str]) -> None:
        family.add_metric(values, list(zip(self.les, self.cumulative())), self.total)

    def sample_values(self) -> list[float]:
        """In HistogramMetricFamily's sample order: the buckets, _count (the +Inf bucket), _sum."""
        buckets = self.cumulative()
        return [*buckets, buckets[-1], self.total]


@dataclass(frozen=True, slots=True)
class _Family:
    """One metric family as collected, before prometheus_client's objects are built from it."""

    kind: str  # counter | gauge | histogram
    name: str
    doc: str
    labels: Sequence[str]
    series: Sequence[tuple[Sequence[str], float | _Histogram]]  # label values, and the level or the histogram

    def library(self) -> Metric:
        if self.kind == "histogram":
            histograms = HistogramMetricFamily(self.name, self.doc, labels=self.labels)
            for values, histogram in self.series:
                assert isinstance(histogram, _Histogram)
                histogram.add_to(histograms, values)
            return histograms
        family_type = CounterMetricFamily if self.kind == "counter" else GaugeMetricFamily
        family = family_type(self.name, self.doc, labels=self.labels)
        for values, level in self.series:
            assert not isinstance(level, _Histogram)
            family.add_metric(values, level)
        return family

    def layout(self) -> tuple:
        """What fixes the family's text but for its values: label values (name, doc and labels go with the name)."""
        return (self.name, *(tuple(values) for values, _ in self.series))

    def add_values(self, out: list[float]) -> None:
        """Its samples' values, in the order prometheus_client renders them."""
        for _, level in self.series:
            if isinstance(level, _Histogram):
                out.extend(level.sample_values())
            else:
                out.append(level)


class _Collected(Collector):
    """Families already built, for one render."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


def exposition_chunks(text: str, values: list[float]) -> list[str] | None:
    """prometheus_client's exposition `text` cut around each sample's value: the text between them, which stays the
    same while the families' names, label values and sample count do. None unless `values` are the samples' values in
    order, as the library wrote them."""
    chunks, current, i = [], [], 0
    for line in text.split("\n")[:-1]:  # escaped by the library: no line break inside a line
        if line.startswith("#"):
            current.append(line + "\n")
            continue
        head, _, token = line.rpartition(" ")
        if i >= len(values) or token != floatToGoString(values[i]):
            return None
        current.append(head + " ")
        chunks.append("".join(current))
        current, i = ["\n"], i + 1
    if i != len(values):
        return None
    chunks.append("".join(current))
    return chunks


def fill_chunks(chunks: list[str], values: list[float]) -> bytes:
    """The exposition the chunks were cut from, with these values, formatted as prometheus_client does."""
    parts = [chunks[0]] * (2 * len(values) + 1)
    parts[1::2] = map(floatToGoString, values)
    parts[2::2] = chunks[1:]
    return "".join(parts).encode("utf-8")


class SimMetrics:
    """The engine's update observer and its /metrics render in one; `SimEngine.observer` points here."""

    def __init__(self, engine: SimEngine, model_name: str) -> None:
        self._engine = engine
        engine_type = engine.mode.engine_type
        self._tokenizer_values = [model_name, engine_type]
        self._scheduler_values = [model_name, engine_type, "0", "0", "0"]
        # Finished requests' counts, by is_streaming (SGLang's observe_one_finished_request).
        self.per_mode: dict[str, dict[str, int]] = {}
        self.cached_tokens = 0
        self.aborted_requests = 0
        self._ttft: dict[str, _Histogram] = {}
        self._e2e: dict[str, _Histogram] = {}
        self._itl = _Histogram(ITL_BUCKETS_S)
        self._queue = _Histogram(QUEUE_BUCKETS_S)
        self.spec_verify_calls = 0  # finished requests' spec_verify_ct, summed (speculative decoding only)
        self.structured_requests = 0  # finished requests that carried a constraint (num_so_requests_total)
        # A prefill server's KV transfers (SGLang observes them where the transfer completes).
        self._transfer_ms = _Histogram(KV_TRANSFER_LATENCY_BUCKETS_MS)
        self._transfer_gb_s = _Histogram(KV_TRANSFER_SPEED_BUCKETS_GB_S)
        self._transfer_mb = _Histogram(KV_TRANSFER_SIZE_BUCKETS_MB)
        engine.transfer_observer = self.observe_transfer
        # render's texts by layout: a few per server (which is_streaming and optional series have appeared).
        self._layouts: dict[tuple, list[str]] = {}

    # -- observing --------------------------------------------------------------------------------

    def observe(self, request: SimRequest, update: TokenUpdate, prev_tokens: int, prev_s: float | None) -> None:
        if request.rid.startswith(HEALTH_CHECK_PREFIX):
            return
        now_s = update.now_s
        mode = STREAM_MODES[0] if request.stream else STREAM_MODES[1]
        if prev_s is None:
            self._ttft.setdefault(mode, _Histogram(TTFT_BUCKETS_S)).observe(now_s - update.arrival_s)
            if update.admitted_s is not None:
                self._queue.observe(update.admitted_s - update.arrival_s)
        else:
            new_tokens = update.output_tokens - prev_tokens
            if new_tokens > 0:
                self._itl.observe((now_s - prev_s) / new_tokens, new_tokens)
        if update.finished:
            c = self.per_mode.setdefault(mode, dict.fromkeys(("prompt_tokens", "generation_tokens", "num_requests"), 0))
            c["prompt_tokens"] += update.prompt_tokens
            c["generation_tokens"] += update.output_tokens
            c["num_requests"] += 1
            self.cached_tokens += update.cached_tokens
            if update.finish_reason is not None and update.finish_reason.get("type") == "abort":
                self.aborted_requests += 1
            if update.spec_meta_info:
                self.spec_verify_calls += update.spec_meta_info["spec_verify_ct"]
            if request.grammar_key is not None:  # a constraint was sent (SGLang's _request_has_grammar)
                self.structured_requests += 1
            self._e2e.setdefault(mode, _Histogram(E2E_BUCKETS_S)).observe(now_s - update.arrival_s)

    def observe_transfer(self, done: RoomDone) -> None:
        self._transfer_ms.observe(done.transfer_s * 1000.0)
        self._transfer_gb_s.observe(done.kv_bytes / done.transfer_s / 1e9 if done.transfer_s > 0 else 0.0)
        self._transfer_mb.observe(done.kv_bytes / 1e6)

    # -- exposition -------------------------------------------------------------------------------

    def _families(self) -> list[_Family]:
        tok, sched = self._tokenizer_values, self._scheduler_values
        engine, scheduler = self._engine, self._engine.scheduler
        out = []
        for name in ("prompt_tokens", "generation_tokens", "num_requests"):
            doc = f"Total {name.replace('_', ' ')}."
            series = [([*tok, mode], counts[name]) for mode, counts in self.per_mode.items()]
            out.append(_Family("counter", f"sglang:{name}", doc, [*TOKENIZER_LABELS, "is_streaming"], series))
        cached: list[tuple[list[str], float | _Histogram]] = []
        if self.cached_tokens > 0:
            cached.append(([*tok, CACHE_SOURCE], self.cached_tokens))
        cached_labels = [*TOKENIZER_LABELS, "cache_source"]
        out.append(_Family("counter", "sglang:cached_tokens", "Number of cached prompt tokens.", cached_labels, cached))
        tokenizer_counters = {"num_aborted_requests": self.aborted_requests}
        if self.structured_requests:  # a child appears once the first one finished, as in SGLang
            tokenizer_counters["num_so_requests"] = self.structured_requests
        spec = scheduler.speculative
        if spec is not None:
            tokenizer_counters["spec_verify_calls"] = self.spec_verify_calls
        retractions = scheduler.retractions
        scheduler_counters = {
            "num_retracted_requests": retractions.requests,
            "num_retracted_input_tokens": retractions.input_tokens,
            "num_retracted_output_tokens": retractions.output_tokens,
        }
        for counters, labels, values in (
            (tokenizer_counters, TOKENIZER_LABELS, tok),
            (scheduler_counters, SCHEDULER_LABELS, sched),
        ):
            for name, value in counters.items():
                doc = f"Total {name.replace('_', ' ')}."
                out.append(_Family("counter", f"sglang:{name}", doc, labels, [(values, value)]))
        passes = scheduler.graph_passes  # a mode's series appears once a step of it ran, as SGLang's child does
        pass_series: list[tuple[list[str], float | _Histogram]] = [
            ([*sched, mode], count)
            for mode, count in (("decode_cuda_graph", passes.graph), ("decode_none", passes.eager))
            if count
        ]
        pass_doc = "Total number of forward passes categorized by CUDA graph."
        out.append(_Family("counter", "sglang:cuda_graph_passes", pass_doc, [*SCHEDULER_LABELS, "mode"], pass_series))
        used = scheduler.used_tokens()
        gauges = {
            "num_running_reqs": ("The number of running requests.", len(scheduler.running)),
            "num_queue_reqs": ("The number of requests in the waiting queue.", scheduler.queued),
            "num_used_tokens": ("The number of used KV slots.", used),
            "token_usage": ("The token usage.", scheduler.token_usage()),
            "gen_throughput": ("The generation throughput (token/s).", engine.gen_throughput_tok_s()),
            "num_retracted_reqs": ("Requests retracted over the last log interval.", engine.recent_retractions()),
            "new_token_ratio": ("The new token ratio of the admission estimate.", scheduler.new_token_ratio),
            "max_total_num_tokens": ("Maximum total tokens in the KV pool.", scheduler.capacity_tokens),
            "num_grammar_queue_reqs": (
                "The number of requests in the grammar waiting queue.",
                engine.compiling_requests(),
            ),
        }
        if engine.mode is DisaggregationMode.PREFILL:
            gauges["num_prefill_bootstrap_queue_reqs"] = (
                "The number of requests in the prefill bootstrap queue.",
                engine.bootstrapping,
            )
            gauges["num_prefill_inflight_queue_reqs"] = (
                "The number of requests in the prefill inflight queue.",
                engine.inflight,
            )
        elif engine.mode is DisaggregationMode.DECODE:
            gauges["num_decode_prealloc_queue_reqs"] = (
                "The number of requests in the decode prealloc queue.",
                len(engine.prealloc),
            )
            gauges["num_decode_transfer_queue_reqs"] = (
                "The number of requests in the decode transfer queue.",
                len(scheduler.transferring),
            )
        for name, (doc, level) in gauges.items():
            out.append(_Family("gauge", f"sglang:{name}", doc, SCHEDULER_LABELS, [(sched, level)]))
        # Over the last decode log interval, as SGLang's scheduler sets them; without speculative decoding SGLang
        # still exports both, at its stats' default 0.
        for name, doc, level in (
            (
                "spec_accept_length",
                "Mean acceptance length (accepted drafts + bonus).",
                0.0 if spec is None else spec.window_accept_length(),
            ),
            (
                "spec_accept_rate",
                "Accepted drafts / proposed drafts.",
                0.0 if spec is None else spec.window_accept_rate(),
            ),
        ):
            out.append(_Family("gauge", f"sglang:{name}", doc, SCHEDULER_LABELS, [(sched, level)]))
        for name, doc, by_mode in (
            ("time_to_first_token_seconds", "Histogram of time to first token in seconds.", self._ttft),
            ("e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", self._e2e),
        ):
            by_stream = [([*tok, mode], histogram) for mode, histogram in by_mode.items()]
            out.append(_Family("histogram", f"sglang:{name}", doc, [*TOKENIZER_LABELS, "is_streaming"], by_stream))
        out.append(
            _Family(
                "histogram",
                "sglang:inter_token_latency_seconds",
                "Histogram of inter-token latency in seconds.",
                TOKENIZER_LABELS,
                [(tok, self._itl)],
            )
        )
        queue_doc = "Histogram of queueing time in seconds."
        out.append(
            _Family("histogram", "sglang:queue_time_seconds", queue_doc, SCHEDULER_LABELS, [(sched, self._queue)])
        )
        if engine.mode is DisaggregationMode.PREFILL:
            for name, doc, histogram in (
                ("kv_transfer_latency_ms", "Histogram of KV cache transfer latency in ms.", self._transfer_ms),
                ("kv_transfer_speed_gb_s", "Histogram of KV cache transfer speed in GB/s.", self._transfer_gb_s),
                ("kv_transfer_total_mb", "Histogram of KV cache transfer size in MB.", self._transfer_mb),
            ):
                out.append(_Family("histogram", f"sglang:{name}", doc, SCHEDULER_LABELS, [(sched, histogram)]))
        return out

    def render(self) -> bytes:
        """generate_latest's bytes for the families. The library writes a layout's text once (its HELP and TYPE lines,
        escaped label strings); later renders of the same layout put only the values in."""
        families = self._families()
        key = tuple(family.layout() for family in families)
        values: list[float] = []
        for family in families:
            family.add_values(values)
        chunks = self._layouts.get(key)
        if chunks is not None:
            return fill_chunks(chunks, values)
        text = generate_latest(_Collected([family.library() for family in families]))
        chunks = exposition_chunks(text.decode("utf-8"), values)
        if chunks is not None:  # else the library's text every time: nothing of it is reused unchecked
            self._layouts[key] = chunks
        return text
