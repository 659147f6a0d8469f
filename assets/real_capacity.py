"""A real endpoint's capacity at the SLO (attach, launch), for its runs' efficiency cost: measured by the opt-in rate
ramp (replay/capacity_ramp.py, capacity_source rate_ramp) while the endpoint is up, or else modelled from the
shadow twin (endpoints/capacity/shadow_capacity.py, capacity_source shadow_twin). Either is written as the
run folder's capacity.json, which runs_lake reads as for a twin's sweep. Dagster-free: the replay step calls
ramp_real_endpoint after its replays, measure_capacity calls write_shadow_capacities after the shadow canary."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from common.run_folder import CAPACITY_RAMP_DIR, RUN_FILE
from endpoints.capacity.shadow_canary import ShadowCanary
from endpoints.capacity.shadow_capacity import scaled_to_real, shadow_twin_capacity
from endpoints.capacity.slo_capacity import CapacityProbe, SloCapacity, read_capacity_json, write_capacity_json
from endpoints.running_endpoint import RunningEndpoint
from endpoints.spec import EndpointMode, EndpointSpec
from replay.capacity_ramp import RampCapacity, ramp_capacity
from replay.recording.run_json import read_run_json
from replay.scenario_config import replay_config_for
from workloads.scenarios import Scenario
from workloads.weekly_traffic import WeekTraffic
from workloads.workload import Workload

RATE_RAMP_SOURCE = "rate_ramp"
REAL_MODES = frozenset({EndpointMode.LAUNCH, EndpointMode.ATTACH})


def ramp_wanted(spec: EndpointSpec, scenario: Scenario) -> bool:
    return scenario.capacity_ramp is not None and spec.mode in REAL_MODES


def as_slo_capacity(ramp: RampCapacity, cpu_s: float, gpu_minutes: float | None) -> SloCapacity:
    """The ramp as capacity.json records a capacity: one probe a step (rate factor over the window's own rate)."""
    probes = tuple(CapacityProbe(s.rate_rps / ramp.window_rps, s.rate_rps, s.good_share) for s in ramp.steps)
    return SloCapacity(
        capacity_rps_at_slo=ramp.capacity_rps_at_slo,
        offered_rps=ramp.window_rps,
        idle_good_share=ramp.steps[0].good_share,
        requests=sum(s.requests for s in ramp.steps),
        probes=probes,
        cpu_s=cpu_s,
        source=RATE_RAMP_SOURCE,
        gpu_minutes=gpu_minutes,
    )


def ramp_real_endpoint(
    endpoint: RunningEndpoint,
    workload: Workload,
    traffic: WeekTraffic,
    scenario: Scenario,
    run_dirs: Sequence[Path],
    run_id: str,
) -> RampCapacity:
    """The ramp against the running endpoint, after the week's replays (its steps under the last run's folder),
    written as every run's capacity.json; its GPU-minutes on the last run's only, the one it ran after, so the
    week's rows add up to what it cost once."""
    assert scenario.capacity_ramp is not None
    base = replay_config_for(scenario, traffic, url=endpoint.url, api_key_env=endpoint.spec.api_key_env, run_id=run_id)
    slo = (scenario.slo_ttft_ms, scenario.slo_tpot_ms)
    started_cpu_s = time.process_time()
    ramp = ramp_capacity(
        workload, base, scenario.capacity_ramp, slo, endpoint.spec.gpu_count, Path(run_dirs[-1]) / CAPACITY_RAMP_DIR
    )
    cpu_s = time.process_time() - started_cpu_s
    for run_dir in run_dirs:
        gpu_minutes = ramp.gpu_minutes if run_dir == run_dirs[-1] else None
        write_capacity_json(Path(run_dir), as_slo_capacity(ramp, cpu_s, gpu_minutes))
    return ramp


def write_shadow_capacities(
    spec: EndpointSpec,
    window: Workload,
    slo: tuple[float, float],
    canaries: Sequence[ShadowCanary],
    run_dirs: Sequence[str | Path],
    cache_dir: Path | None,
) -> tuple[SloCapacity | None, ...]:
    """Each real run's capacity.json from its shadow canary (the twin's sweep x real / twin output tokens/s), except
    where the rate ramp measured one; returns each run's capacity, in order (None: none)."""
    if not canaries:  # a twin endpoint (its own sweep), or no runs
        return ()
    capacities: list[SloCapacity | None] = []
    twin: SloCapacity | None = None
    for run_dir, canary in zip(run_dirs, canaries, strict=True):
        existing = read_capacity_json(Path(run_dir))
        if existing is not None and existing.source == RATE_RAMP_SOURCE:
            capacities.append(existing)  # measured beats modelled
            continue
        twin = twin or shadow_twin_capacity(spec, window, slo, cache_dir, _server_info(Path(run_dir)))
        scaled = None if twin is None else scaled_to_real(replace(twin, gpu_minutes=None), canary)
        if scaled is not None:
            write_capacity_json(Path(run_dir), scaled)
        capacities.append(scaled)
    return tuple(capacities)


def _server_info(run_dir: Path) -> dict | None:
    """What the run's server said of itself (its run.json), for the shadow twin of an entry that gives no flags."""
    return read_run_json(run_dir).server_info if (run_dir / RUN_FILE).exists() else None
