"""What the twin's modelled GPUs report over a bundled scenario's window (docs/twin.md, "Its GPUs' counters"): the
scenario replayed on its endpoint's twin on a virtual clock, as the weekly job replays it, and the run's
gpu_samples in the measured window averaged per server: NVML's busy share, DCGM's SM and DRAM activity.

    python bench/twin_gpu_counters.py                              # the two canaries (about 15 s each)
    python bench/twin_gpu_counters.py chat-v3-h200 --week 2026-11-30
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import pyarrow.parquet as pq

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from endpoints.probes.probe_records import GPU_SAMPLES_FILE  # noqa: E402
from endpoints.spec import EndpointClock, load_endpoint_specs  # noqa: E402
from endpoints.virtual_twin import replay_on_virtual_twin  # noqa: E402
from replay.runner import run_replay_async  # noqa: E402
from replay.scenario_config import replay_config_for  # noqa: E402
from workloads.scenario_workload import scenario_workload  # noqa: E402
from workloads.scenarios import default_endpoints_path, default_scenarios_path, load_scenarios  # noqa: E402
from workloads.weekly_traffic import week_traffic  # noqa: E402

CANARIES = ("chat-v3-h200-canary", "reasoning-r1-h200-canary")


def measure(name: str, week: date, work_dir: Path) -> None:
    specs = load_endpoint_specs(default_endpoints_path())
    scenario = load_scenarios(default_scenarios_path(), REPO_ROOT, list(specs))[name]
    spec = specs[scenario.endpoint]
    if spec.clock is not EndpointClock.VIRTUAL:
        raise SystemExit(f"{name}: endpoint {spec.name} is not a twin on a virtual clock")
    run_dir = work_dir / name
    traffic = week_traffic(scenario, week, work_dir / "cache")
    workload = scenario_workload(scenario, traffic)

    def replay(endpoint, clock):
        config = replay_config_for(scenario, traffic, url=endpoint.url, api_key_env=None, run_id=name)
        return run_replay_async(workload, config, run_dir / "shard-0", clock, exchange=endpoint.exchange)

    started = time.monotonic()
    info = replay_on_virtual_twin(spec, run_dir, name, scenario.cold_start, replay)
    took_s = time.monotonic() - started
    samples = pq.read_table(run_dir / GPU_SAMPLES_FILE).to_pandas()
    start = info.t0_wall_s + info.warmup_s
    window = samples[samples.sample_wall_s.between(start, start + (info.window_s or 0.0))]
    print(f"{name} on {spec.name} ({week}): {info.requests_ok}/{info.requests_total} requests ok over "
          f"{info.window_s:.0f} s, replayed in {took_s:.0f} s; sources {sorted(set(samples.source))}")  # fmt: skip
    print(f"  {'server':<22} {'busy %':>7} {'SM active %':>12} {'DRAM active %':>14} {'samples':>8}")
    for host, part in [*window.groupby("host"), ("all", window)]:
        print(f"  {host:<22} {part.utilisation_pct.mean():>7.1f} {part.sm_active_pct.mean():>12.1f} "
              f"{part.dram_active_pct.mean():>14.1f} {len(part):>8}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenarios", nargs="*", default=list(CANARIES), help="bundled scenario names")
    parser.add_argument("--week", type=date.fromisoformat, default=date(2026, 11, 30), help="week (a Monday)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="twin-gpu-") as work_dir:
        for name in args.scenarios:
            measure(name, args.week, Path(work_dir))


if __name__ == "__main__":
    main()
