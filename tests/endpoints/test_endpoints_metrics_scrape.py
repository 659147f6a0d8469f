"""/metrics scrapes: sglang series kept with labels, summed over dp_rank, counters as run deltas."""

from __future__ import annotations

import json

from endpoints.probes.metrics_scrape import DeltaTracker, parse_sglang_metrics


def _page(prompt_r0: float, prompt_r1: float, running_r0: int, running_r1: int) -> str:
    return f"""# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{{model_name="ds",dp_rank="0"}} {prompt_r0}
sglang:prompt_tokens_total{{model_name="ds",dp_rank="1"}} {prompt_r1}
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{{model_name="ds",dp_rank="0"}} {running_r0}
sglang:num_running_reqs{{model_name="ds",dp_rank="1"}} {running_r1}
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{{model_name="ds",dp_rank="0"}} 0.5
sglang:token_usage{{model_name="ds",dp_rank="1"}} 0.25
# HELP sglang:e2e_request_latency_seconds Histogram of end-to-end latency.
# TYPE sglang:e2e_request_latency_seconds histogram
sglang:e2e_request_latency_seconds_bucket{{le="1.0",model_name="ds"}} {prompt_r0 / 100}
sglang:e2e_request_latency_seconds_bucket{{le="+Inf",model_name="ds"}} {prompt_r0 / 50}
sglang:e2e_request_latency_seconds_sum{{model_name="ds"}} 3.5
sglang:e2e_request_latency_seconds_count{{model_name="ds"}} {prompt_r0 / 50}
# HELP process_cpu_seconds_total CPU time.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 12.0
"""


def _by_metric(series):
    return {(s.metric, s.labels_json): s for s in series}


def test_series_are_summed_over_dp_rank_and_keep_their_other_labels():
    series = _by_metric(parse_sglang_metrics(_page(1000, 500, 3, 4)))
    labels = json.dumps({"model_name": "ds"}, separators=(",", ":"))
    assert series[("sglang:prompt_tokens_total", labels)].value == 1500
    assert series[("sglang:prompt_tokens_total", labels)].kind == "counter"
    assert series[("sglang:num_running_reqs", labels)].value == 7
    assert series[("sglang:token_usage", labels)].value == 0.375  # a fraction: averaged, not summed
    bucket_labels = json.dumps({"le": "+Inf", "model_name": "ds"}, separators=(",", ":"))
    assert series[("sglang:e2e_request_latency_seconds_bucket", bucket_labels)].kind == "histogram"
    assert not any(metric.startswith("process_") for metric, _ in series)


def test_counters_are_deltas_from_the_first_scrape_and_gauges_are_raw():
    tracker = DeltaTracker()
    first = tracker.samples("r", 100.0, "http://w0", parse_sglang_metrics(_page(1000, 500, 3, 4)))
    later = tracker.samples("r", 101.0, "http://w0", parse_sglang_metrics(_page(1200, 900, 1, 0)))
    values = {(s.metric, s.labels_json): s.value for s in later}
    assert all(s.value == 0 for s in first if s.kind != "gauge")
    assert values[("sglang:prompt_tokens_total", '{"model_name":"ds"}')] == 600
    assert values[("sglang:num_running_reqs", '{"model_name":"ds"}')] == 1
    assert values[("sglang:e2e_request_latency_seconds_count", '{"model_name":"ds"}')] == 24 - 20
    assert {s.sample_wall_s for s in later} == {101.0} and {s.run_id for s in later} == {"r"}


def test_each_worker_has_its_own_baseline_and_a_restart_keeps_the_delta_growing():
    tracker = DeltaTracker()
    tracker.samples("r", 1.0, "http://w0", parse_sglang_metrics(_page(1000, 0, 0, 0)))
    w1 = tracker.samples("r", 1.0, "http://w1", parse_sglang_metrics(_page(50, 0, 0, 0)))
    tracker.samples("r", 2.0, "http://w0", parse_sglang_metrics(_page(1100, 0, 0, 0)))
    restarted = tracker.samples("r", 3.0, "http://w0", parse_sglang_metrics(_page(30, 0, 0, 0)))
    prompt = {s.metric: s.value for s in restarted}["sglang:prompt_tokens_total"]
    assert prompt == 100 + 30  # 100 before the restart, 30 since
    assert {s.metric: s.value for s in w1}["sglang:prompt_tokens_total"] == 0


def test_a_series_born_during_the_run_counts_from_zero():
    tracker = DeltaTracker()
    tracker.samples("r", 1.0, "http://w0", [])
    born = tracker.samples("r", 2.0, "http://w0", parse_sglang_metrics(_page(40, 2, 0, 0)))
    assert {s.metric: s.value for s in born}["sglang:prompt_tokens_total"] == 42
