"""Routing as a lever on multi-turn traffic, in virtual time: a long window of the bundled Mooncake conversation
trace through one replica, then through a fleet of N replicas behind the router's policy model (round_robin,
cache_aware, prefix_hash), all on one virtual clock (endpoints/capacity/deployment_bench.py:
the twin's engine, scheduler, radix cache and cost model, and smg 1.13.0's routing as endpoints/router/ models it).
No process, no HTTP: the latencies are the twin's model of DeepSeek-V3 on 8xH200, not a GPU's.

    python bench/routing_lever_sessions.py                          # 1,800 s of trace, 4 replicas, speedup 0.8
    python bench/routing_lever_sessions.py --routers "cache_aware,prefix_hash --prefix-token-count 1024"
    python bench/routing_lever_sessions.py --measure-capacity       # the saturated rate the speedup is chosen from

Traffic: the trace's requests in [start, start + duration) with their own lengths and prefix blocks, token ids
materialized as the capacity sweep does (slo_capacity.workload_bench_requests, seed 0), arrivals divided by the
speedup. A conversation is the requests sharing a second prefix block (every request shares the first, one
512-token system block), so all reuse beyond that block stays inside a conversation.

The one replica sees what one fleet worker sees: every N-th conversation (by first arrival), whole, at the same
speedup, so it carries 1/N of the requests at the same per-GPU rate with the same minutes between turns. Its hit
rate is what one cache (one KV pool) realises on a conversation mix of a fleet worker's size: the figure a fleet
with perfect conversation affinity would reach. (The other reading, all the requests through one replica at 1/N
of the rate, puts N workers' conversations in one KV pool and stretches every turn gap N times: it measures
eviction, not routing: `--one-replica all`. On the default window it realised 0.047, below 4 x round_robin.)

The speedup (trace time / replay time): the default 0.8 puts the 4-replica fleet at about 62% of its capacity.
Capacity here is the saturated rate, requests / span with the arrivals compressed 16 times so the queue never
empties; `--measure-capacity` prints it for one replica on its share and the speedup for 65%. On the default
window (measured 2026-12-02): 1.02 requests/s a replica, so 4.1 for the fleet, against the window's 3.18
requests/s at speedup 1, 2.54 at 0.8. A saturated replica realises less of the reuse, so this is a cold-cache
capacity and the true load a little lower. The chat SLO cannot be the yardstick: prompts here are 12,000 tokens on
average (p95 40,000), and even at speedup 0.1 (8% load) one replica keeps only 61% of requests inside 1 s TTFT and
100 ms per output token. No --sim-warmup-s: it only holds the HTTP server's /health at 503, and nothing listens here.

Cost per request: GPUs x USD/GPU-hour (the h200-reserved book in warehouse/prices.yaml) x the virtual span (first
arrival to last completion) / requests, as run_summary prices a run's measured window. About 2 minutes of
CPU and 3.4 GB of memory on the default window (the prompts' token ids are Python tuples).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from endpoints.capacity.deployment import Deployment  # noqa: E402
from endpoints.capacity.deployment_bench import bench_deployment, cached_share  # noqa: E402
from endpoints.capacity.slo_capacity import good_share, workload_bench_requests  # noqa: E402
from endpoints.router.policy_params import UnmodelledRouting, parse_router_spec  # noqa: E402
from endpoints.router.router_spec import RouterSpec  # noqa: E402
from endpoints.sim.virtual_bench import BenchRequest  # noqa: E402
from warehouse.marts.price_table import load_price_table  # noqa: E402
from workloads.readers.reader_registry import read_trace  # noqa: E402
from workloads.trace_stats import trace_stats  # noqa: E402
from workloads.workload import Workload  # noqa: E402

TRACE = REPO / "workloads/traces/mooncake_conversation.jsonl"
# Each replica's flags: the chat endpoint's (workloads/endpoints.yaml v3-8xh200-chat; bench/routing_lever.py).
REPLICA_FLAGS = ["--tp", "8", "--schedule-policy", "lpm", "--stream-interval", "10", "--sim-hardware", "h200"]
GPUS_PER_REPLICA = 8
PRICE_BOOK = "h200-reserved"
SLO_TTFT_MS, SLO_TPOT_MS = 1000.0, 100.0  # the chat scenarios' SLO, for the "inside chat SLO" column only
SATURATING_COMPRESSION = 16.0  # --measure-capacity: arrivals this many times faster keep the queue full
TARGET_LOAD = 0.65  # --measure-capacity: the share of capacity the suggested speedup aims at
ROUTERS = ("round_robin", "cache_aware", "prefix_hash")  # each at smg's defaults


@dataclass(frozen=True, slots=True)
class Shape:
    label: str
    replicas: int
    router: RouterSpec  # one replica is routed by it trivially


@dataclass(frozen=True, slots=True)
class ShapeResult:
    shape: Shape
    requests: int
    hit_rate: float  # cached / prompt tokens over every request (ratio 0-1)
    p95_ttft_ms: float  # TTFT from arrival, nearest-rank 95th percentile (ms)
    inside_slo: float  # requests inside both SLO parts (ratio 0-1)
    span_s: float  # virtual time from the first arrival to the last completion (s)
    realised_cost_per_request_usd: float
    worker_shares: tuple[float, ...]  # share of requests each worker served (ratio 0-1)
    cpu_s: float  # process CPU time the replay took (s)


def conversation_keys(workload: Workload) -> list[int]:
    """Each request's conversation: its second prefix block (the first is the system block every request
    shares); a request of one block is a conversation of its own (a negative key, its row)."""
    blocks = workload.table.column("prefix_blocks").to_pylist()
    return [b[1] if b is not None and len(b) > 1 else -1 - row for row, b in enumerate(blocks)]


def one_worker_share(keys: Sequence[int], replicas: int) -> list[int]:
    """The rows of every `replicas`-th conversation in order of first arrival (rows are in arrival order)."""
    ordinal: dict[int, int] = {}
    for key in keys:
        ordinal.setdefault(key, len(ordinal))
    return [row for row, key in enumerate(keys) if ordinal[key] % replicas == 0]


def slowed(requests: Sequence[BenchRequest], speedup: float) -> list[BenchRequest]:
    return [replace(r, arrival_s=r.arrival_s / speedup) for r in requests]


def replay(shape: Shape, requests: Sequence[BenchRequest], usd_per_gpu_hour: float) -> ShapeResult:
    started_cpu_s = time.process_time()
    fleet = Deployment(tuple(REPLICA_FLAGS), GPUS_PER_REPLICA, shape.replicas, shape.router)
    result = bench_deployment(fleet, requests)
    bench = result.bench
    ttfts_ms = sorted(r.ttft_s * 1000 for r in bench.requests)
    gpus = GPUS_PER_REPLICA * shape.replicas
    return ShapeResult(
        shape=shape,
        requests=len(requests),
        hit_rate=cached_share(bench),
        p95_ttft_ms=ttfts_ms[math.ceil(0.95 * len(ttfts_ms)) - 1],
        inside_slo=good_share(bench, SLO_TTFT_MS, SLO_TPOT_MS),
        span_s=bench.duration_s,
        realised_cost_per_request_usd=gpus * usd_per_gpu_hour * bench.duration_s / 3600 / len(requests),
        worker_shares=tuple(result.workers.count(w) / len(requests) for w in range(shape.replicas)),
        cpu_s=time.process_time() - started_cpu_s,
    )


def book_usd_per_gpu_hour(name: str) -> float:
    for book in load_price_table(REPO / "warehouse/prices.yaml").books:
        if book.name == name:
            return book.usd_per_gpu_hour
    raise SystemExit(f"warehouse/prices.yaml has no price book {name!r}")


def main(argv: list[str] | None = None) -> int:
    summary, details = __doc__.split("\n\n", 1)
    parser = argparse.ArgumentParser(description=summary, epilog=details,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--start-s", type=float, default=0.0, help="window start, s of trace (default 0)")
    parser.add_argument("--duration-s", type=float, default=1800.0, help="window length, s of trace (default 1800)")
    parser.add_argument("--speedup", type=float, default=0.8, help="trace time / replay time (default 0.8)")
    parser.add_argument("--replicas", type=int, default=4, help="the fleet's replicas, N (default 4)")
    parser.add_argument("--routers", default=",".join(ROUTERS),
                        help="the fleets' routers, comma-separated, each smg's --policy value and any other "
                        "smg flags, e.g. 'cache_aware,prefix_hash --prefix-token-count 1024' "
                        "(default: %(default)s)")  # fmt: skip
    parser.add_argument("--one-replica", choices=("share", "all"), default="share",
                        help="share: every N-th conversation at the fleet's speedup (default); all: every request "
                        "at 1/N of the fleet's speedup, in one KV pool")  # fmt: skip
    parser.add_argument("--measure-capacity", action="store_true", help="print the saturated rate and stop")
    args = parser.parse_args(argv)
    if args.speedup <= 0 or args.replicas < 2:
        parser.error("--speedup must be positive and --replicas at least 2")
    share = args.one_replica == "share"
    one_label = f"1/{args.replicas} of conversations" if share else f"all at 1/{args.replicas} rate"
    shapes = [Shape(f"1 replica ({one_label})", 1, RouterSpec("round_robin"))]
    for line in filter(None, (part.split() for part in args.routers.split(","))):
        shapes.append(Shape(f"{args.replicas} x {' '.join(line)}", args.replicas, RouterSpec(line[0], tuple(line[1:]))))
    for shape in shapes:
        try:
            parse_router_spec(shape.router)  # refuse routing the model lacks before minutes of work
        except UnmodelledRouting as exc:
            parser.error(str(exc))
    workload = read_trace(TRACE, "mooncake").window(args.start_s, args.duration_s)
    if workload.num_requests < 2:
        parser.error("the window holds fewer than two requests")
    usd_per_gpu_hour = book_usd_per_gpu_hour(PRICE_BOOK)
    started_cpu_s = time.process_time()
    requests = workload_bench_requests(workload, min_requests=1)  # min 1: the window as is, never repeated
    one_share = [requests[row] for row in one_worker_share(conversation_keys(workload), args.replicas)]
    print(f"materialized {len(requests)} prompts in {time.process_time() - started_cpu_s:.0f} s CPU", file=sys.stderr)
    if args.measure_capacity:
        return _measure_capacity(args, workload, one_share, usd_per_gpu_hour)

    results = []
    for shape in shapes:
        traffic, speedup = requests, args.speedup
        if shape.replicas == 1:
            traffic, speedup = (one_share, speedup) if share else (requests, speedup / args.replicas)
        result = replay(shape, slowed(traffic, speedup), usd_per_gpu_hour)
        print(f"{shape.label}: {result.cpu_s:.0f} s CPU", file=sys.stderr)
        results.append(result)
    _print(args, workload, results)
    return 0


def _measure_capacity(
    args: argparse.Namespace, workload: Workload, one_share: list[BenchRequest], usd_per_gpu_hour: float
) -> int:
    saturated = replay(Shape("1 replica, saturated", 1, RouterSpec("round_robin")),
                       slowed(one_share, SATURATING_COMPRESSION), usd_per_gpu_hour)  # fmt: skip
    capacity_rps = saturated.requests / saturated.span_s
    trace_rps = workload.num_requests / args.duration_s
    speedup = TARGET_LOAD * args.replicas * capacity_rps / trace_rps
    print(f"one replica on its share ({saturated.requests} requests, arrivals {SATURATING_COMPRESSION:g}x compressed): "
          f"{capacity_rps:.3f} requests/s, hit rate {saturated.hit_rate:.3f}, {saturated.cpu_s:.0f} s CPU")  # fmt: skip
    print(f"the window offers {trace_rps:.3f} requests/s at speedup 1: {args.replicas} replicas at {TARGET_LOAD:.0%} "
          f"of capacity need speedup {speedup:.2f}")  # fmt: skip
    return 0


def _print(args: argparse.Namespace, workload: Workload, results: list[ShapeResult]) -> None:
    reuse = trace_stats(workload).prefix_reuse_share
    one = results[0]
    print(f"\nMooncake conversation trace, {args.start_s:g} s + {args.duration_s:g} s of trace "
          f"({workload.num_requests} requests) at speedup {args.speedup:g}; reusable share (one unbounded cache, "
          f"the diagnosis's bound) {reuse:.3f}; what one cache would realise (the 1-replica row): "
          f"{one.hit_rate:.3f}; {PRICE_BOOK}\n")  # fmt: skip
    print("| shape | GPUs | requests | fleet hit rate | p95 TTFT ms | inside chat SLO | cost per request USD | "
          "per-worker share of requests |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        shares = "-" if r.shape.replicas == 1 else " / ".join(f"{s:.2f}" for s in r.worker_shares)
        print(f"| {r.shape.label} | {GPUS_PER_REPLICA * r.shape.replicas} | {r.requests} | {r.hit_rate:.3f} | "
              f"{r.p95_ttft_ms:.0f} | {r.inside_slo:.3f} | {r.realised_cost_per_request_usd:.6f} | "
              f"{shares} |")  # fmt: skip
    print()
    for r in results[1:]:
        print(f"{r.shape.label}: {100 * (one.hit_rate - r.hit_rate):+.1f} points below one cache, "
              f"{100 * (reuse - r.hit_rate):+.1f} below the reusable share (routing lever at 20)")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
