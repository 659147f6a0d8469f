"""The runtime's cost band for one model, in virtual time on the twin: the worked example of docs/warehouse.md
("The runtime's cost band: a worked example").

    python bench/worked_example.py                   # about 2.5 minutes of CPU
    python bench/worked_example.py --weekly-sweep    # and what the weekly job's 300-request sweep reads

Traffic: the two scenarios of workloads/examples/worked_example.yaml, built as the weekly job builds a scenario's
window (workloads/scenario_workload.py): a synthetic trace of 1,500 requests (~300 varied input tokens and ~400
output tokens each) behind a 2,048-token system prompt; for DeepSeek-R1, 1.5 reasoning tokens per answer token
in front of each answer (~1,000 output tokens, 60% of them reasoning). Token ids are materialized as the capacity
sweep does (slo_capacity.workload_bench_requests), so the system prompt hits the twin's radix cache as it would a
server's.

DeepSeek-V3 on 8xH200 (the flags of endpoint v3-8xh200 in workloads/endpoints.yaml), three ways:
  1. no prefix reuse (--disable-radix-cache added) at low occupancy: replayed at 15% of its capacity at the SLO;
  2. RadixAttention with a warm prefix: the endpoint as it is, at 15% of its capacity (the system prompt is in the
     cache from the first request on);
  3. RadixAttention with dense continuous batching: the endpoint as it is, at 90% of its capacity.
DeepSeek-R1 on 8xH200 (endpoint r1-8xh200: MTP, SGLang's EAGLE path with 3 draft steps; 128 running at most) with
MTP on and off (off: its --speculative-* flags removed, nothing else), each at 90% of its own capacity.

For each way: its capacity at the SLO (the scenario's: TTFT 1 s, 100 ms per output token) by the weekly job's
sweep rule (slo_capacity.search_capacity); the efficiency cost per request, gpu_count x usd_per_gpu_hour / 3600 /
capacity_rps_at_slo; the realised cost per request of the replay, gpu_count x usd_per_gpu_hour x window_s / 3600 /
completed_requests, window_s from the first arrival to the last completion as runs.window_s; the idle part,
realised - efficiency; the hit rate (cached / prompt tokens); the time-weighted mean running batch; the share inside
the SLO; and both costs relative to the model's reference way (V3: way 3; R1: MTP on). The GPU-hour price is the
endpoint's price book in warehouse/prices.yaml ($COSTBENCH_PRICES replaces it).

How many requests each step replays:
- the V3 sweeps, all 1,500, where the weekly job's sweep takes the first 300 (MAX_SWEEP_REQUESTS): a V3 server
  runs up to 2,048 requests at once, and near its capacity here a request takes ~35 s (400 tokens at ~90 ms), so
  300 requests end before the running batch settles and far too high a rate looks sustainable (--weekly-sweep: 126
  requests/s for ways 2 and 3, 5.8 for way 1, where 1,500 give 5.75 and 4.61; the weekly job's measure_capacity
  sees the unsettled batch and sweeps again on more of the window). Over 1,500 the batch climbs to where the TPOT
  SLO binds;
- the R1 sweeps, the first 300, as the weekly job: the endpoint's 128-request cap makes a queue form within them
  (1,500 replayed at 90% of the capacities so found keep 95-96% inside the SLO: about 5% high, not 20 times);
- the replays at 15%, the first 300: no queue forms, so they read what 1,500 would, for a fifth of the CPU;
- the replays at 90%, all 1,500: the batch settles, and the drain after the last arrival is a small part of the
  window.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from endpoints.capacity.deployment import Deployment  # noqa: E402
from endpoints.capacity.slo_capacity import (  # noqa: E402
    IDLE_FACTOR,
    MAX_SWEEP_REQUESTS,
    arrival_span_s,
    compressed,
    good_share,
    search_capacity,
    sweep_capacity,
    workload_bench_requests,
)
from endpoints.sim.virtual_bench import BenchRequest, run_bench  # noqa: E402
from endpoints.spec import EndpointSpec, load_endpoint_specs  # noqa: E402
from warehouse.marts.price_table import resolve_gpu_price  # noqa: E402
from workloads.scenario_workload import scenario_workload  # noqa: E402
from workloads.scenarios import Scenario, load_scenarios  # noqa: E402
from workloads.weekly_traffic import week_traffic  # noqa: E402

SCENARIOS = REPO / "workloads/examples/worked_example.yaml"
ENDPOINTS = REPO / "workloads/endpoints.yaml"
WEEK = date(2026, 11, 23)  # the scenarios' window is fixed; a week only picks the endpoints' flags of that week
LOW_OCCUPANCY = 0.15  # ways 1 and 2: the replayed rate / the way's capacity at the SLO
DENSE_OCCUPANCY = 0.9  # way 3 and both R1 ways: near capacity, still inside the SLO
SWEEP_START_FACTOR = 2.0  # the trace's 2 requests/s is below every way's capacity: the bracket starts one doubling up
V3_SWEEP_REQUESTS = 1_500  # the whole trace (the docstring says why)
R1_SWEEP_REQUESTS = MAX_SWEEP_REQUESTS  # as in the weekly job: R1's running cap makes its queue form within these
LOW_OCCUPANCY_REPLAY_REQUESTS = MAX_SWEEP_REQUESTS  # no queue forms at 15%: 300 requests say what 1,500 would


@dataclass(frozen=True, slots=True)
class Way:
    label: str
    flags: tuple[str, ...]  # the twin's SGLang flags
    occupancy: float  # the rate replayed / this way's capacity at the SLO (ratio)
    replay_requests: int | None = None  # the first this many requests are replayed (None: all of them)


@dataclass(frozen=True, slots=True)
class Comparison:
    """One model's ways on one scenario's traffic; relative costs are against ways[reference]."""

    title: str
    scenario: Scenario
    endpoint: EndpointSpec
    ways: tuple[Way, ...]
    reference: int
    sweep_requests: int  # the first this many requests are swept (replays may take more: Way.replay_requests)


@dataclass(frozen=True, slots=True)
class WayResult:
    way: Way
    capacity_rps_at_slo: float  # the way's own, from its sweep (requests/s)
    replayed_requests: int
    replayed_rps: float  # requests / arrival span of the replay (requests/s)
    efficiency_cost_per_request_usd: float
    realised_cost_per_request_usd: float
    hit_rate: float  # cached / prompt tokens over the replay (ratio 0-1)
    mean_running_requests: float  # time-weighted over the replay (requests)
    inside_slo: float  # share of the replay's requests inside both SLO parts (ratio 0-1)
    window_s: float  # first arrival to last completion (virtual s)
    cpu_s: float  # process CPU time of the way, its sweep included when it ran one (s)

    @property
    def idle_cost_per_request_usd(self) -> float:
        """What the idle GPU-seconds add to each request (negative would mean loaded past the capacity)."""
        return self.realised_cost_per_request_usd - self.efficiency_cost_per_request_usd


def without_speculative(flags: Sequence[str]) -> tuple[str, ...]:
    """`flags` less every --speculative-* flag and its value: MTP off, everything else as it was."""
    kept: list[str] = []
    skip_value = False
    for arg in flags:
        if skip_value and not arg.startswith("--"):
            skip_value = False
            continue
        skip_value = arg.startswith("--speculative-") and "=" not in arg
        if not arg.startswith("--speculative-"):
            kept.append(arg)
    return tuple(kept)


def sample_rps(requests: Sequence[BenchRequest]) -> float:
    """Requests / arrival span, as SloCapacity.offered_rps counts a sweep's rate."""
    return len(requests) / arrival_span_s(requests)


def sample_slo_capacity(
    flags: Sequence[str], requests: Sequence[BenchRequest], slo_ttft_ms: float, slo_tpot_ms: float
) -> float | None:
    """The capacity at the SLO (requests/s) by the weekly job's sweep rule (search_capacity: the idle reference, the
    bracket, the bisections, on the rate factors of the first MAX_SWEEP_REQUESTS requests), with every loaded probe
    replaying all of `requests` at that factor. With MAX_SWEEP_REQUESTS requests it is sweep_capacity."""
    head = list(requests[:MAX_SWEEP_REQUESTS])
    head_span_s = arrival_span_s(head)

    def share_of(scaled: list[BenchRequest]) -> tuple[float, float]:
        factor = head_span_s / arrival_span_s(scaled)
        # The idle reference stays on the head, as in the weekly job: alone, a request meets the SLO or not.
        replayed = scaled if factor <= IDLE_FACTOR * (1 + 1e-9) else compressed(requests, factor)
        result = run_bench(list(flags), replayed)
        return good_share(result, slo_ttft_ms, slo_tpot_ms), result.mean_running_requests

    found = search_capacity(head, share_of, start_factor=SWEEP_START_FACTOR)
    if found.capacity_rps_at_slo is None:
        return None
    return found.capacity_rps_at_slo / found.offered_rps * sample_rps(requests)


def measure_ways(
    ways: Sequence[Way],
    requests: Sequence[BenchRequest],
    slo_ttft_ms: float,
    slo_tpot_ms: float,
    gpu_count: int,
    usd_per_gpu_hour: float,
    sweep_requests: int | None = None,
) -> list[WayResult]:
    """Each way: its capacity at the SLO on the first `sweep_requests` of `requests` (None: all; ways with the same
    flags share one sweep), then one replay of its share of `requests` at its occupancy of that capacity, priced
    both ways."""
    usd_per_s = gpu_count * usd_per_gpu_hour / 3600
    swept = requests[:sweep_requests]
    capacities: dict[tuple[str, ...], float | None] = {}
    results = []
    for way in ways:
        started_cpu_s = time.process_time()
        if way.flags not in capacities:
            capacities[way.flags] = sample_slo_capacity(way.flags, swept, slo_ttft_ms, slo_tpot_ms)
        capacity_rps = capacities[way.flags]
        if capacity_rps is None:
            raise ValueError(f"{way.label}: no rate keeps the SLO on this traffic, so there is no capacity to load")
        sample = requests[: way.replay_requests]
        replayed = compressed(sample, way.occupancy * capacity_rps / sample_rps(sample))
        bench = run_bench(list(way.flags), replayed)
        prompt_tokens = sum(r.prompt_tokens for r in bench.requests)
        results.append(
            WayResult(
                way=way,
                capacity_rps_at_slo=capacity_rps,
                replayed_requests=len(replayed),
                replayed_rps=sample_rps(replayed),
                efficiency_cost_per_request_usd=usd_per_s / capacity_rps,
                realised_cost_per_request_usd=usd_per_s * bench.duration_s / len(bench.requests),
                hit_rate=sum(r.cached_tokens for r in bench.requests) / prompt_tokens if prompt_tokens else 0.0,
                mean_running_requests=bench.mean_running_requests,
                inside_slo=good_share(bench, slo_ttft_ms, slo_tpot_ms),
                window_s=bench.duration_s,
                cpu_s=time.process_time() - started_cpu_s,
            )
        )
    return results


def comparisons(week: date = WEEK) -> list[Comparison]:
    endpoints = load_endpoint_specs(ENDPOINTS)
    scenarios = load_scenarios(SCENARIOS, REPO, endpoints)
    v3, r1 = scenarios["worked-example-v3"], scenarios["worked-example-r1"]
    v3_endpoint, r1_endpoint = endpoints[v3.endpoint].as_of(week), endpoints[r1.endpoint].as_of(week)
    v3_flags, r1_flags = tuple(v3_endpoint.server_args), tuple(r1_endpoint.server_args)
    low, dense = LOW_OCCUPANCY, DENSE_OCCUPANCY
    low_replay = LOW_OCCUPANCY_REPLAY_REQUESTS
    v3_ways = (
        Way("1. no prefix reuse, low occupancy", (*v3_flags, "--disable-radix-cache"), low, low_replay),
        Way("2. RadixAttention, warm prefix, low occupancy", v3_flags, low, low_replay),
        Way("3. RadixAttention, dense continuous batching", v3_flags, dense),
    )
    r1_ways = (
        Way("MTP on (EAGLE, 3 draft steps), dense", r1_flags, dense),
        Way("MTP off, dense", without_speculative(r1_flags), dense),
    )
    return [
        Comparison("DeepSeek-V3", v3, v3_endpoint, v3_ways, reference=2, sweep_requests=V3_SWEEP_REQUESTS),
        Comparison("DeepSeek-R1", r1, r1_endpoint, r1_ways, reference=0, sweep_requests=R1_SWEEP_REQUESTS),
    ]


def scenario_requests(scenario: Scenario, spool: Path, limit: int | None = None) -> list[BenchRequest]:
    """The scenario's window (its first `limit` requests; None: all), as the replay would send them."""
    traffic = week_traffic(scenario, WEEK, spool)
    window = scenario_workload(scenario, traffic).window(traffic.start_s, traffic.duration_s)
    if limit is not None:
        window = replace(window, table=window.table.slice(0, limit))  # only these are materialized
    return workload_bench_requests(window, min_requests=1)


def _usd(value: float) -> str:
    return f"{value:.5f}"


def _ratio(value: float, reference: float) -> str:
    return f"{value / reference:.2f}x"


COLUMNS = ("way", "capacity req/s at SLO", "replayed requests", "replayed req/s (occupancy)",
           "efficiency USD/request", "realised USD/request", "idle USD/request", "hit rate", "mean running batch",
           "inside SLO", "efficiency vs ref", "realised vs ref", "CPU s")  # fmt: skip


def table_row(result: WayResult, reference: WayResult) -> tuple[str, ...]:
    return (
        result.way.label + (" (ref)" if result is reference else ""),
        f"{result.capacity_rps_at_slo:.2f}",
        f"{result.replayed_requests:,}",
        f"{result.replayed_rps:.2f} ({result.way.occupancy:.0%})",
        _usd(result.efficiency_cost_per_request_usd),
        _usd(result.realised_cost_per_request_usd),
        _usd(result.idle_cost_per_request_usd),
        f"{result.hit_rate:.3f}",
        f"{result.mean_running_requests:.1f}",
        f"{result.inside_slo:.3f}",
        _ratio(result.efficiency_cost_per_request_usd, reference.efficiency_cost_per_request_usd),
        _ratio(result.realised_cost_per_request_usd, reference.realised_cost_per_request_usd),
        f"{result.cpu_s:.1f}",
    )


def print_comparison(comparison: Comparison, results: Sequence[WayResult], usd_per_gpu_hour: float, book: str) -> None:
    endpoint, scenario = comparison.endpoint, comparison.scenario
    reference = results[comparison.reference]
    print(f"\n{comparison.title} on {endpoint.gpu_count}x{endpoint.gpu_type} (endpoint {endpoint.name}: "
          f"{' '.join(endpoint.server_args)}); {book}: USD {usd_per_gpu_hour:.2f} per GPU-hour; SLO TTFT "
          f"{scenario.slo_ttft_ms:.0f} ms, TPOT {scenario.slo_tpot_ms:.0f} ms; scenario {scenario.name}, "
          f"swept on its first {comparison.sweep_requests:,} requests\n")  # fmt: skip
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for result in results:
        print("| " + " | ".join(table_row(result, reference)) + " |")
    efficiency = [r.efficiency_cost_per_request_usd for r in results]
    realised = [r.realised_cost_per_request_usd for r in results]
    costs = efficiency + realised
    print(f"\nband: USD {min(costs):.5f} to {max(costs):.5f} per request ({max(costs) / min(costs):.1f}x); "
          f"efficiency alone {max(efficiency) / min(efficiency):.2f}x, realised alone "
          f"{max(realised) / min(realised):.2f}x")  # fmt: skip


def print_weekly_sweeps(comparison: Comparison, requests: Sequence[BenchRequest]) -> None:
    """What the weekly job's own sweep (sweep_capacity, on the first MAX_SWEEP_REQUESTS) reads for each way's
    flags, where this bench sweeps more."""
    if comparison.sweep_requests == MAX_SWEEP_REQUESTS:
        return
    scenario = comparison.scenario
    for flags in dict.fromkeys(way.flags for way in comparison.ways):
        labels = " and ".join(way.label.split(".")[0] for way in comparison.ways if way.flags == flags)
        found = sweep_capacity(Deployment(tuple(flags), 1), requests[:MAX_SWEEP_REQUESTS], scenario.slo_ttft_ms,
                               scenario.slo_tpot_ms).capacity.capacity_rps_at_slo  # fmt: skip
        print(f"the weekly job's sweep ({MAX_SWEEP_REQUESTS} requests) for way {labels}: "
              f"{'none' if found is None else f'{found:.2f}'} requests/s")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    summary, details = __doc__.split("\n\n", 1)
    parser = argparse.ArgumentParser(description=summary, epilog=details,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--weekly-sweep", action="store_true",
                        help="also print what the weekly job's 300-request sweep reads where this bench sweeps more "
                        "(about 40 s more CPU)")  # fmt: skip
    args = parser.parse_args(argv)
    started_cpu_s = time.process_time()
    print("The runtime's cost band: the worked example, modelled on the twin in virtual time (not measured on GPUs)")
    with tempfile.TemporaryDirectory() as spool:
        for comparison in comparisons():
            usd_per_gpu_hour, book = resolve_gpu_price(comparison.endpoint)
            scenario = comparison.scenario
            requests = scenario_requests(scenario, Path(spool))
            slo = (scenario.slo_ttft_ms, scenario.slo_tpot_ms)
            gpus = comparison.endpoint.gpu_count
            results = measure_ways(comparison.ways, requests, *slo, gpus, usd_per_gpu_hour, comparison.sweep_requests)
            print_comparison(comparison, results, usd_per_gpu_hour, book)
            if args.weekly_sweep:
                print_weekly_sweeps(comparison, requests)
    print(f"\n{time.process_time() - started_cpu_s:.0f} s CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
