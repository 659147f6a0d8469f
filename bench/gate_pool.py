"""The pool bench/gate_error_rates.py draws its weeks from: M seeded twin runs of each bundled canary scenario.

Each run is replayed the way the weekly job replays a canary on a virtual clock (assets/replay_asset.py,
`replay_shard`): the scenario's window (workloads/weekly_traffic.py), its workload (workloads/scenario_workload.py),
its ReplayConfig (replay/scenario_config.py), served in-process by replay_on_virtual_twin with
`--sim-run-seed <i>` added to the endpoint's flags (endpoints/sim/cost/run_variation.py), and its `runs` row
built by build_run_row with the scenario's RunContext and the run's own capacity sweep on the twin as it had it (its
seed: measure_capacity does the same per run), which the efficiency cost the gate judges is priced from. No routing
reference or fleet plan: they feed the diagnoses, not the regression verdict.

A run is cached as `<pool_dir>/<scenario>-<key>/seed-<i>/{runs,requests}.parquet`, key a digest of the scenario,
the endpoint as configured, the workload's content hash and the source of endpoints/ and replay/, so a second
invocation replays nothing; change a flag, the window or the twin and the key changes (older folders stay until
removed).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
POOL_WEEK = date(2025, 1, 6)  # the week the pool's runs are built under; the bench relabels every run
VIRTUAL_FLUSH_INTERVAL_S = 20.0  # as assets/replay_asset.py: a part file every 20 virtual seconds


@dataclass(frozen=True, slots=True)
class PoolRun:
    """One cached replay: its `runs` row (one row, RUNS_SCHEMA) and its requests (REQUEST_RECORD_SCHEMA)."""

    seed: int
    runs: pa.Table
    requests: pa.Table


def canary_scenarios(scenarios_path: Path, endpoints_path: Path) -> list[str]:
    """The names of the bundled canary scenarios, in file order."""
    from endpoints.spec import load_endpoint_specs
    from workloads.scenarios import load_scenarios

    specs = load_endpoint_specs(endpoints_path)
    scenarios = load_scenarios(scenarios_path, REPO, frozenset(specs))
    return [name for name, s in scenarios.items() if s.role == "canary"]


def _resolved(scenario_name: str, scenarios_path: Path, endpoints_path: Path, spool_dir: Path):
    from endpoints.spec import load_endpoint_specs
    from workloads.scenario_workload import scenario_workload
    from workloads.scenarios import load_scenarios
    from workloads.weekly_traffic import week_traffic

    specs = load_endpoint_specs(endpoints_path)
    scenario = load_scenarios(scenarios_path, REPO, frozenset(specs))[scenario_name]
    spec = specs[scenario.endpoint].as_of(POOL_WEEK)
    traffic = week_traffic(scenario, POOL_WEEK, spool_dir)
    return scenario, spec, traffic, scenario_workload(scenario, traffic)


def twin_digest() -> str:
    """A digest of the source of the twin and the replayer (endpoints/, replay/): other code makes a pool stale."""
    digest = hashlib.sha256()
    for package in ("endpoints", "replay"):
        for path in sorted((REPO / package).rglob("*.py")):
            digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def pool_key(scenario_name: str, scenarios_path: Path, endpoints_path: Path, spool_dir: Path) -> str:
    """The cache key of a scenario's pool: the scenario, its endpoint's flags, its workload and the twin's code."""
    scenario, spec, traffic, workload = _resolved(scenario_name, scenarios_path, endpoints_path, spool_dir)
    text = repr((scenario, spec, traffic.start_s, traffic.duration_s, workload.content_hash, twin_digest()))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _replay_one(job: tuple[str, int, Path, Path, Path, Path]) -> Path:
    """Replay seed `seed` of the scenario into `dest` (runs.parquet, requests.parquet); returns dest."""
    scenario_name, seed, scenarios_path, endpoints_path, spool_dir, dest = job
    from endpoints.capacity.run_capacity import CapacityInputs, measure_run_capacity
    from endpoints.probes.server_facts import SERVER_FACTS_FILE
    from endpoints.virtual_twin import replay_on_virtual_twin
    from replay.recording.requests_reader import read_requests
    from replay.recording.shard_merge import merge_shard_runs
    from replay.runner import run_replay_async
    from replay.scenario_config import replay_config_for
    from warehouse.marts.run_rows import RunContext, build_run_row
    from workloads.trace_stats import trace_stats

    scenario, spec, traffic, workload = _resolved(scenario_name, scenarios_path, endpoints_path, spool_dir)
    week_spec = spec
    spec = replace(spec, server_args=(*spec.server_args, "--sim-run-seed", str(seed)))
    run_id = f"pool-{scenario_name}-{seed}"
    with tempfile.TemporaryDirectory(prefix="gate-pool-") as tmp:
        run_dir, shard_dir = Path(tmp) / "run", Path(tmp) / "run" / "shard-0"

        def replay(endpoint, clock):
            config = replay_config_for(scenario, traffic, url=endpoint.url, api_key_env=spec.api_key_env, run_id=run_id)
            config = replace(config, flush_interval_s=VIRTUAL_FLUSH_INTERVAL_S)
            return run_replay_async(workload, config, shard_dir, clock, exchange=endpoint.exchange)

        replay_on_virtual_twin(spec, run_dir, run_id, scenario.cold_start, replay)
        facts = orjson.loads((run_dir / SERVER_FACTS_FILE).read_bytes())
        info = replace(merge_shard_runs([shard_dir], run_dir), config_fingerprint=facts.get("config_fingerprint"))
        window = workload.window(traffic.start_s, traffic.duration_s)
        context = RunContext.of_scenario(scenario, trace_stats(window).prefix_reuse_share)
        slo = (scenario.slo_ttft_ms, scenario.slo_tpot_ms)
        inputs = CapacityInputs(week_spec, window, slo, None, scenario.speedup, Path(tmp) / "cache", run_endpoint=spec)
        capacity = measure_run_capacity(inputs).capacity
        if capacity is not None:
            context = replace(
                context,
                capacity_rps_at_slo=capacity.capacity_rps_at_slo,
                capacity_source="twin_sweep",
                running_requests_at_slo=capacity.running_requests_at_slo,
            )
        staged = dest.with_name(f"{dest.name}.tmp-{os.getpid()}")
        shutil.rmtree(staged, ignore_errors=True)
        staged.mkdir(parents=True)
        pq.write_table(build_run_row(info, spec, scenario_name, POOL_WEEK, context), staged / "runs.parquet")
        pq.write_table(read_requests(run_dir), staged / "requests.parquet")
        try:
            os.replace(staged, dest)
        except OSError:  # another invocation cached the same run meanwhile: keep its copy
            if not (dest / "requests.parquet").is_file():
                raise
            shutil.rmtree(staged, ignore_errors=True)
    return dest


def ensure_pool(
    scenario_names: list[str],
    size: int,
    pool_dir: Path,
    scenarios_path: Path,
    endpoints_path: Path,
    workers: int,
    log=print,
) -> dict[str, Path]:
    """Each scenario's pool folder holding seeds 0..size-1, replaying (in `workers` processes) those not cached."""
    spool_dir = pool_dir / "_workloads"
    spool_dir.mkdir(parents=True, exist_ok=True)
    folders = {
        name: pool_dir / f"{name}-{pool_key(name, scenarios_path, endpoints_path, spool_dir)}"
        for name in scenario_names
    }
    jobs = [
        (name, seed, scenarios_path, endpoints_path, spool_dir, folders[name] / f"seed-{seed}")
        for name in scenario_names
        for seed in range(size)
        if not (folders[name] / f"seed-{seed}" / "requests.parquet").is_file()
    ]
    if jobs:
        log(f"replaying {len(jobs)} pool run(s) on the twin in {workers} processes (the rest are cached)")
        for folder in folders.values():
            folder.mkdir(parents=True, exist_ok=True)
        with ProcessPoolExecutor(max_workers=workers) as pool:
            for done, path in enumerate(pool.map(_replay_one, jobs), start=1):
                log(f"  [{done}/{len(jobs)}] {path.parent.name}/{path.name}")
    return folders


def read_pool(folder: Path, size: int) -> list[PoolRun]:
    """Seeds 0..size-1 of one scenario's pool folder."""
    return [
        PoolRun(
            seed,
            pq.read_table(folder / f"seed-{seed}" / "runs.parquet"),
            pq.read_table(folder / f"seed-{seed}" / "requests.parquet"),
        )
        for seed in range(size)
    ]
