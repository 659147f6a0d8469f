"""Routing as a cost lever, measured: the same traffic through one replica, then through a 2-replica fleet behind
the real SGLang router (smg) with round_robin and with cache_aware. Every replica is a `costbench sim` twin on
the wall clock (a model of 8xH200, not a GPU), started by the provisioning code the weekly job uses
(endpoints/provision.py); the replay is replay/runner.py's; the figures are the warehouse's own (run_summary,
run_workers, diagnoses) after a refresh of a scratch warehouse.

    python bench/routing_lever.py                       # the chat canary's stretch, 30 s of trace
    python bench/routing_lever.py --start-s 1620 --duration-s 30 --speedup 1.0

Traffic: the bundled Azure conversation trace behind the chat scenarios' 2,048-token system prompt, the window
given, with its own output lengths. Each configuration starts cold. About 2 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from endpoints.provision import provision  # noqa: E402
from endpoints.router.router_spec import RouterSpec  # noqa: E402
from endpoints.spec import EndpointMode, EndpointSpec, FleetSpec, WorkerGroup, WorkerRole  # noqa: E402
from replay.recording.requests_reader import read_requests  # noqa: E402
from replay.replay_config import ReplayConfig  # noqa: E402
from replay.runner import run_replay  # noqa: E402
from warehouse.backends.store import Warehouse  # noqa: E402
from warehouse.marts.run_rows import RunContext, build_run_row  # noqa: E402
from warehouse.parquet.lake import write_partition  # noqa: E402
from workloads.prompts.shared_prefix import with_shared_prefix  # noqa: E402
from workloads.readers.reader_registry import read_trace  # noqa: E402
from workloads.trace_stats import trace_stats  # noqa: E402

TRACE = REPO / "workloads/traces/azure_conv_2023.csv"
SHARED_PREFIX_TOKENS = 2048  # the chat scenarios' system prompt (workloads/scenarios.yaml)
# Each replica's flags: the chat endpoint's (workloads/endpoints.yaml v3-8xh200-chat), without a warm-up.
REPLICA_ARGS = ("--tp", "8", "--schedule-policy", "lpm", "--stream-interval", "10", "--sim-hardware", "h200",
                "--sim-warmup-s", "0")  # fmt: skip
PRICE_BOOK = "h200-reserved"
WEEK = date(2026, 11, 30)
SLO_TTFT_MS, SLO_TPOT_MS = 1000.0, 100.0  # the chat scenarios' SLO


@dataclass(frozen=True, slots=True)
class Shape:
    name: str  # the scenario name its rows carry
    replicas: int
    policy: str | None  # None: one server, no router


SHAPES = (Shape("one-replica", 1, None), Shape("fleet-round-robin", 2, "round_robin"),
          Shape("fleet-cache-aware", 2, "cache_aware"))  # fmt: skip


def _spec(shape: Shape) -> EndpointSpec:
    fleet = None
    if shape.policy is not None:
        fleet = FleetSpec(RouterSpec(shape.policy), (WorkerGroup(WorkerRole.REGULAR, shape.replicas, 8),))
    return EndpointSpec(f"v3-{shape.name}", EndpointMode.SIM, "deepseek-ai/DeepSeek-V3", REPLICA_ARGS, "H200",
                        8 * shape.replicas, None, price_book=PRICE_BOOK, ready_timeout_s=120.0,
                        fleet=fleet)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--start-s", type=float, default=1620.0, help="window start, s of trace")
    parser.add_argument("--duration-s", type=float, default=30.0, help="window length, s of trace")
    parser.add_argument("--speedup", type=float, default=1.0, help="trace time / replay time")
    args = parser.parse_args(argv)
    workload = with_shared_prefix(read_trace(TRACE, "azure"), SHARED_PREFIX_TOKENS)
    window = workload.window(args.start_s, args.duration_s)
    reuse = trace_stats(window).prefix_reuse_share
    context = RunContext(slo_ttft_ms=SLO_TTFT_MS, slo_tpot_ms=SLO_TPOT_MS, prefix_reuse_share=reuse)
    with tempfile.TemporaryDirectory(prefix="routing-lever-") as scratch:
        store = Warehouse(Path(scratch) / "wh")
        for shape in SHAPES:
            started_s = time.monotonic()
            run_dir = Path(scratch) / shape.name
            spec = _spec(shape)
            with provision(spec, run_dir) as endpoint:
                config = ReplayConfig(url=endpoint.url, start_s=args.start_s, duration_s=args.duration_s,
                                      speedup=args.speedup, run_id=shape.name, request_timeout_s=120.0)  # fmt: skip
                info = run_replay(workload, config, run_dir)
            write_partition(store.lake_root, "runs", WEEK, shape.name,
                            build_run_row(info, spec, shape.name, WEEK, context))  # fmt: skip
            write_partition(store.lake_root, "requests", WEEK, shape.name, read_requests(run_dir))
            print(f"{shape.name}: {info.requests_ok}/{info.requests_total} ok in {time.monotonic() - started_s:.0f} s",
                  file=sys.stderr)  # fmt: skip
        store.refresh()
        _print(store, args, reuse, window.num_requests)
    return 0


def _print(store: Warehouse, args: argparse.Namespace, reuse: float, requests: int) -> None:
    summary = {r.scenario: r for r in store.run_summary()}
    workers: dict[str, list[str]] = {}
    for w in store.run_workers():
        if w.worker is not None:
            workers.setdefault(w.scenario, []).append(f"{w.request_share:.2f} @ {w.prefix_cache_hit_rate:.3f}")
    levers = {d.scenario: d.levers for d in store.diagnoses()}
    print(f"Azure conversation trace, {args.start_s:g} s + {args.duration_s:g} s of trace at speedup {args.speedup:g} "
          f"({requests} requests), {SHARED_PREFIX_TOKENS}-token system prompt; reusable share (one replica, unbounded "
          f"cache) {reuse:.3f}; {PRICE_BOOK}\n")  # fmt: skip
    print(
        "| shape | GPUs | completed | fleet hit rate | p95 TTFT ms | cost per request USD | per worker: share @ hit "
        "rate | diagnoses levers |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for shape in SHAPES:
        r = summary[shape.name]
        label = "1 replica" if shape.policy is None else f"{shape.replicas} x {shape.policy}"
        print(f"| {label} | {r.gpu_count} | {r.completed_requests} | {r.prefix_cache_hit_rate:.3f} | "
              f"{r.p95_ttft_ms:.0f} | {r.realised_cost_per_request_usd:.6f} | "
              f"{'; '.join(workers.get(shape.name, ['-']))} | "
              f"{levers[shape.name]} |")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
