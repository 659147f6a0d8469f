"""What the probes record while a replay runs: server metrics and GPU samples (tables server_samples,
gpu_samples; every column is documented in warehouse/schema.sql).

Times are epoch seconds (`sample_wall_s`): probes run beside the replay, and the warehouse aligns them
with the run through runs.t0_wall_s.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa


@dataclass(frozen=True, slots=True)
class ServerSample:
    run_id: str
    sample_wall_s: float
    source_url: str  # the worker whose /metrics was scraped
    metric: str  # full Prometheus name, e.g. "sglang:num_running_reqs" or "sglang:e2e_request_latency_seconds_bucket"
    kind: str  # counter | gauge | histogram (buckets, _sum and _count are rows of kind histogram) | info
    # (info: a fact from the worker's /server_info, one row per run; endpoints/probe_session.py)
    labels_json: str  # sorted JSON of the labels, dp_rank summed away
    value: float  # gauges: summed over dp_rank (fractions such as token_usage: averaged); counters and
    # histograms: delta since the run's first scrape (endpoints/metrics_scrape.py)


SERVER_SAMPLE_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("sample_wall_s", pa.float64(), nullable=False),
        pa.field("source_url", pa.string(), nullable=False),
        pa.field("metric", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("labels_json", pa.string(), nullable=False),
        pa.field("value", pa.float64(), nullable=False),
    ]
)


@dataclass(frozen=True, slots=True)
class GpuSample:
    run_id: str
    sample_wall_s: float
    host: str
    gpu_index: int | None
    source: str  # nvml | dcgm | none
    utilisation_pct: float | None  # null when unmeasured, never 0
    memory_used_bytes: int | None
    memory_total_bytes: int | None
    power_w: float | None
    sm_clock_mhz: float | None
    note: str | None = None  # why the values are null (written once per run when no source exists)


GPU_SAMPLE_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("sample_wall_s", pa.float64(), nullable=False),
        pa.field("host", pa.string(), nullable=False),
        pa.field("gpu_index", pa.int32()),
        pa.field("source", pa.string(), nullable=False),
        pa.field("utilisation_pct", pa.float64()),
        pa.field("memory_used_bytes", pa.int64()),
        pa.field("memory_total_bytes", pa.int64()),
        pa.field("power_w", pa.float64()),
        pa.field("sm_clock_mhz", pa.float64()),
        pa.field("note", pa.string()),
    ]
)

SERVER_SAMPLES_FILE = "server_samples.parquet"
GPU_SAMPLES_FILE = "gpu_samples.parquet"
