"""Capacity at the SLO of every bundled scenario (workloads/scenarios.yaml), as the weekly job measures it
(endpoints/capacity/slo_capacity.py) on the workload its materialize step builds, but bisected finer: the weekly
job's sweep brackets the rate within a factor 2^(1/8) (about 9%) before it interpolates, this one within 2^(1/64)
(about 1%), so that a change of the twin shows as a number rather than as a step of the grid.

    python bench/capacity_at_slo.py                  # the week of 2026-11-23
    python bench/capacity_at_slo.py --week 2026-11-16

Prints one row per scenario: its endpoint, the requests swept, the rate the window's requests arrive at in the
trace, the highest rate (requests/s) at which 95% of what the idle endpoint keeps inside the SLO stays inside,
and the p95 TTFT (from arrival) of the same requests replayed at the scenario's own speedup: the figure a
product team is promised at the load the weekly job replays.
Twin endpoints only (a real endpoint's capacity comes from replaying on it). A few minutes on one core.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import replace
from datetime import date
from pathlib import Path
from statistics import quantiles

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from endpoints.capacity.deployment import Deployment  # noqa: E402
from endpoints.capacity.slo_capacity import MAX_SWEEP_REQUESTS, sweep_capacity, sweep_requests  # noqa: E402
from endpoints.sim.virtual_bench import run_bench  # noqa: E402
from endpoints.spec import EndpointMode, load_endpoint_specs  # noqa: E402
from workloads.scenario_workload import scenario_workload  # noqa: E402
from workloads.scenarios import load_scenarios  # noqa: E402
from workloads.weekly_traffic import week_traffic  # noqa: E402

FINE_BISECTIONS = 6  # after bracketing within a factor 2: 2^(1/64), about 1%


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--week", type=date.fromisoformat, default=date(2026, 11, 23), help="a Monday")
    args = parser.parse_args(argv)
    endpoints = load_endpoint_specs(REPO / "workloads/endpoints.yaml")
    scenarios = load_scenarios(REPO / "workloads/scenarios.yaml", REPO, endpoints)
    print(f"Capacity at the SLO, week of {args.week} (bisected to ~1%; {MAX_SWEEP_REQUESTS} requests a sweep)\n")
    print(
        "| scenario | endpoint | SLO TTFT / TPOT ms | requests | offered req/s | capacity req/s "
        "| p95 TTFT ms at speedup | CPU s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as spool:
        for scenario in scenarios.values():
            spec = endpoints[scenario.endpoint].as_of(args.week)
            if spec.mode is not EndpointMode.SIM:
                continue
            traffic = week_traffic(scenario, args.week, Path(spool))
            window = scenario_workload(scenario, traffic).window(traffic.start_s, traffic.duration_s)
            started = time.process_time()
            flags, requests = list(spec.server_args), sweep_requests(window)
            capacity = sweep_capacity(
                Deployment(tuple(flags), spec.gpu_count),
                requests,
                scenario.slo_ttft_ms,
                scenario.slo_tpot_ms,
                bisections=FINE_BISECTIONS,
            ).capacity
            first_s = requests[0].arrival_s
            at_speed = [replace(r, arrival_s=(r.arrival_s - first_s) / scenario.speedup) for r in requests]
            ttfts = sorted(t.ttft_s for t in run_bench(flags, at_speed).requests)
            p95_ms = quantiles(ttfts, n=20, method="inclusive")[18] * 1e3
            rps = capacity.capacity_rps_at_slo
            print(
                f"| {scenario.name} | {spec.name} | {scenario.slo_ttft_ms:.0f} / {scenario.slo_tpot_ms:.0f} "
                f"| {capacity.requests} | {capacity.offered_rps:.2f} | {'none' if rps is None else f'{rps:.2f}'} "
                f"| {p95_ms:,.0f} | {time.process_time() - started:.1f} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
