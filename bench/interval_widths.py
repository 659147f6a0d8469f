"""How long a window must be: the width of this week's 95% interval on cost per request, from arrivals alone.

For each bundled trace, window length and replay speedup, every window start (every 10 s of the trace) is
cut into arrival blocks by the rule of the dbt model interval_block_rows and bootstrapped by
warehouse/marts/bootstrap_interval.py exactly as a run's would be; the table gives the median, 90th percentile
and largest width over the starts, as a share of the cost per request (a run's cost is spread evenly over
its blocks, so the arrivals decide the width; docs/pipeline.md, "How long a window must be"). Then the
bundled scenarios: every week of a year under their window rules.

    python bench/interval_widths.py            # about a minute
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from datetime import date, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from warehouse.marts.bootstrap_interval import cost_interval_width  # noqa: E402
from workloads.scenarios import load_scenarios  # noqa: E402
from workloads.weekly_traffic import week_traffic  # noqa: E402
from workloads.workload_file import open_workload  # noqa: E402

TRACES = {
    "Azure conv": (REPO / "workloads/traces/azure_conv_2023.csv", "azure"),
    "Mooncake conv": (REPO / "workloads/traces/mooncake_conversation.jsonl", "mooncake"),
}
WINDOWS_S = (60, 120, 240, 300, 600, 900, 1200)
SPEEDUPS = (1.0, 0.6)


def _arrivals(path: Path, trace_format: str, spool: Path) -> list[float]:
    trace = open_workload(path, trace_format, spool)
    return sorted(trace.window_rows(0.0, None).table.column("arrival_s").to_pylist())


def _widths(arrivals: list[float], window_s: float, speedup: float, step_s: float = 10.0) -> list[float]:
    end_s = arrivals[-1]
    widths, start = [], 0.0
    while start + window_s <= end_s:
        inside = [t - start for t in arrivals if start <= t < start + window_s]
        width = cost_interval_width([t / speedup for t in inside], window_s / speedup)
        if width is not None:
            widths.append(width)
        start += step_s
    return widths


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    with tempfile.TemporaryDirectory() as spool:
        print("| trace | window (trace s) | speedup | requests | width median | p90 | max |")
        print("|---|---|---|---|---|---|---|")
        for name, (path, trace_format) in TRACES.items():
            arrivals = _arrivals(path, trace_format, Path(spool))
            rate = len(arrivals) / (arrivals[-1] - arrivals[0])
            for window_s in WINDOWS_S:
                for speedup in SPEEDUPS:
                    widths = _widths(arrivals, window_s, speedup)
                    if not widths:
                        continue
                    q90 = statistics.quantiles(widths, n=10)[-1] if len(widths) > 1 else widths[0]
                    median = statistics.median(widths)
                    print(f"| {name} | {window_s} | {speedup:g} | ~{rate * window_s:,.0f} | "
                          f"{100 * median:.1f}% | {100 * q90:.1f}% | {100 * max(widths):.1f}% |")  # fmt: skip
        print()
        print("| bundled scenario | window | weeks | width median | max |")
        print("|---|---|---|---|---|")
        scenarios = load_scenarios(REPO / "workloads/scenarios.yaml", REPO)
        monday = date(2026, 1, 5)
        for scenario in scenarios.values():
            widths = []
            for k in range(52):
                traffic = week_traffic(scenario, monday + timedelta(weeks=k), Path(spool))
                table = traffic.window_rows().table
                inside = [t - traffic.start_s for t in table.column("arrival_s").to_pylist()]
                duration_s = traffic.duration_s or max(inside)
                replayed = [t / scenario.speedup for t in inside]
                width = cost_interval_width(replayed, duration_s / scenario.speedup)
                assert width is not None, f"{scenario.name}: no requests in the window"
                widths.append(width)
                if scenario.weekly_window is None:
                    break  # a canary: the same window every week
            print(f"| {scenario.name} | {duration_s:g} s at {scenario.speedup:g}x | {len(widths)} | "
                  f"{100 * statistics.median(widths):.1f}% | {100 * max(widths):.1f}% |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
