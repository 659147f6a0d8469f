"""The twin's /metrics: SGLang's `sglang:*` names and `model_name` label, in a per-app registry.

Counters and histograms move once per finished request (like SGLang's tokenizer manager); gauges
read the engine when scraped, so the hot path pays nothing for them.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from endpoints.sim.engine import SimEngine
from endpoints.sim.sim_request import TokenUpdate

# SGLang's default buckets (metrics_collector.py on main).
TTFT_BUCKETS_S = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
E2E_BUCKETS_S = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400)

CONTENT_TYPE = CONTENT_TYPE_LATEST


class SimMetrics:
    def __init__(self, engine: SimEngine, model_name: str) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        labels = {"model_name": model_name}
        names = ["model_name"]

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, names, registry=self.registry).labels(**labels)

        self._prompt = counter("sglang:prompt_tokens", "Number of prefill tokens processed.")
        self._generation = counter("sglang:generation_tokens", "Number of generation tokens processed.")
        self._cached = counter("sglang:cached_tokens", "Number of cached prompt tokens.")
        self._requests = counter("sglang:num_requests", "Number of requests processed.")
        self._ttft = Histogram(
            "sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
            names, buckets=TTFT_BUCKETS_S, registry=self.registry,
        ).labels(**labels)  # fmt: skip
        self._e2e = Histogram(
            "sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds",
            names, buckets=E2E_BUCKETS_S, registry=self.registry,
        ).labels(**labels)  # fmt: skip

        scheduler = engine.scheduler
        gauges = {
            "sglang:num_running_reqs": ("The number of running requests.", lambda: len(scheduler.running)),
            "sglang:num_queue_reqs": ("The number of requests in the waiting queue.", lambda: len(scheduler.waiting)),
            "sglang:token_usage": ("The token usage.", scheduler.token_usage),
            "sglang:gen_throughput": ("The generation throughput (token/s).", engine.gen_throughput_tok_s),
            "sglang:max_total_num_tokens": ("Maximum total tokens in the KV pool.", lambda: scheduler.pool.capacity_tokens),
        }  # fmt: skip
        for name, (doc, read) in gauges.items():
            Gauge(name, doc, names, registry=self.registry).labels(**labels).set_function(read)

    def observe_finished(self, update: TokenUpdate) -> None:
        self._prompt.inc(update.prompt_tokens)
        self._generation.inc(update.output_tokens)
        self._cached.inc(update.cached_tokens)
        self._requests.inc()
        if update.first_token_s is not None:
            self._ttft.observe(update.first_token_s - update.arrival_s)
        self._e2e.observe(update.now_s - update.arrival_s)

    def render(self) -> bytes:
        return generate_latest(self.registry)
