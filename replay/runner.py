"""One replay run: select and prepare the requests, replay them open-loop, record everything.

    run_replay(workload, config, out_dir) -> RunInfo      # sync; runs its own event loop
    await run_replay_async(workload, config, out_dir)     # inside a running loop

Writes out_dir/requests.parts/ (records, one part file per flushed batch, merged into
out_dir/requests.parquet when the process ends the run) and out_dir/run.json (RunInfo, partial until
the run ends). Before t0 it reads /server_info (and, for OpenAI backends without a model name,
/v1/models): the only non-replay HTTP calls.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import replace
from pathlib import Path

import aiohttp

from common.exchange import Exchange
from replay.clients.client_protocol import SendOptions
from replay.clients.client_registry import Backend, client_for
from replay.clients.server_info_fetch import fetch_model_id, fetch_server_info
from replay.clock import Clock, MonotonicClock
from replay.prepared_request import PreparedRequest
from replay.recording.part_sink import PartFileSink
from replay.recording.progress_counters import ReplayProgress
from replay.recording.records import RequestRecord, RunInfo
from replay.recording.run_json import write_run_json
from replay.recording.schedule_lag import RunTally, ScheduleLag
from replay.replay_config import ArrivalProcess, ReplayConfig, ReplayInputError, new_run_id
from replay.schedule.open_loop import run_open_loop
from replay.schedule.rendezvous import Rendezvous, agree_start
from replay.schedule.request_selection import select_requests
from replay.schedule.stop_signals import sigterm_as_sigint
from workloads.workload import Workload

__all__ = ["ArrivalProcess", "ReplayConfig", "ReplayInputError", "new_run_id", "run_replay", "run_replay_async"]

log = logging.getLogger(__name__)

START_LEAD_S = 0.1  # t0 is set this far ahead of the moment the run is ready
# The twin's (endpoints/sim) body field for a request's reasoning length; sent to the twin only.
SIM_REASONING_FIELD = "sim_reasoning_tokens"
SIM_MARKER_KEY = "sim_hardware"  # a /server_info key only the twin has


def run_replay(
    workload: Workload,
    config: ReplayConfig,
    out_dir: Path,
    clock: Clock | None = None,
    progress: ReplayProgress | None = None,
) -> RunInfo:
    with sigterm_as_sigint():  # SIGTERM, like Ctrl-C, ends the run with every request accounted for
        return asyncio.run(run_replay_async(workload, config, out_dir, clock, progress))


async def run_replay_async(
    workload: Workload,
    config: ReplayConfig,
    out_dir: Path,
    clock: Clock | None = None,
    progress: ReplayProgress | None = None,
    exchange: Exchange | None = None,
) -> RunInfo:
    """Replays `workload` per `config` into `out_dir`. `exchange`: where the endpoint answers in-process (a twin on
    `clock`, endpoints/virtual_twin.py); its generation requests skip HTTP, everything else goes over it."""
    clock = clock or MonotonicClock()
    out_dir = Path(out_dir)
    created = not out_dir.exists()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReplayInputError(f"{out_dir}: cannot create the output directory ({exc})") from None
    try:
        return await _replay_into(workload, config, out_dir, clock, progress, exchange)
    except BaseException:
        # A replay that could not start (bad window, unreachable endpoint) leaves no empty folder behind.
        if created and out_dir.is_dir() and not any(out_dir.iterdir()):
            out_dir.rmdir()
        raise


async def _replay_into(
    workload: Workload,
    config: ReplayConfig,
    out_dir: Path,
    clock: Clock,
    progress: ReplayProgress | None,
    exchange: Exchange | None,
) -> RunInfo:
    selected, requests = select_requests(workload, config)
    headers = _auth_headers(config.api_key_env)
    if progress is not None:
        progress.total = len(requests)
    # Open-loop load needs as many connections as requests in flight: no pool limit. The per-request
    # deadline is the client's own; the session only bounds connecting.
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=30.0)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        try:
            server_info, problem = await fetch_server_info(session, config.url, headers)
        except ConnectionError as exc:
            raise ReplayInputError(str(exc)) from None
        if problem:
            log.warning("server facts unavailable, replaying anyway: %s", problem)
        options = await _send_options(session, config, headers, server_info, exchange)
        send = client_for(config.backend)

        sink = PartFileSink(out_dir, clock.now_s, config.flush_every_records, config.flush_interval_s)
        sink.open()
        tally = RunTally()

        def on_record(record: RequestRecord) -> None:
            tally.add(record, clock.now_s() - t0_s)
            sink.add(record)
            if progress is not None:
                progress.on_record(record)

        async def dispatch(request: PreparedRequest) -> RequestRecord:
            return await send(request, session, clock, t0_s, options)

        t0_s, t0_wall_s = await _t0(config, clock)
        run = _run_info(selected, workload, config, len(requests), t0_wall_s, server_info)
        write_run_json(out_dir, run)
        finished = False
        # Flushes each batch on time even when no further record arrives (a pause in the trace).
        flush_timer = asyncio.create_task(sink.flush_when_due(), name="part-sink flush timer")
        try:
            await run_open_loop(
                requests, dispatch, clock, t0_s, on_record, config.max_concurrency, config.run_id, progress
            )
            finished = True
        finally:
            flush_timer.cancel()
            await asyncio.to_thread(sink.close)
            lag = ScheduleLag.from_lags_s(tally.lags_s, config.lag_degraded_ms)
            # The measured window: from the end of warm-up to the end of the run's last request (RunTally), the
            # time the endpoint was held, not the span of its successful answers (a router killed mid-run fails
            # the rest of the schedule fast, and those seconds were paid for too).
            window_s = None
            if tally.last_end_s is not None and tally.last_end_s > config.warmup_s:
                window_s = tally.last_end_s - config.warmup_s
            run = replace(
                run,
                finished_wall_s=clock.wall_s() if finished else None,
                window_s=window_s,
                requests_recorded=tally.recorded,
                requests_ok=tally.ok,
                schedule_lag_p50_ms=lag.p50_ms,
                schedule_lag_p99_ms=lag.p99_ms,
                schedule_lag_max_ms=lag.max_ms,
                client_degraded=lag.degraded,
                partial=not finished,
            )
            write_run_json(out_dir, run)
    return run


async def _t0(config: ReplayConfig, clock: Clock) -> tuple[float, float]:
    """(t0 on the monotonic clock, t0 in epoch seconds), fixed now that this run's requests are ready.

    Alone: just ahead of now. Shards with a rendezvous folder: once every shard is ready. Shards given
    one start epoch share that t0.
    """
    start_at = config.start_at_epoch_s
    if config.rendezvous_dir is not None:
        rendezvous = Rendezvous(Path(config.rendezvous_dir), config.shard_index, config.shard_count,
                                config.rendezvous_run_id or config.run_id, config.rendezvous_attempt,
                                timeout_s=config.rendezvous_timeout_s)  # fmt: skip
        start_at = await asyncio.to_thread(agree_start, rendezvous, clock.wall_s)
    if start_at is None:
        return clock.now_s() + START_LEAD_S, clock.wall_s() + START_LEAD_S
    ahead_s = start_at - clock.wall_s()
    if ahead_s < 0:
        raise ReplayInputError(
            f"shard {config.shard_index}/{config.shard_count}: start time {start_at:.3f} (epoch s) passed "
            f"{-ahead_s:.3f} s ago, before its requests were ready; give every shard a start time far enough "
            "ahead, or a rendezvous folder"
        )
    return clock.now_s() + ahead_s, start_at


async def _send_options(
    session: aiohttp.ClientSession,
    config: ReplayConfig,
    headers: dict[str, str],
    server_info: dict,
    exchange: Exchange | None,
) -> SendOptions:
    model = config.model
    if model is None and config.backend is not Backend.SGLANG:
        model = await fetch_model_id(session, config.url, headers) or "default"
    return SendOptions(
        base_url=config.url,
        run_id=config.run_id,
        request_timeout_s=config.request_timeout_s,
        headers=headers,
        model=model or "default",
        require_reasoning=config.require_reasoning,
        cache_report=server_info.get("enable_cache_report") is True,
        sim_reasoning_field=SIM_REASONING_FIELD if SIM_MARKER_KEY in server_info else None,
        exchange=exchange,
    )


def _auth_headers(api_key_env: str | None) -> dict[str, str]:
    if api_key_env is None:
        return {}
    key = os.environ.get(api_key_env)
    if not key:
        raise ReplayInputError(f"environment variable {api_key_env} (the API key) is not set")
    return {"Authorization": f"Bearer {key}"}


def _run_info(
    selected: Workload,
    workload: Workload,
    config: ReplayConfig,
    requests_total: int,
    t0_wall_s: float,
    server_info: dict,
) -> RunInfo:
    return RunInfo(
        run_id=config.run_id,
        workload_name=selected.name,
        workload_hash=workload.content_hash,  # the workload as read; the window is start_s/duration_s
        trace_path=workload.source_path,
        trace_format=workload.trace_format.value,
        start_s=config.start_s,
        duration_s=config.duration_s,
        speedup=config.speedup,
        url=config.url,
        backend=config.backend.value,
        t0_wall_s=t0_wall_s,
        finished_wall_s=None,
        window_s=None,
        requests_total=requests_total,
        requests_recorded=0,
        requests_ok=0,
        schedule_lag_p50_ms=None,
        schedule_lag_p99_ms=None,
        schedule_lag_max_ms=None,
        client_degraded=False,
        partial=True,
        server_info=server_info,
        max_concurrency=config.max_concurrency,
        warmup_s=config.warmup_s,
        shard_index=config.shard_index,
        shard_count=config.shard_count,
        arrival_process=config.arrival_process.value,
    )
