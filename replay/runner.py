"""One replay run: window the workload, prepare requests, replay them open-loop, record everything.

    run_replay(workload, config, out_dir) -> RunInfo      # sync; runs its own event loop
    await run_replay_async(workload, config, out_dir)     # inside a running loop

Writes out_dir/requests.parquet (records, in batches as they complete) and out_dir/run.json (RunInfo,
partial until the run ends). Before t0 it reads /server_info, the only non-replay HTTP call.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import secrets
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp

from replay.client_protocol import SendOptions
from replay.client_registry import Backend, client_for
from replay.clock import Clock, MonotonicClock
from replay.open_loop import run_open_loop
from replay.parquet_sink import REQUESTS_FILE, ParquetRecordSink
from replay.prepared_request import PreparedRequest, prepare_requests
from replay.records import RequestRecord, RunInfo
from replay.run_json import write_run_json
from replay.schedule_lag import RunTally, ScheduleLag
from replay.server_info_fetch import fetch_server_info
from workloads.prompt_materializer import materialize_input_ids
from workloads.workload import Workload

log = logging.getLogger(__name__)

_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
START_LEAD_S = 0.1  # t0 is set this far ahead of the moment the run is ready


class ReplayInputError(ValueError):
    """The replay cannot start: bad configuration, an empty window, an unreachable endpoint."""


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(3)


@dataclass(frozen=True, slots=True)
class ReplayConfig:
    url: str  # base URL of the endpoint, e.g. http://127.0.0.1:30000
    backend: Backend = Backend.SGLANG
    speedup: float = 1.0  # request i is due at arrival_s / speedup
    start_s: float = 0.0  # window of the trace to replay: [start_s, start_s + duration_s)
    duration_s: float | None = None  # None: to the end of the trace
    request_timeout_s: float = 600.0
    api_key_env: str | None = None  # name of the environment variable holding the key, never the key
    seed: int = 0  # prompt materialization seed
    run_id: str = field(default_factory=new_run_id)
    lag_degraded_ms: float = 10.0  # schedule-lag p99 past this flags the run client_degraded
    flush_every_records: int = 256
    flush_interval_s: float = 2.0

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ReplayInputError(f"url {self.url!r}: expected http://host:port or https://host:port")
        if parts.path.strip("/") or parts.query:
            raise ReplayInputError(f"url {self.url!r}: give the endpoint's base URL, without a path")
        object.__setattr__(self, "url", f"{parts.scheme}://{parts.netloc}")
        for name in ("speedup", "start_s", "request_timeout_s", "lag_degraded_ms"):
            object.__setattr__(self, name, float(getattr(self, name)))  # run.json shows 211.0, not 211
        if self.duration_s is not None:
            object.__setattr__(self, "duration_s", float(self.duration_s))
        if not isinstance(self.backend, Backend):
            try:
                object.__setattr__(self, "backend", Backend(self.backend))
            except ValueError:
                known = ", ".join(b.value for b in Backend)
                raise ReplayInputError(f"unknown backend {self.backend!r}: known backends are {known}") from None
        checks = [
            (self.speedup > 0, f"speedup must be > 0, got {self.speedup}"),
            (self.start_s >= 0, f"start_s must be >= 0, got {self.start_s}"),
            (self.duration_s is None or self.duration_s > 0, f"duration_s must be > 0, got {self.duration_s}"),
            (self.request_timeout_s > 0, f"request_timeout_s must be > 0, got {self.request_timeout_s}"),
            (self.seed >= 0, f"seed must be >= 0, got {self.seed}"),
            (self.lag_degraded_ms > 0, f"lag_degraded_ms must be > 0, got {self.lag_degraded_ms}"),
            (
                self.api_key_env is None or bool(_ENV_NAME.match(self.api_key_env)),
                "api_key_env must name an environment variable (like SGLANG_API_KEY), not hold the key",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise ReplayInputError(message)


def run_replay(workload: Workload, config: ReplayConfig, out_dir: Path, clock: Clock | None = None) -> RunInfo:
    return asyncio.run(run_replay_async(workload, config, out_dir, clock))


async def run_replay_async(
    workload: Workload, config: ReplayConfig, out_dir: Path, clock: Clock | None = None
) -> RunInfo:
    clock = clock or MonotonicClock()
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReplayInputError(f"{out_dir}: cannot create the output directory ({exc})") from None
    requests = _prepare(workload, config)
    options = SendOptions(
        base_url=config.url,
        run_id=config.run_id,
        request_timeout_s=config.request_timeout_s,
        headers=_auth_headers(config.api_key_env),
    )
    send = client_for(config.backend)
    # Open-loop load needs as many connections as requests in flight: no pool limit. The per-request
    # deadline is the client's own; the session only bounds connecting.
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=30.0)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        try:
            server_info, problem = await fetch_server_info(session, config.url, options.headers)
        except ConnectionError as exc:
            raise ReplayInputError(str(exc)) from None
        if problem:
            log.warning("server facts unavailable, replaying anyway: %s", problem)

        sink = ParquetRecordSink(
            out_dir / REQUESTS_FILE, clock.now_s, config.flush_every_records, config.flush_interval_s
        )
        sink.open()
        tally = RunTally()

        def on_record(record: RequestRecord) -> None:
            tally.add(record)
            sink.add(record)

        async def dispatch(request: PreparedRequest) -> RequestRecord:
            return await send(request, session, clock, t0_s, options)

        # t0 lies a little ahead, so writing the partial run.json does not make the first requests late.
        t0_s = clock.now_s() + START_LEAD_S
        run = _run_info(workload, config, len(requests), clock.wall_s() + START_LEAD_S, server_info)
        write_run_json(out_dir, run)
        finished = False
        try:
            await run_open_loop(requests, dispatch, clock, t0_s, on_record)
            finished = True
        finally:
            await asyncio.to_thread(sink.close)
            lag = ScheduleLag.from_lags_s(tally.lags_s, config.lag_degraded_ms)
            run = replace(
                run,
                finished_wall_s=clock.wall_s() if finished else None,
                window_s=tally.last_finish_s,
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


def _prepare(workload: Workload, config: ReplayConfig) -> list[PreparedRequest]:
    """All per-request work that can happen before t0 (materializing ids is the expensive part)."""
    windowed = workload.window(config.start_s, config.duration_s)
    if windowed.num_requests == 0:
        end = f"{config.start_s + config.duration_s:g}" if config.duration_s is not None else "end"
        raise ReplayInputError(
            f"{workload.source_path}: no requests arrive in the window [{config.start_s:g} s, {end} s)"
        )
    ids = materialize_input_ids(windowed, seed=config.seed)
    return prepare_requests(windowed, ids, config.speedup)


def _auth_headers(api_key_env: str | None) -> dict[str, str]:
    if api_key_env is None:
        return {}
    key = os.environ.get(api_key_env)
    if not key:
        raise ReplayInputError(f"environment variable {api_key_env} (the API key) is not set")
    return {"Authorization": f"Bearer {key}"}


def _run_info(
    workload: Workload,
    config: ReplayConfig,
    requests_total: int,
    t0_wall_s: float,
    server_info: dict,
) -> RunInfo:
    return RunInfo(
        run_id=config.run_id,
        workload_name=workload.name,
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
    )
