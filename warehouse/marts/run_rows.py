"""The `runs` lake table: one row per replay, with the endpoint, server facts, window and price.

Secrets never reach the lake: the endpoint's API key is named by its environment variable only, and
values of secret-looking flags and server_info fields (a server launched with `--api-key` echoes it)
are replaced by a marker before anything is stored (the rule: redaction/secret_redaction.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date

import pyarrow as pa

from endpoints.fingerprint import config_fingerprint
from endpoints.running_cap import max_running_requests
from endpoints.spec import EndpointMode, EndpointSpec
from redaction.secret_redaction import REDACTED, redact_args, redact_secrets, redact_text, redact_url
from replay.recording.records import RunInfo
from warehouse.marts.price_table import resolve_gpu_price
from warehouse.parquet.lake import validate_scenario_name, validate_week_start
from warehouse.parquet.run_columns import RUNS_COLUMNS
from workloads.scenarios import Scenario

__all__ = ["REDACTED", "RUNS_SCHEMA", "RunContext", "build_run_row", "max_running_requests", "run_backend"]

RUNS_SCHEMA = RUNS_COLUMNS.schema()  # every column is defined once, in warehouse/parquet/run_columns.py


@dataclass(frozen=True, slots=True)
class RunContext:
    """What the scenario and workload say about a run, beyond what the replay recorded, and what its probes and
    records say of its fleet (all optional; each field is the `runs` column of the same name, defined in
    warehouse/parquet/run_columns.py)."""

    slo_ttft_ms: float | None = None
    slo_tpot_ms: float | None = None
    target_rps: float | None = None
    budget_usd_per_request: float | None = None
    prefix_reuse_share: float | None = None  # workloads.trace_stats.prefix_reuse_share of the replayed window
    min_valid_rate: float | None = None  # the scenario's structured_output.min_valid_rate
    role: str | None = None  # the scenario's role: live | canary
    traffic_share: float | None = None  # the scenario's session share of the trace
    capacity_rps_at_slo: float | None = None  # endpoints/capacity/slo_capacity.py's sweep of the run (capacity.json)
    capacity_source: str | None = None  # twin_sweep | rate_ramp | shadow_twin (capacity.json's source)
    capacity_ramp_gpu_minutes: float | None = None  # capacity.json of a rate ramp: the GPU time it cost
    fleet_plan_json: str | None = None  # fleet_plan.py's plan for the scenario's target_rps (fleet_plans.json)
    running_requests_at_slo: float | None = None  # the sweep's running batch at its capacity probe (capacity.json)
    single_replica_hit_rate: float | None = None  # routing_reference.py: one replica on the window's first requests
    fleet_model_hit_rate: float | None = None  # routing_reference.py: the fleet's router model, the same requests
    shadow_output_tokens_per_s_ratio: float | None = None  # shadow_canary.json: the twin / real, a real endpoint's run
    shadow_p50_ttft_ratio: float | None = None
    shadow_p50_tpot_ratio: float | None = None
    workers_json: str | None = None  # fleet_health.py: each worker's answered time and requests (FleetHealth)
    degraded: bool | None = None  # a worker or the router was lost inside the window
    degraded_reason: str | None = None

    @staticmethod
    def of_scenario(scenario: Scenario, prefix_reuse_share: float | None = None) -> "RunContext":
        """What a scenario says about its runs: its SLO, the load its fleet must carry and its budget."""
        return RunContext(
            slo_ttft_ms=scenario.slo_ttft_ms,
            slo_tpot_ms=scenario.slo_tpot_ms,
            target_rps=scenario.target_rps,
            budget_usd_per_request=scenario.budget_usd_per_request,
            prefix_reuse_share=prefix_reuse_share,
            min_valid_rate=None if scenario.structured_output is None else scenario.structured_output.min_valid_rate,
            role=scenario.role,
            traffic_share=scenario.traffic_share,
        )


def run_backend(run_info: RunInfo, endpoint: EndpointSpec) -> str:
    """'sim' for rows the SGLang twin produced (a model, not a measurement), else 'sglang'."""
    if str(run_info.server_info.get("backend", "")).lower() == "sim" or endpoint.mode is EndpointMode.SIM:
        return "sim"
    return "sglang"


def _fleet_columns(endpoint: EndpointSpec) -> dict[str, object]:
    """replicas, router_policy and router_args_json of the endpoint (run_columns.py defines them)."""
    fleet = endpoint.fleet
    if fleet is None:
        # attach with worker_urls but no router block: the workers are known, the policy is not
        return {"replicas": max(1, len(endpoint.worker_urls)), "router_policy": None, "router_args_json": None}
    return {
        "replicas": fleet.replicas,
        "router_policy": fleet.router.policy,
        "router_args_json": json.dumps(redact_args(fleet.router.args)),
    }


def build_run_row(
    run_info: RunInfo, endpoint: EndpointSpec, scenario: str, week_start: date, context: RunContext = RunContext()
) -> pa.Table:
    """One `runs` row (RUNS_SCHEMA) for the replay `run_info` of `scenario` in the week starting `week_start`."""
    validate_scenario_name(scenario)
    validate_week_start(week_start)
    version = run_info.server_info.get("version")
    usd_per_gpu_hour, price_book = resolve_gpu_price(endpoint)
    fingerprint = config_fingerprint(run_info.server_info, endpoint.model)
    row = {
        "run_id": run_info.run_id,
        "scenario": scenario,
        "week_start": week_start,
        "endpoint": endpoint.name,
        "mode": endpoint.mode.value,
        "backend": run_backend(run_info, endpoint),
        "model": endpoint.model,
        "gpu_type": endpoint.gpu_type,
        "gpu_count": endpoint.gpu_count,
        "usd_per_gpu_hour": usd_per_gpu_hour,
        "api_key_env": endpoint.api_key_env,
        "sglang_version": None if version is None else str(version),
        "server_args_json": json.dumps(redact_args(endpoint.server_args)),
        # default=str: server_info is the server's JSON, but keep a stray non-JSON value from failing the run
        "server_info_json": json.dumps(redact_secrets(run_info.server_info), sort_keys=True, default=str),
        "url": redact_url(run_info.url),
        "workload_name": run_info.workload_name,
        "workload_hash": run_info.workload_hash,
        "trace_path": run_info.trace_path,
        "trace_format": run_info.trace_format,
        "window_start_s": run_info.start_s,
        "window_duration_s": run_info.duration_s,
        "speedup": run_info.speedup,
        "t0_wall_s": run_info.t0_wall_s,
        "finished_wall_s": run_info.finished_wall_s,
        "window_s": run_info.window_s,
        "requests_total": run_info.requests_total,
        "requests_recorded": run_info.requests_recorded,
        "requests_ok": run_info.requests_ok,
        "schedule_lag_p50_ms": run_info.schedule_lag_p50_ms,
        "schedule_lag_p99_ms": run_info.schedule_lag_p99_ms,
        "schedule_lag_max_ms": run_info.schedule_lag_max_ms,
        "client_degraded": run_info.client_degraded,
        "partial": run_info.partial,
        "max_concurrency": run_info.max_concurrency,
        "warmup_s": run_info.warmup_s,
        "shard_index": run_info.shard_index,
        "shard_count": run_info.shard_count,
        "arrival_process": run_info.arrival_process,
        # The replay's own digest when it computed one; the same function otherwise.
        "config_fingerprint": run_info.config_fingerprint or fingerprint.digest,
        "config_facts_json": json.dumps(redact_secrets(fingerprint.facts), sort_keys=True, default=str),
        "max_running_requests": max_running_requests(run_info.server_info),
        "slo_ttft_ms": context.slo_ttft_ms,
        "slo_tpot_ms": context.slo_tpot_ms,
        "target_rps": context.target_rps,
        "budget_usd_per_request": context.budget_usd_per_request,
        "prefix_reuse_share": context.prefix_reuse_share,
        "min_valid_rate": context.min_valid_rate,
        "role": context.role,
        "traffic_share": context.traffic_share,
        "price_book": price_book,
        "capacity_rps_at_slo": context.capacity_rps_at_slo,
        "capacity_source": context.capacity_source,
        "capacity_ramp_gpu_minutes": context.capacity_ramp_gpu_minutes,
        "fleet_plan_json": context.fleet_plan_json,
        "running_requests_at_slo": context.running_requests_at_slo,
        "single_replica_hit_rate": context.single_replica_hit_rate,
        "fleet_model_hit_rate": context.fleet_model_hit_rate,
        "replay_clock": endpoint.clock.value,
        **_fleet_columns(endpoint),
        "shadow_output_tokens_per_s_ratio": context.shadow_output_tokens_per_s_ratio,
        "shadow_p50_ttft_ratio": context.shadow_p50_ttft_ratio,
        "shadow_p50_tpot_ratio": context.shadow_p50_tpot_ratio,
        "workers_json": context.workers_json,
        "degraded": context.degraded,
        "degraded_reason": context.degraded_reason,
        # Free text someone typed in endpoints.yaml: scrubbed like every other text the lake keeps.
        "revision_note": redact_text(endpoint.revision.note) if endpoint.revision and endpoint.revision.note else None,
        "hours_per_week": endpoint.hours_per_week,
    }
    if list(row) != RUNS_COLUMNS.names:  # from_pylist would fill a forgotten column with null
        raise AssertionError(f"runs row columns {list(row)} != RUNS_COLUMNS {RUNS_COLUMNS.names}")
    return pa.Table.from_pylist([row], schema=RUNS_SCHEMA)
