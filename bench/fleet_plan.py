"""The fleet plan of a bundled scenario with a target_rps (workloads/scenarios.yaml), as the weekly job makes it
(endpoints/capacity/fleet_plan.py) after its capacity sweep (slo_capacity.py), on the workload its materialize step
builds for the week.

    python bench/fleet_plan.py                                   # chat-v3-h200, the week of 2026-11-30
    python bench/fleet_plan.py --week 2026-11-23 --target-rps 40

Prints the capacity sweep's figures, then one row per shape tried: the share of the window inside the SLO at the
target rate, the verdict, p95 TTFT, hit rate and the busiest worker's share, and the CPU both took. Twin endpoints
only. Under a minute on one core at 20 requests/s.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from endpoints.capacity.fleet_plan import ShapeProbe, measure_fleet_plan  # noqa: E402
from endpoints.capacity.slo_capacity import measure_capacity  # noqa: E402
from endpoints.spec import load_endpoint_specs  # noqa: E402
from workloads.scenario_workload import scenario_workload  # noqa: E402
from workloads.scenarios import load_scenarios  # noqa: E402
from workloads.weekly_traffic import week_traffic  # noqa: E402
from workloads.workload import Workload  # noqa: E402


def _per_gpu(shape: ShapeProbe, rps: float, window: Workload) -> str:
    """Tokens per GPU at the target rate, counted the three ways InferenceX counts a disaggregated deployment:
    (input + output) over all GPUs, output over the decode GPUs, input over the prefill GPUs (an aggregated shape
    has no roles: its GPUs count for both)."""
    requests = window.table.num_rows
    input_per_request = sum(window.table.column("input_tokens").to_pylist()) / requests
    output_per_request = sum(window.table.column("output_tokens").to_pylist()) / requests
    decode_gpus, prefill_gpus = (shape.decode_gpus, shape.prefill_gpus) if shape.prefill_workers else (shape.gpus,) * 2
    total = rps * (input_per_request + output_per_request) / shape.gpus
    return (
        f"{total:,.0f} / {rps * output_per_request / decode_gpus:,.0f} / {rps * input_per_request / prefill_gpus:,.0f}"
    )


def _ttft_parts(shape: ShapeProbe) -> str:
    """Where the shape's TTFT goes at the target rate: its stages' mean ms (they add up to the mean TTFT)."""
    parts = shape.mean_ttft_parts_ms or {}
    # round() to an int: a part left over by float subtraction (bootstrap, -1e-12 ms) reads 0, not -0.
    return " + ".join(f"{name} {round(ms):,}" for name, ms in parts.items()) or "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="chat-v3-h200")
    parser.add_argument("--week", type=date.fromisoformat, default=date(2026, 11, 30), help="a Monday")
    parser.add_argument("--target-rps", type=float, help="instead of the scenario's target_rps")
    parser.add_argument(
        "--disaggregated", action="store_true", help="try xP+yD shapes too (the scenario key plan_disaggregated)"
    )
    parser.add_argument(
        "--ep-widths", type=int, nargs="*", default=None,
        help="xP+yD shapes with wide expert-parallel decode workers of these GPUs too (scenario key plan_ep_widths)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    endpoints = load_endpoint_specs(REPO / "workloads/endpoints.yaml")
    scenario = load_scenarios(REPO / "workloads/scenarios.yaml", REPO, endpoints)[args.scenario]
    target_rps = args.target_rps or scenario.target_rps
    if target_rps is None or scenario.slo_ttft_ms is None or scenario.slo_tpot_ms is None:
        parser.error(f"{args.scenario} has no target_rps or SLO: give --target-rps, or pick another scenario")
    spec = endpoints[scenario.endpoint].as_of(args.week)
    slo = (scenario.slo_ttft_ms, scenario.slo_tpot_ms)
    with tempfile.TemporaryDirectory() as spool:
        traffic = week_traffic(scenario, args.week, Path(spool))
        window = scenario_workload(scenario, traffic).window(traffic.start_s, traffic.duration_s)
    started = time.process_time()
    capacity = measure_capacity(spec, window, *slo)
    sweep_cpu_s = time.process_time() - started
    plan = measure_fleet_plan(
        spec,
        window,
        target_rps,
        slo,
        capacity,
        plan_disaggregated=args.disaggregated or scenario.plan_disaggregated,
        plan_ep_widths=scenario.plan_ep_widths if args.ep_widths is None else tuple(args.ep_widths),
    )
    if capacity is None or plan is None:
        print(f"{spec.name} is not a twin endpoint, or its window has no two arrivals: nothing to plan")
        return 1
    print(f"{args.scenario} on {spec.name}, week of {args.week}: SLO TTFT {slo[0]:g} ms / TPOT {slo[1]:g} ms; the "
          f"endpoint's sweep: {capacity.capacity_rps_at_slo} requests/s ({sweep_cpu_s:.1f} s CPU); plan for "
          f"{target_rps:g} requests/s: {plan.requests} requests a replay, {plan.probes} replays, {plan.cpu_s:.1f} s "
          f"CPU, idle share {plan.idle_good_share:.3f}\n")  # fmt: skip
    print(
        "| shape | GPUs | share inside the SLO | holds | p95 TTFT ms | hit rate | busiest worker | capacity req/s "
        "| tok/s per GPU: total / output per decode GPU / input per prefill GPU | mean TTFT ms by stage |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for s in plan.shapes:
        capacity_text = "-" if s.capacity_rps_at_slo is None else f"{s.capacity_rps_at_slo:.3g}"
        print(f"| {s.label}{' (chosen)' if s.chosen else ''} | {s.gpus} | {s.good_share:.1%} | "
              f"{'yes' if s.holds_target else 'no'} | {s.p95_ttft_ms:.0f} | {s.hit_rate:.1%} | "
              f"{s.max_worker_share:.1%} | {capacity_text} | {_per_gpu(s, target_rps, window)} | "
              f"{_ttft_parts(s)} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
