"""Builders for the warehouse tests: real RunInfo, EndpointSpec and RequestRecord values, written to a real lake."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pyarrow as pa

from endpoints.probes.probe_records import GPU_SAMPLE_SCHEMA, SERVER_SAMPLE_SCHEMA, GpuSample, ServerSample
from endpoints.spec import EndpointMode, EndpointSpec
from replay.recording.records import REQUEST_RECORD_SCHEMA, RequestRecord, RequestStatus, RunInfo
from warehouse.marts.run_rows import RunContext, build_run_row
from warehouse.parquet.lake import write_partition

T0_WALL_S = 1_741_000_000.0


def endpoint(name: str = "v3-8xh200", gpu_count: int = 8, usd_per_gpu_hour: float = 2.0, **extra) -> EndpointSpec:
    fields = dict(
        name=name,
        mode=EndpointMode.SIM,
        model="deepseek-ai/DeepSeek-V3",
        server_args=("--tp", "8"),
        gpu_type="H200",
        gpu_count=gpu_count,
        usd_per_gpu_hour=usd_per_gpu_hour,
    )
    fields.update(extra)
    return EndpointSpec(**fields)


def run_info(run_id: str, window_s: float | None, **extra) -> RunInfo:
    fields = dict(
        run_id=run_id,
        workload_name="mooncake-conversation",
        workload_hash="sha256:abc",
        trace_path="workloads/traces/mooncake_conversation.jsonl",
        trace_format="mooncake",
        start_s=211.0,
        duration_s=12.0,
        speedup=2.0,
        url="http://127.0.0.1:30000",
        backend="sglang",
        t0_wall_s=T0_WALL_S,
        finished_wall_s=1_741_000_090.0,
        window_s=window_s,
        requests_total=6,
        requests_recorded=6,
        requests_ok=5,
        schedule_lag_p50_ms=0.4,
        schedule_lag_p99_ms=2.5,
        schedule_lag_max_ms=3.0,
        client_degraded=False,
        partial=False,
        server_info={"version": "0.5.4", "backend": "sim", "tp_size": 8},
    )
    fields.update(extra)
    return RunInfo(**fields)


def request(
    run_id: str,
    request_id: str,
    ttft_ms: float | None,
    e2e_ms: float | None,
    status: RequestStatus = RequestStatus.OK,
    prompt_tokens: int | None = 1000,
    cached_tokens: int | None = 0,
    completion_tokens: int | None = 100,
    is_warmup: bool = False,
    sent_mono_s: float = 1.0,
    chunks_ms: tuple[float, ...] | None = None,
    reasoning_tokens: int | None = None,
    ttfa_ms: float | None = None,
    lag_ms: float = 10.0,
    response_format_type: str | None = None,
    constrained: bool | None = None,
    answer_valid: bool | None = None,
    answer_error: str | None = None,
    worker: str | None = None,
) -> RequestRecord:
    """A request sent at `sent_mono_s` (scheduled `lag_ms` earlier) with the given latencies from send.

    chunks_ms: arrival of every token-carrying chunk, ms after the send (default: one chunk at the TTFT);
    ttfa_ms: first answer token after the send (default: the TTFT). response_format_type .. answer_error:
    the structured-output columns as the replay records them (None: a free-form request). worker: the fleet's
    worker the router named (None: a single server).
    """
    first = None if ttft_ms is None else sent_mono_s + ttft_ms / 1000
    finish = None if e2e_ms is None else sent_mono_s + e2e_ms / 1000
    if chunks_ms is None:
        chunks = () if first is None else (first,)
    else:
        chunks = tuple(sent_mono_s + c / 1000 for c in chunks_ms)
    answer = first if ttfa_ms is None else sent_mono_s + ttfa_ms / 1000
    return RequestRecord(
        run_id=run_id,
        request_id=request_id,
        session_id=None,
        turn=None,
        input_tokens=1000,
        output_tokens=100,
        scheduled_mono_s=sent_mono_s - lag_ms / 1000,
        sent_mono_s=sent_mono_s,
        first_token_mono_s=first,
        first_answer_mono_s=answer,
        finish_mono_s=finish,
        chunk_mono_s=chunks,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cached_tokens=cached_tokens,
        reasoning_tokens=reasoning_tokens,
        finish_reason="length" if status is RequestStatus.OK else None,
        http_status=200 if status is RequestStatus.OK else 500,
        status=status,
        error_kind=None if status is RequestStatus.OK else "http",
        error_message=None if status is RequestStatus.OK else "boom",
        is_warmup=is_warmup,
        response_format_type=response_format_type,
        constrained=constrained,
        answer_valid=answer_valid,
        answer_error=answer_error,
        worker=worker,
    )


def failed_request(run_id: str, request_id: str, e2e_ms: float = 50, **extra) -> RequestRecord:
    """A request that failed before its first token: no TTFT, no usage."""
    return request(
        run_id,
        request_id,
        None,
        e2e_ms,
        status=RequestStatus.ERROR,
        prompt_tokens=None,
        cached_tokens=None,
        completion_tokens=None,
        **extra,
    )


def requests_table(records: list[RequestRecord]) -> pa.Table:
    return pa.Table.from_pylist([r.to_row() for r in records], schema=REQUEST_RECORD_SCHEMA)


def write_run(
    lake_root: Path,
    week_start: date,
    scenario: str,
    info: RunInfo,
    spec: EndpointSpec,
    records: list[RequestRecord] | None,
    context: RunContext = RunContext(),
    server_samples: list[ServerSample] | None = None,
    gpu_samples: list[GpuSample] | None = None,
) -> None:
    """The lake tables of one replay, the way the lake assets write them (None: that table is not written)."""
    write_partition(lake_root, "runs", week_start, scenario, build_run_row(info, spec, scenario, week_start, context))
    if records is not None:
        write_partition(lake_root, "requests", week_start, scenario, requests_table(records))
    if server_samples is not None:
        table = pa.Table.from_pylist([_row(s) for s in server_samples], schema=SERVER_SAMPLE_SCHEMA)
        write_partition(lake_root, "server_samples", week_start, scenario, table)
    if gpu_samples is not None:
        table = pa.Table.from_pylist([_row(s) for s in gpu_samples], schema=GPU_SAMPLE_SCHEMA)
        write_partition(lake_root, "gpu_samples", week_start, scenario, table)


def capacity_context(efficiency_cost_usd: float, gpus: int = 8, usd_per_gpu_hour: float = 200.0) -> RunContext:
    """A run whose capacity at the SLO makes its efficiency cost per request `efficiency_cost_usd` on `gpus` GPUs at
    `usd_per_gpu_hour` (the builders' default endpoint: 8 GPUs; the tests price them at $200/h)."""
    return RunContext(
        capacity_rps_at_slo=gpus * usd_per_gpu_hour / 3600.0 / efficiency_cost_usd, capacity_source="twin_sweep"
    )


def write_runs(
    lake_root: Path,
    week_start: date,
    scenario: str,
    runs: list[tuple[RunInfo, list[RequestRecord]]],
    spec: EndpointSpec,
    context: RunContext | list[RunContext] = RunContext(),
    server_samples: list[ServerSample] | None = None,
) -> None:
    """A week of several replays (a scenario's repeats) in one partition, the way the lake assets write them; one
    context for all, or each run's own (its own capacity sweep); server_samples: every run's, in one partition."""
    contexts = context if isinstance(context, list) else [context] * len(runs)
    rows = [build_run_row(info, spec, scenario, week_start, c) for (info, _), c in zip(runs, contexts, strict=True)]
    write_partition(lake_root, "runs", week_start, scenario, pa.concat_tables(rows))
    records = [record for _, of_run in runs for record in of_run]
    write_partition(lake_root, "requests", week_start, scenario, requests_table(records))
    if server_samples is not None:
        table = pa.Table.from_pylist([_row(s) for s in server_samples], schema=SERVER_SAMPLE_SCHEMA)
        write_partition(lake_root, "server_samples", week_start, scenario, table)


def _row(sample) -> dict:
    return {name: getattr(sample, name) for name in sample.__slots__}


def server_sample(
    run_id: str, at_s: float, metric: str, value: float, source: str = "http://127.0.0.1:30000"
) -> ServerSample:
    """A /metrics sample `at_s` seconds after the run's t0 (kind from the name: *_total is a counter)."""
    kind = "counter" if metric.endswith("_total") else "gauge"
    return ServerSample(run_id, T0_WALL_S + at_s, source, metric, kind, '{"model_name":"m"}', value)


def gpu_sample(run_id: str, at_s: float, utilisation_pct: float | None, gpu_index: int = 0) -> GpuSample:
    source = "none" if utilisation_pct is None else "nvml"
    return GpuSample(run_id, T0_WALL_S + at_s, "host-1", gpu_index, source, utilisation_pct, None, None, None, None)
