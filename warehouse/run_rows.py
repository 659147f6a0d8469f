"""The `runs` lake table: one row per replay, with the endpoint, server facts, window and price.

Secrets never reach the lake: the endpoint's API key is named by its environment variable only, and
values of secret-looking flags and server_info fields (a server launched with `--api-key` echoes it)
are replaced by a marker before anything is stored.
"""

from __future__ import annotations

import json
import re
from datetime import date
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pyarrow as pa

from endpoints.spec import EndpointMode, EndpointSpec
from replay.records import RunInfo
from warehouse.lake import validate_scenario_name, validate_week_start

REDACTED = "<redacted>"
# Whole name segments only: `hf_token` and `--api-key` are secrets, `max_prefill_tokens` is not.
_SECRET_NAME = re.compile(
    r"(^|[-_])(api[-_]?key|key|token|secret|password|passwd|credentials?)($|[-_])", re.IGNORECASE
)

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
    ]
)


def run_backend(run_info: RunInfo, endpoint: EndpointSpec) -> str:
    """'sim' for rows the SGLang twin produced (a model, not a measurement), else 'sglang'."""
    if str(run_info.server_info.get("backend", "")).lower() == "sim" or endpoint.mode is EndpointMode.SIM:
        return "sim"
    return "sglang"


def redact_server_args(args: tuple[str, ...] | list[str]) -> list[str]:
    """The flags as given, with the value after a secret-looking flag (or inside `--flag=value`) hidden."""
    out: list[str] = []
    hide_next = False
    for arg in args:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
        elif arg.startswith("--") and _SECRET_NAME.search(arg.split("=", 1)[0].lstrip("-")):
            if "=" in arg:
                out.append(arg.split("=", 1)[0] + "=" + REDACTED)
            else:
                out.append(arg)
                hide_next = True
        else:
            out.append(arg)
    return out


def redact_mapping(value):
    """A deep copy of a JSON-like value with every secret-looking key's value hidden (null stays null)."""
    if isinstance(value, dict):
        return {
            k: (REDACTED if _SECRET_NAME.search(str(k)) and v is not None else redact_mapping(v))
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact_mapping(v) for v in value]
    return value


def redact_url(url: str | None) -> str | None:
    """The URL without user:password and with secret-looking query values hidden."""
    if url is None:
        return None
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    query = urlencode(
        [(k, REDACTED if _SECRET_NAME.search(k) else v) for k, v in parse_qsl(parts.query, keep_blank_values=True)]
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def build_run_row(run_info: RunInfo, endpoint: EndpointSpec, scenario: str, week_start: date) -> pa.Table:
    """One `runs` row (RUNS_SCHEMA) for the replay `run_info` of `scenario` in the week starting `week_start`."""
    validate_scenario_name(scenario)
    validate_week_start(week_start)
    version = run_info.server_info.get("version")
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
        "server_args_json": json.dumps(redact_server_args(endpoint.server_args)),
        # default=str: server_info is the server's JSON, but keep a stray non-JSON value from failing the run
        "server_info_json": json.dumps(redact_mapping(run_info.server_info), sort_keys=True, default=str),
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
    }
    return pa.Table.from_pylist([row], schema=RUNS_SCHEMA)
