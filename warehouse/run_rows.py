"""The `runs` lake table: one row per replay, with the endpoint, server facts, window and price.

Secrets never reach the lake: the endpoint's API key is named by its environment variable only, and
values of secret-looking flags and server_info fields (a server launched with `--api-key` echoes it)
are replaced by a marker before anything is stored (the rule: replay/secret_redaction.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date

import pyarrow as pa

from endpoints.fingerprint import config_fingerprint
from endpoints.running_cap import max_running_requests
from endpoints.spec import EndpointMode, EndpointSpec
from replay.records import RunInfo
from replay.secret_redaction import REDACTED, redact_args, redact_secrets, redact_url
from warehouse.lake import validate_scenario_name, validate_week_start
from workloads.scenarios import Scenario

__all__ = ["REDACTED", "RUNS_SCHEMA", "RunContext", "build_run_row", "max_running_requests", "run_backend"]

RUNS_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("scenario", pa.string(), nullable=False),
        pa.field("week_start", pa.date32(), nullable=False),
        pa.field("endpoint", pa.string(), nullable=False),
        pa.field("mode", pa.string(), nullable=False),
        pa.field("backend", pa.string(), nullable=False),
        pa.field("model", pa.string(), nullable=False),
        pa.field("gpu_type", pa.string(), nullable=False),
        pa.field("gpu_count", pa.int32(), nullable=False),
        pa.field("usd_per_gpu_hour", pa.float64(), nullable=False),
        pa.field("api_key_env", pa.string()),
        pa.field("sglang_version", pa.string()),
        pa.field("server_args_json", pa.string(), nullable=False),
        pa.field("server_info_json", pa.string(), nullable=False),
        pa.field("url", pa.string()),
        pa.field("workload_name", pa.string(), nullable=False),
        pa.field("workload_hash", pa.string(), nullable=False),
        pa.field("trace_path", pa.string(), nullable=False),
        pa.field("trace_format", pa.string(), nullable=False),
        pa.field("window_start_s", pa.float64(), nullable=False),
        pa.field("window_duration_s", pa.float64()),
        pa.field("speedup", pa.float64(), nullable=False),
        pa.field("t0_wall_s", pa.float64(), nullable=False),
        pa.field("finished_wall_s", pa.float64()),
        pa.field("window_s", pa.float64()),
        pa.field("requests_total", pa.int64(), nullable=False),
        pa.field("requests_recorded", pa.int64(), nullable=False),
        pa.field("requests_ok", pa.int64(), nullable=False),
        pa.field("schedule_lag_p50_ms", pa.float64()),
        pa.field("schedule_lag_p99_ms", pa.float64()),
        pa.field("schedule_lag_max_ms", pa.float64()),
        pa.field("client_degraded", pa.bool_(), nullable=False),
        pa.field("partial", pa.bool_(), nullable=False),
        # Schema version 2 (older lake files lack these; the views read them as null).
        pa.field("max_concurrency", pa.int32()),
        pa.field("warmup_s", pa.float64()),
        pa.field("shard_index", pa.int32()),
        pa.field("shard_count", pa.int32()),
        pa.field("arrival_process", pa.string()),
        pa.field("config_fingerprint", pa.string()),
        pa.field("config_facts_json", pa.string()),
        pa.field("max_running_requests", pa.int32()),
        pa.field("slo_ttft_ms", pa.float64()),
        pa.field("slo_tpot_ms", pa.float64()),
        pa.field("target_rps", pa.float64()),
        pa.field("budget_usd_per_request", pa.float64()),
        pa.field("prefix_reuse_share", pa.float64()),
    ]
)


@dataclass(frozen=True, slots=True)
class RunContext:
    """What the scenario and workload say about a run, beyond what the replay recorded (all optional)."""

    slo_ttft_ms: float | None = None  # scenario SLO: time to first token, from the schedule
    slo_tpot_ms: float | None = None  # scenario SLO: time per output token after the first
    target_rps: float | None = None  # load the fleet must carry (requests/s), for fleet sizing
    budget_usd_per_request: float | None = None  # cost the scenario may spend per request (diagnoses)
    prefix_reuse_share: float | None = None  # workloads.trace_stats.prefix_reuse_share of the replayed window

    @staticmethod
    def of_scenario(scenario: Scenario, prefix_reuse_share: float | None = None) -> "RunContext":
        """What a scenario says about its runs: its SLO, the load its fleet must carry and its budget."""
        return RunContext(
            slo_ttft_ms=scenario.slo_ttft_ms,
            slo_tpot_ms=scenario.slo_tpot_ms,
            target_rps=scenario.target_rps,
            budget_usd_per_request=scenario.budget_usd_per_request,
            prefix_reuse_share=prefix_reuse_share,
        )


def run_backend(run_info: RunInfo, endpoint: EndpointSpec) -> str:
    """'sim' for rows the SGLang twin produced (a model, not a measurement), else 'sglang'."""
    if str(run_info.server_info.get("backend", "")).lower() == "sim" or endpoint.mode is EndpointMode.SIM:
        return "sim"
    return "sglang"


def build_run_row(
    run_info: RunInfo, endpoint: EndpointSpec, scenario: str, week_start: date, context: RunContext = RunContext()
) -> pa.Table:
    """One `runs` row (RUNS_SCHEMA) for the replay `run_info` of `scenario` in the week starting `week_start`."""
    validate_scenario_name(scenario)
    validate_week_start(week_start)
    version = run_info.server_info.get("version")
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
        "usd_per_gpu_hour": endpoint.usd_per_gpu_hour,
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
    }
    return pa.Table.from_pylist([row], schema=RUNS_SCHEMA)
