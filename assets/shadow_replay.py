"""The shadow canary's replay (endpoints/capacity/shadow_canary.py): after the week's real replays of a
scenario against an attach or launch endpoint, the same window replayed by the same replay client, with the
scenario's settings (speed-up, warm-up, concurrency cap, client, cold start), on the twin configured with the
endpoint's flags, served in-process on a virtual clock (endpoints/virtual_twin.py) in one shard; then the figures
of each real run and of the twin's, as run_summary defines them, and one shadow_canary.json per run. Dagster-free:
the replay step calls it after the capacity sweep."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa

from common.run_folder import SHADOW_REPLAY_DIR as SHADOW_DIR
from common.run_folder import SHARD_DIR
from endpoints.capacity.shadow_canary import (
    ServedFigures,
    ShadowCanary,
    ShadowNotModelled,
    compare,
    not_modelled,
    shadow_twin_spec,
    write_shadow_canary_json,
)
from endpoints.running_endpoint import RunningEndpoint
from endpoints.spec import EndpointMode, EndpointSpec
from endpoints.virtual_twin import VirtualTime, replay_on_virtual_twin
from replay.recording.records import RequestStatus, RunInfo
from replay.recording.requests_reader import read_requests
from replay.recording.run_json import read_run_json
from replay.recording.summary import summarize
from replay.runner import run_replay_async
from replay.scenario_config import replay_config_for
from workloads.scenarios import Scenario
from workloads.weekly_traffic import WeekTraffic
from workloads.workload import Workload

FLUSH_INTERVAL_S = 20.0  # as the weekly job's virtual-clock replays: a part file every 20 virtual seconds


def served_figures(requests: pa.Table, run: RunInfo) -> ServedFigures:
    """What a run measured, as run_summary defines it: its completed requests of the measured window."""
    summary = summarize(requests, run)
    measured = ~np.asarray(requests.column("is_warmup").to_pylist(), dtype=bool)
    ok = np.asarray(requests.column("status").to_pylist(), dtype=object) == RequestStatus.OK.value

    def floats(name: str) -> np.ndarray:
        return np.asarray(requests.column(name).to_numpy(zero_copy_only=False), dtype=np.float64)

    tokens, first_s, finish_s = floats("completion_tokens"), floats("first_token_mono_s"), floats("finish_mono_s")
    # run_summary's tpot_ms: (finish - first token) / (completion_tokens - 1), completed requests of > 1 token.
    usable = measured & ok & (tokens > 1)
    tpot_ms = (finish_s[usable] - first_s[usable]) * 1000.0 / (tokens[usable] - 1)
    tpot_ms = tpot_ms[~np.isnan(tpot_ms)]
    return ServedFigures(
        completed_requests=summary.requests_completed,
        output_tokens_per_s=summary.output_tokens_per_s,
        p50_ttft_ms=summary.ttft_p50_ms,
        p50_tpot_ms=float(np.percentile(tpot_ms, 50)) if tpot_ms.size else None,
    )


def write_shadow_canary(
    spec: EndpointSpec,
    workload: Workload,
    traffic: WeekTraffic,
    scenario: Scenario,
    run_dirs: Sequence[str | Path],
) -> tuple[ShadowCanary, ...]:
    """After the week's real replays of `scenario` against `spec` (merged: each run folder has its run.json and
    requests): the twin's replay of the same window, once (its folder: SHADOW_DIR in the first run's), and one
    shadow_canary.json per run. Returns what it wrote; nothing for a twin endpoint (its runs are the model)."""
    if spec.mode is EndpointMode.SIM or not run_dirs:
        return ()
    dirs = [Path(d) for d in run_dirs]
    runs = [read_run_json(d) for d in dirs]
    shadow_run_id = f"{runs[0].run_id}-shadow"
    try:
        twin = shadow_twin_spec(spec, runs[0].server_info)  # an attach entry without flags: the server's own
    except ShadowNotModelled as exc:
        skipped = tuple(not_modelled(run.run_id, shadow_run_id, spec.server_args, str(exc)) for run in runs)
        for run_dir, canary in zip(dirs, skipped):
            write_shadow_canary_json(run_dir, canary)
        return skipped
    shadow_dir = dirs[0] / SHADOW_DIR

    def replay(endpoint: RunningEndpoint, clock: VirtualTime):
        config = replay_config_for(scenario, traffic, url=endpoint.url, api_key_env=None, run_id=shadow_run_id)
        config = replace(config, flush_interval_s=FLUSH_INTERVAL_S)
        return run_replay_async(workload, config, shadow_dir / SHARD_DIR.format(0), clock, exchange=endpoint.exchange)

    started_cpu_s = time.process_time()
    info = replay_on_virtual_twin(twin, shadow_dir, shadow_run_id, scenario.cold_start, replay)
    twin_figures = served_figures(read_requests(shadow_dir / SHARD_DIR.format(0)), info)
    cpu_s = time.process_time() - started_cpu_s
    canaries = []
    for run_dir, run in zip(dirs, runs):
        canary = compare(run.run_id, shadow_run_id, twin.server_args, served_figures(read_requests(run_dir), run),
                         twin_figures, cpu_s)  # fmt: skip
        write_shadow_canary_json(run_dir, canary)
        canaries.append(canary)
    return tuple(canaries)
