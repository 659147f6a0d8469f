"""What the probes record while a replay runs: server metrics and GPU samples (tables server_samples,
gpu_samples; each column is defined once below, in SERVER_SAMPLE_COLUMNS and GPU_SAMPLE_COLUMNS).

Times are epoch seconds (`sample_wall_s`): probes run beside the replay, and the warehouse aligns them
with the run through runs.t0_wall_s.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from common.record_columns import Column, ColumnList
from common.run_folder import GPU_SAMPLES_FILE as GPU_SAMPLES_FILE  # re-exported: the owner is common/run_folder.py
from common.run_folder import SERVER_SAMPLES_FILE as SERVER_SAMPLES_FILE


@dataclass(frozen=True, slots=True)
class ServerSample:
    """One value of one /metrics series at one scrape; each field is defined in SERVER_SAMPLE_COLUMNS."""

    run_id: str
    sample_wall_s: float
    source_url: str
    metric: str
    kind: str
    labels_json: str
    value: float
    role: str | None = None
    worker: str | None = None


# Whether a source answered a scrape (Prometheus's `up`, but alive rather than healthy: any HTTP answer is 1, a
# refused, reset or timed-out scrape 0), one row per source and tick: how long each worker and the router answered
# inside the window (warehouse/marts/fleet_health.py), which no series of a source can say once it is gone.
ANSWERED_METRIC = "costbench:scrape_answered"
ANSWERED_KIND = "health"

# Gauges are summed over dp_rank (fractions such as token_usage: averaged); counters and histograms are
# deltas since the run's first scrape (endpoints/probes/metrics_scrape.py). Kind info rows are facts from the
# worker's /server_info, one row per run (endpoints/probes/probe_session.py).
SERVER_SAMPLE_COLUMNS = ColumnList(
    (
        Column("run_id", pa.string(), "", "the replay the sample belongs to (runs.run_id)", nullable=False),
        Column("sample_wall_s", pa.float64(), "s since the Unix epoch", "when /metrics was scraped", nullable=False),
        Column(
            "source_url",
            pa.string(),
            "",
            "whose /metrics was scraped: a worker, or a fleet's router at its metrics port",
            nullable=False,
        ),
        Column(
            "metric",
            pa.string(),
            "",
            "full Prometheus name, e.g. sglang:num_running_reqs; or server_info:max_running_requests (kind info), "
            "costbench:scrape_answered (kind health)",
            nullable=False,
        ),
        Column(
            "kind",
            pa.string(),
            "",
            "counter | gauge | histogram | info (the worker's cap on running requests from its /server_info, "
            "one row per run) | health (one row per source and scrape: 1 it answered with any HTTP status, 0 "
            "refused, reset or timed out)",
            nullable=False,
        ),
        Column("labels_json", pa.string(), "", "sorted JSON of the labels, dp_rank summed away", nullable=False),
        Column(
            "value",
            pa.float64(),
            "",
            "gauges: summed over dp_rank; counters and histograms: delta since the run's first scrape",
            nullable=False,
        ),
        Column(
            "role",
            pa.string(),
            "",
            "what was scraped: router (a fleet's smg router, smg_* series) | worker (one of a fleet's SGLang "
            "servers) | prefill | decode (one of a disaggregated fleet's, by its disaggregation_mode) | server "
            "(a single server)",
            note="null: written before fleets",
        ),
        Column(
            "worker",
            pa.string(),
            "",
            "the worker the row describes: the scraped worker's URL, or a router series' worker label",
            note="null: a router-wide series, or written before fleets",
        ),
    )
)
SERVER_SAMPLE_SCHEMA = SERVER_SAMPLE_COLUMNS.schema()


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU at one sampling instant; each field is defined in GPU_SAMPLE_COLUMNS."""

    run_id: str
    sample_wall_s: float
    host: str
    gpu_index: int | None
    source: str
    utilisation_pct: float | None
    memory_used_bytes: int | None
    memory_total_bytes: int | None
    power_w: float | None
    sm_clock_mhz: float | None
    sm_active_pct: float | None = None
    dram_active_pct: float | None = None
    note: str | None = None


GPU_SAMPLE_COLUMNS = ColumnList(
    (
        Column("run_id", pa.string(), "", "the replay the sample belongs to (runs.run_id)", nullable=False),
        Column("sample_wall_s", pa.float64(), "s since the Unix epoch", "when the GPU was sampled", nullable=False),
        Column("host", pa.string(), "", "host the GPU is in (a twin's: its server's host:port)", nullable=False),
        Column("gpu_index", pa.int32(), "", "GPU index on the host", note="null when no GPU could be read"),
        Column(
            "source",
            pa.string(),
            "",
            "nvml | dcgm | twin (modelled from the twin's own engine steps, not measured) | none",
            nullable=False,
        ),
        Column(
            "utilisation_pct",
            pa.float64(),
            "%",
            "GPU busy time share over the sample period",
            note="null when unmeasured, never 0",
        ),
        Column("memory_used_bytes", pa.int64(), "bytes", "device memory in use"),
        Column("memory_total_bytes", pa.int64(), "bytes", "device memory size"),
        Column("power_w", pa.float64(), "W", "power draw"),
        Column("sm_clock_mhz", pa.float64(), "MHz", "SM clock"),
        Column(
            "sm_active_pct",
            pa.float64(),
            "%",
            "DCGM_FI_PROF_SM_ACTIVE: share of SM cycles with a warp resident over the sample period",
            note="null when unmeasured or written before this column",
        ),
        Column(
            "dram_active_pct",
            pa.float64(),
            "%",
            "DCGM_FI_PROF_DRAM_ACTIVE: share of cycles the device memory interface moved data over the sample period",
            note="null when unmeasured or written before this column",
        ),
        Column("note", pa.string(), "", "why the values are null (written once per run when no source exists)"),
    )
)
GPU_SAMPLE_SCHEMA = GPU_SAMPLE_COLUMNS.schema()
