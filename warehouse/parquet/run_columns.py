"""The columns of the lake table `runs`, defined once: what the replay recorded (RunInfo, reused from
replay/recording/records.py under the same definition) plus the endpoint, server facts, price and scenario targets.

RUNS_SCHEMA (warehouse/marts/run_rows.py) is derived from this list; the `runs` view and its comments in
warehouse/schema.sql, and Dagster's column schema, are checked against it (tests/test_column_definitions.py).
Columns of schema version 2 are nullable: older lake files lack them and the views read them as null.
"""

from __future__ import annotations

import pyarrow as pa

from common.record_columns import Column, ColumnList
from replay.recording.records import RUN_INFO_COLUMNS

_RUN = RUN_INFO_COLUMNS
_NONE = "null = none"
_SHADOW_NOTE = "null: a twin endpoint, one the twin cannot model, or recorded before shadow canaries"
_FLEET_HEALTH_NOTE = "null: the probes recorded no answers (not probed, or recorded before fleet health)"

RUNS_COLUMNS = ColumnList(
    (
        _RUN["run_id"],
        Column("scenario", pa.string(), "", "scenario name from workloads/scenarios.yaml", nullable=False),
        Column("week_start", pa.date32(), "", "Monday (DATE) that starts the partition's week", nullable=False),
        Column("endpoint", pa.string(), "", "endpoint name from workloads/endpoints.yaml", nullable=False),
        Column("mode", pa.string(), "", "how the endpoint was provisioned: sim | launch | attach", nullable=False),
        Column(
            "backend",
            pa.string(),
            "",
            "'sim' for the SGLang twin (a model, not a measurement), else 'sglang'",
            nullable=False,
        ),
        Column("model", pa.string(), "", "served model path, e.g. deepseek-ai/DeepSeek-V3", nullable=False),
        Column("gpu_type", pa.string(), "", "GPU model the price refers to, e.g. H200", nullable=False),
        Column("gpu_count", pa.int32(), "count", "GPUs the endpoint occupies", nullable=False),
        Column(
            "usd_per_gpu_hour",
            pa.float64(),
            "USD",
            "price of one GPU for one hour, from the endpoint spec",
            nullable=False,
        ),
        Column("api_key_env", pa.string(), "", "name of the environment variable holding the API key (never the key)"),
        Column(
            "sglang_version",
            pa.string(),
            "",
            '"version" from the server\'s /server_info',
            note="null when not reported",
        ),
        Column(
            "server_args_json",
            pa.string(),
            "",
            "JSON list of the sglang.launch_server flags, secret values redacted",
            nullable=False,
        ),
        Column(
            "server_info_json",
            pa.string(),
            "",
            "JSON of /server_info saved for the run, secret values redacted",
            nullable=False,
        ),
        Column("url", pa.string(), "", "base URL the client sent to (credentials removed)"),
        _RUN["workload_name"],
        _RUN["workload_hash"],
        _RUN["trace_path"],
        _RUN["trace_format"],
        _RUN["start_s"].as_("window_start_s"),
        _RUN["duration_s"].as_("window_duration_s"),
        _RUN["speedup"],
        _RUN["t0_wall_s"],
        _RUN["finished_wall_s"],
        _RUN["window_s"],
        _RUN["requests_total"],
        _RUN["requests_recorded"],
        _RUN["requests_ok"],
        _RUN["schedule_lag_p50_ms"],
        _RUN["schedule_lag_p99_ms"],
        _RUN["schedule_lag_max_ms"],
        _RUN["client_degraded"],
        _RUN["partial"],
        # Schema version 2 from here on (older lake files lack these; the views read them as null).
        _RUN["max_concurrency"],
        _RUN["warmup_s"].as_(nullable=True, note="0 in files before v2"),
        _RUN["shard_index"].as_(nullable=True),
        _RUN["shard_count"].as_(nullable=True),
        _RUN["arrival_process"].as_(nullable=True),
        _RUN["config_fingerprint"],
        Column("config_facts_json", pa.string(), "", "JSON of the facts the fingerprint hashes"),
        Column(
            "max_running_requests",
            pa.int32(),
            "count",
            "cap on running requests one worker enforces: sum of /server_info "
            "internal_states[].effective_max_running_requests_per_dp, else the configured flag",
            note="null when unknown",
        ),
        Column("slo_ttft_ms", pa.float64(), "ms", "scenario SLO on time to first token from the schedule", note=_NONE),
        Column("slo_tpot_ms", pa.float64(), "ms", "scenario SLO on time per output token after the first", note=_NONE),
        Column("target_rps", pa.float64(), "requests/s", "load the fleet must carry, for fleet sizing", note=_NONE),
        Column(
            "budget_usd_per_request",
            pa.float64(),
            "USD",
            "what the scenario may spend per request",
            note="null = compare with the API price",
        ),
        Column(
            "prefix_reuse_share",
            pa.float64(),
            "ratio 0-1",
            "share of input tokens an infinite prefix cache could reuse in this workload",
        ),
        Column(
            "min_valid_rate",
            pa.float64(),
            "ratio 0-1",
            "valid-answer rate a constrained scenario's week must reach (its structured_output.min_valid_rate)",
            note=_NONE,
        ),
        Column(
            "role",
            pa.string(),
            "",
            "the scenario's role: live (the week's traffic, carries the cost trend) | canary (the same reference "
            "window every week, where the regression rule judges the runtime)",
            note="null: not recorded",
        ),
        Column(
            "traffic_share",
            pa.float64(),
            "ratio 0-1",
            "share of the trace's sessions replayed: one replica's share of the fleet's traffic",
            note="null: not recorded",
        ),
        Column(
            "price_book",
            pa.string(),
            "",
            "price book of warehouse/prices.yaml that usd_per_gpu_hour came from; 'endpoint' when the endpoint "
            "set usd_per_gpu_hour itself",
            note="null: recorded before price books",
        ),
        Column(
            "capacity_rps_at_slo",
            pa.float64(),
            "requests/s",
            "highest request rate the endpoint sustains inside the scenario's SLO on this run's workload, as "
            "capacity_source says: a load sweep in virtual time on the twin "
            "(endpoints/capacity/slo_capacity.py), "
            "a rate ramp of the real endpoint (replay/capacity_ramp.py) or the shadow twin's sweep scaled by the "
            "measured/twin throughput (endpoints/capacity/shadow_capacity.py)",
            note="null: not measured, or not sustained at any rate swept",
        ),
        Column(
            "capacity_source",
            pa.string(),
            "",
            "how capacity_rps_at_slo was found: twin_sweep (a twin endpoint's own sweep) | rate_ramp (a real "
            "endpoint's opt-in rate ramp, measured: replay/capacity_ramp.py) | shadow_twin (a real endpoint's shadow "
            "twin's sweep x real / twin output tokens/s, modelled: endpoints/capacity/shadow_capacity.py)",
            note="null: no sweep ran",
        ),
        Column(
            "capacity_ramp_gpu_minutes",
            pa.float64(),
            "GPU-minutes",
            "what the rate ramp held the real endpoint for: gpu_count x the ramp's wall seconds / 60, on the run "
            "after whose replay it ran; the week's other runs share its capacity",
            note="null: no ramp ran after this run",
        ),
        Column(
            "fleet_plan_json",
            pa.string(),
            "",
            "the fleet plan for the scenario's target_rps on this run's window (endpoints/capacity/"
            "fleet_plan.py's fleet_plans.json, compact): every shape tried, one replay at the target rate "
            "each; the view fleet_plan_shapes unnests it",
            note="null: no plan: no target_rps or SLO, not a twin, or recorded before plans",
        ),
        Column(
            "running_requests_at_slo",
            pa.float64(),
            "requests",
            "one replica's time-weighted mean running batch at the capacity sweep's capacity probe (the fastest "
            "rate sustained inside the SLO), from the same sweep as capacity_rps_at_slo: the batch the endpoint "
            "runs when it carries its capacity",
            note="null: no sweep, nothing sustained, or recorded before occupancy at SLO",
        ),
        Column(
            "single_replica_hit_rate",
            pa.float64(),
            "ratio 0-1",
            "cached / prompt tokens one replica of the fleet realises on the twin on this window's first 300 requests "
            "at the run's replay rate (endpoints/capacity/routing_reference.py): what the fleet's traffic "
            "would realise on one cache of one replica's size",
            note="null: not a twin fleet, or recorded before routing references",
        ),
        Column(
            "fleet_model_hit_rate",
            pa.float64(),
            "ratio 0-1",
            "cached / prompt tokens the same requests realise on the twin through the fleet's replicas and its "
            "router's policy model: single_replica_hit_rate minus this is what routing loses",
            note="null: not a twin fleet, or recorded before routing references",
        ),
        Column(
            "replay_clock",
            pa.string(),
            "",
            "the clock the replay's timings are on: wall (real time) | virtual (a twin served in the replay step on "
            "a virtual clock shared with the client: the modelled GPUs' time, without either's CPU time)",
            note="null: recorded before clocks",
        ),
        # The fleet, from the endpoint spec the run was provisioned from (server_facts.json's `router` is
        # written from the same spec). Routing decides which replica's cache a request meets.
        Column(
            "replicas",
            pa.int32(),
            "count",
            "SGLang workers serving the endpoint: a fleet's replicas behind its router, attach's worker_urls, else 1",
            note="null: recorded before fleets",
        ),
        Column(
            "router_policy",
            pa.string(),
            "",
            "the fleet's router (smg) --policy: cache_aware | round_robin | prefix_hash | power_of_two | ...",
            note="null: no router block (one server, or attach without one), or recorded before fleets",
        ),
        Column(
            "router_args_json",
            pa.string(),
            "",
            "JSON list of the router's other smg launch flags, as endpoints.yaml gives them",
            note="null: no router block, or recorded before fleets",
        ),
        # The shadow canary of a run on a real endpoint (endpoints/capacity/shadow_canary.py): the twin's
        # measured error on the week's own traffic and server.
        Column(
            "shadow_output_tokens_per_s_ratio",
            pa.float64(),
            "ratio",
            "twin / real sustained output tokens/s: the run's window replayed on the twin with the endpoint's flags "
            "on a virtual clock (the shadow canary, endpoints/capacity/shadow_canary.py)",
            note=_SHADOW_NOTE,
        ),
        Column(
            "shadow_p50_ttft_ratio",
            pa.float64(),
            "ratio",
            "twin / real median TTFT, the same shadow canary",
            note=_SHADOW_NOTE,
        ),
        Column(
            "shadow_p50_tpot_ratio",
            pa.float64(),
            "ratio",
            "twin / real median TPOT, the same shadow canary",
            note=_SHADOW_NOTE,
        ),
        # Which workers served and for how long (warehouse/marts/fleet_health.py): the probes' answered scrapes of
        # each worker and the router, and the requests smg named each worker for.
        Column(
            "workers_json",
            pa.string(),
            "",
            "JSON list, one object per worker (and the router) of the run: worker (its URL), role, answered_s and "
            "unanswered_s (inside the measured window, how long its scrapes were answered or not), lost_from_s "
            "(where in the window it stopped answering 3 scrapes running; null: never), completed_requests, "
            "failed_requests, first_served_s and last_served_s (finishes of its first and last completed "
            "requests); times are s from the window's start",
            note="null: no worker known (not probed, and no request named one), or recorded before fleet health",
        ),
        Column(
            "degraded",
            pa.bool_(),
            "",
            "a worker or the router stopped answering for part of the measured window (3 scrapes running): the "
            "run was priced for the whole fleet, and served with less of it",
            note=_FLEET_HEALTH_NOTE,
        ),
        Column(
            "degraded_reason",
            pa.string(),
            "",
            "each lost worker or router: its role and URL, when in the window it stopped answering, for how long, "
            "and the requests it completed before",
            note="null unless degraded",
        ),
        # Schema version 5: the revision the run ran, and the hours its GPUs are held a week (the week's spend).
        Column(
            "revision_note",
            pa.string(),
            "",
            "the note of the endpoints.yaml revision whose server_args the run ran (why they were changed), "
            "secret-shaped text redacted",
            note="null: no revision in force, one without a note, or recorded before version 5",
        ),
        Column(
            "hours_per_week",
            pa.float64(),
            "hours",
            "hours a week the endpoint's GPUs are held, the basis of the week's spend (endpoints.yaml hours_per_week, "
            "default 168: around the clock)",
            note="168 in files before v5",
        ),
    )
)

# RunContext's fields (warehouse/marts/run_rows.py): what the scenario and workload say about the run, and its fleet's
# health (warehouse/marts/fleet_health.py).
RUN_CONTEXT_COLUMNS = ColumnList(
    tuple(
        RUNS_COLUMNS[name]
        for name in (
            "slo_ttft_ms",
            "slo_tpot_ms",
            "target_rps",
            "budget_usd_per_request",
            "prefix_reuse_share",
            "min_valid_rate",
            "role",
            "traffic_share",
            "capacity_rps_at_slo",
            "capacity_source",
            "capacity_ramp_gpu_minutes",
            "fleet_plan_json",
            "running_requests_at_slo",
            "single_replica_hit_rate",
            "fleet_model_hit_rate",
            "shadow_output_tokens_per_s_ratio",
            "shadow_p50_ttft_ratio",
            "shadow_p50_tpot_ratio",
            "workers_json",
            "degraded",
            "degraded_reason",
        )
    )
)
