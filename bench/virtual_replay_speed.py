"""What a replayed request costs in CPU on a twin served on the replay's own virtual clock, the path every bundled
scenario's replay step takes: its generation requests in-process (common/exchange.py) and, for comparison, the same
replay with every request over loopback HTTP, as the replay reached the twin before. Both runs must record the same
rows (requests.parquet, every column; a worker compared by its index in the fleet, not its port): the script says so,
or exits 1.

    python bench/virtual_replay_speed.py                      # the chat fleet's and the R1 canary's week: ~2 minutes
    python bench/virtual_replay_speed.py --max-requests 600   # their first 600 requests: ~20 s
    python bench/virtual_replay_speed.py --scenario chat-v3-h200-canary

Each scenario's week (2026-11-23) is replayed as its replay step replays it (workloads/scenarios.yaml, the bundled
traces, its endpoint's flags and the run's seeded variation; without the capacity sweep the first run of a week runs
beside it). CPU is `time.process_time()` around `replay_on_virtual_twin`, so it counts the twin, its engine, the
router's model, the client, the probes and the recording, and not the workload's build or the imports.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import replace
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from assets.replay_asset import VIRTUAL_FLUSH_INTERVAL_S, varied_spec  # noqa: E402
from endpoints.spec import load_endpoint_specs  # noqa: E402
from endpoints.virtual_twin import replay_on_virtual_twin  # noqa: E402
from replay.recording.requests_reader import read_requests  # noqa: E402
from replay.runner import run_replay_async  # noqa: E402
from replay.scenario_config import replay_config_for  # noqa: E402
from workloads.scenario_workload import scenario_workload  # noqa: E402
from workloads.scenarios import default_endpoints_path, default_scenarios_path, load_scenarios  # noqa: E402
from workloads.weekly_traffic import week_traffic  # noqa: E402

WEEK = date(2026, 11, 23)
RUN_ID = "20261123-bench-00000001"  # the seed of the run's variation, as a replay step draws it from its run id
SCENARIOS = ("chat-v3-h200", "reasoning-r1-h200-canary")


def replayed(scenario, spec, workload, traffic, root: Path, in_process: bool, max_requests: int | None):
    """(CPU s, requests, rows): one replay of the scenario's week on its twin, in-process or over HTTP."""
    workers: dict[str, int] = {}

    def replay(endpoint, clock):
        workers.update({url: i for i, url in enumerate(endpoint.worker_urls)})
        config = replay_config_for(scenario, traffic, url=endpoint.url, api_key_env=None, run_id=RUN_ID)
        config = replace(config, flush_interval_s=VIRTUAL_FLUSH_INTERVAL_S, max_requests=max_requests)
        exchange = endpoint.exchange if in_process else None
        return run_replay_async(workload, config, root / "replay", clock, exchange=exchange)

    started = time.process_time()
    info = replay_on_virtual_twin(spec, root, RUN_ID, scenario.cold_start, replay)
    cpu_s = time.process_time() - started
    rows = read_requests(root / "replay").to_pylist()
    for row in rows:
        row["worker"] = None if row["worker"] is None else workers[row["worker"]]
    return cpu_s, info.requests_total, sorted(rows, key=lambda r: r["request_id"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", action="append", help=f"bundled scenario (default: {', '.join(SCENARIOS)})")
    parser.add_argument("--max-requests", type=int, default=None, help="replay only the window's first N requests")
    args = parser.parse_args()
    specs = load_endpoint_specs(default_endpoints_path())
    scenarios = load_scenarios(default_scenarios_path(), REPO, specs)
    print(f"{'scenario':30} {'requests':>8} {'in-process ms/req':>18} {'over HTTP ms/req':>17} {'ratio':>6}  records")
    same_everywhere = True
    for name in args.scenario or SCENARIOS:
        scenario = scenarios[name]
        spec = varied_spec(specs[scenario.endpoint], scenario, RUN_ID)
        with tempfile.TemporaryDirectory(prefix="replay-speed-") as tmp:
            traffic = week_traffic(scenario, WEEK, Path(tmp) / "workloads")
            workload = scenario_workload(scenario, traffic)
            cap = args.max_requests
            ours_s, n, ours = replayed(scenario, spec, workload, traffic, Path(tmp) / "in", True, cap)
            http_s, _, theirs = replayed(scenario, spec, workload, traffic, Path(tmp) / "http", False, cap)
        same = ours == theirs
        same_everywhere &= same
        print(
            f"{name:30} {n:>8,} {1000 * ours_s / n:>18.2f} {1000 * http_s / n:>17.2f} {http_s / ours_s:>6.2f}  "
            + ("identical" if same else "DIFFERENT")
        )
    return 0 if same_everywhere else 1


if __name__ == "__main__":
    sys.exit(main())
