"""The twin's /metrics: SGLang's `sglang:*` names and `model_name` label, in a per-app registry.

Like SGLang's tokenizer manager, it watches what reaches the client: TTFT at a request's first
delivered chunk (for a non-streaming request that is its only one), inter-token latency per chunk
(the gap divided by the chunk's new tokens, recorded once per token), end-to-end latency and the
token counters when it finishes. Gauges read the engine when scraped. Histograms are counted here
with a bisect per chunk, because prometheus_client's per-observation locking is too slow to run
for every streamed token.
"""

from __future__ import annotations

from bisect import bisect_left

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from endpoints.sim.engine import SimEngine
from endpoints.sim.sim_request import SimRequest, TokenUpdate

# SGLang's default buckets (metrics_collector.py on main).
TTFT_BUCKETS_S = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
ITL_BUCKETS_S = (0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1,
                 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8)  # fmt: skip
E2E_BUCKETS_S = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400)
QUEUE_BUCKETS_S = (0.0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100, 200, 300, 400,
                   500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000)  # fmt: skip
HEALTH_CHECK_PREFIX = "HEALTH_CHECK_"  # SGLang's health probes do not log metrics

CONTENT_TYPE = CONTENT_TYPE_LATEST


class _Histogram:
    __slots__ = ("name", "doc", "bounds", "counts", "total")

    def __init__(self, name: str, doc: str, bounds: tuple[float, ...]) -> None:
        self.name, self.doc, self.bounds = name, doc, bounds
        self.counts = [0] * (len(bounds) + 1)  # the last slot is +Inf
        self.total = 0.0

    def observe(self, value: float, times: int = 1) -> None:
        self.counts[bisect_left(self.bounds, value)] += times
        self.total += value * times

    def family(self, labels: list[str], values: list[str]) -> HistogramMetricFamily:
        family = HistogramMetricFamily(self.name, self.doc, labels=labels)
        cumulative, buckets = 0, []
        for bound, n in zip((*map(str, self.bounds), "+Inf"), self.counts):
            cumulative += n
            buckets.append((bound, cumulative))
        family.add_metric(values, buckets, self.total)
        return family


class SimMetrics:
    """Collector and update observer in one; `SimEngine.observer` points here."""

    def __init__(self, engine: SimEngine, model_name: str) -> None:
        self._engine = engine
        self._labels, self._values = ["model_name"], [model_name]
        self.counters = dict.fromkeys(
            ("prompt_tokens", "generation_tokens", "cached_tokens", "num_requests", "num_aborted_requests"), 0
        )
        self._ttft = _Histogram(
            "sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS_S
        )
        self._itl = _Histogram(
            "sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", ITL_BUCKETS_S
        )
        self._e2e = _Histogram(
            "sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", E2E_BUCKETS_S
        )
        self._queue = _Histogram("sglang:queue_time_seconds", "Histogram of queueing time in seconds.", QUEUE_BUCKETS_S)
        self.spec_verify_calls = 0  # finished requests' spec_verify_ct, summed (speculative decoding only)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    # -- observing --------------------------------------------------------------------------------

    def observe(self, request: SimRequest, update: TokenUpdate, prev_tokens: int, prev_s: float | None) -> None:
        if request.rid.startswith(HEALTH_CHECK_PREFIX):
            return
        now_s = update.now_s
        if prev_s is None:
            self._ttft.observe(now_s - update.arrival_s)
            if update.admitted_s is not None:
                self._queue.observe(update.admitted_s - update.arrival_s)
        else:
            new_tokens = update.output_tokens - prev_tokens
            if new_tokens > 0:
                self._itl.observe((now_s - prev_s) / new_tokens, new_tokens)
        if update.finished:
            c = self.counters
            c["prompt_tokens"] += update.prompt_tokens
            c["generation_tokens"] += update.output_tokens
            c["cached_tokens"] += update.cached_tokens
            c["num_requests"] += 1
            if update.finish_reason is not None and update.finish_reason.get("type") == "abort":
                c["num_aborted_requests"] += 1
            if update.spec_meta_info:
                self.spec_verify_calls += update.spec_meta_info["spec_verify_ct"]
            self._e2e.observe(now_s - update.arrival_s)

    # -- exposition -------------------------------------------------------------------------------

    def collect(self):
        labels, values = self._labels, self._values
        engine, scheduler = self._engine, self._engine.scheduler
        retractions = scheduler.retractions
        counters = {
            **self.counters,
            "num_retracted_requests": retractions.requests,
            "num_retracted_input_tokens": retractions.input_tokens,
            "num_retracted_output_tokens": retractions.output_tokens,
        }
        spec = scheduler.speculative
        if spec is not None:
            counters["spec_verify_calls"] = self.spec_verify_calls
        for name, value in counters.items():
            family = CounterMetricFamily(f"sglang:{name}", f"Total {name.replace('_', ' ')}.", labels=labels)
            family.add_metric(values, value)
            yield family
        used = scheduler.pool.capacity_tokens - scheduler.pool.available_tokens(scheduler.cache.total_tokens)
        gauges = {
            "num_running_reqs": ("The number of running requests.", len(scheduler.running)),
            "num_queue_reqs": ("The number of requests in the waiting queue.", len(scheduler.waiting)),
            "num_used_tokens": ("The number of used KV slots.", used),
            "token_usage": ("The token usage.", scheduler.token_usage()),
            "gen_throughput": ("The generation throughput (token/s).", engine.gen_throughput_tok_s()),
            "num_retracted_reqs": ("Requests retracted over the last log interval.", engine.recent_retractions()),
            "new_token_ratio": ("The new token ratio of the admission estimate.", scheduler.new_token_ratio),
            "max_total_num_tokens": ("Maximum total tokens in the KV pool.", scheduler.pool.capacity_tokens),
        }
        if spec is not None:  # over the last decode log interval, as SGLang's scheduler sets them
            gauges["spec_accept_length"] = (
                "Mean acceptance length (accepted drafts + bonus).",
                spec.window_accept_length(),
            )
            gauges["spec_accept_rate"] = ("Accepted drafts / proposed drafts.", spec.window_accept_rate())
        for name, (doc, level) in gauges.items():
            gauge = GaugeMetricFamily(f"sglang:{name}", doc, labels=labels)
            gauge.add_metric(values, level)
            yield gauge
        for histogram in (self._ttft, self._itl, self._e2e, self._queue):
            yield histogram.family(labels, values)

    def render(self) -> bytes:
        return generate_latest(self.registry)
