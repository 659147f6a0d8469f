"""What routing costs a fleet's prefix cache: the same requests through the fleet's router model and through one
replica, on the twin, so `diagnoses` can say "routing" only when the fleet trails what one replica realises.

The reuse a trace offers (prefix_reuse_share) is an unbounded cache's: a replica whose KV pool evicts realises
less of it whatever the router does (on the bundled Mooncake window one replica realises 0.107 of the 0.347
offered), so measuring the fleet against it names routing for what eviction did. Here both figures are the
twin's, on the same requests at the same arrivals: the window's first MAX_SWEEP_REQUESTS requests (the capacity
sweep's) at the run's replay rate (trace arrivals / speedup), one cold replica built from the replica's flags
and the fleet of them behind the router's policy model (deployment_bench.py). The difference is what
routing alone loses or gains; one replica's pool is the comparison, so a fleet whose policy spreads a working
set over more pools than one holds can come out ahead (a negative gap).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from common.atomic_file import write_bytes_atomically
from common.run_folder import ROUTING_REFERENCE_FILE as ROUTING_REFERENCE_FILE  # re-exported
from endpoints.capacity.deployment import Deployment
from endpoints.capacity.deployment_bench import bench_deployment, cached_share
from endpoints.capacity.slo_capacity import (
    MAX_SWEEP_REQUESTS,
    SWEEP_RULES,
    compressed,
    sweep_cache_path,
    sweep_requests,
)
from endpoints.router.router_spec import RouterSpec
from endpoints.sim.virtual_bench import BenchRequest
from endpoints.spec import EndpointMode, EndpointSpec
from workloads.workload import Workload

REFERENCE_RULES = ((SWEEP_RULES, "fleet", 2), MAX_SWEEP_REQUESTS, "routing_reference", 1)  # part of the cache key


@dataclass(frozen=True, slots=True)
class RoutingReference:
    requests: int  # requests both replays sent: the window's first ones (count)
    replicas: int  # workers behind the router in the fleet replay (count)
    policy: str  # the router's --policy the fleet replay modelled
    single_replica_hit_rate: float  # cached / prompt tokens on one replica (ratio 0-1)
    fleet_model_hit_rate: float  # cached / prompt tokens on the fleet, the same requests (ratio 0-1)
    cpu_s: float  # process CPU time both replays took (s)


def routing_reference(
    flags: list[str], replicas: int, router_policy: str, router_args: tuple[str, ...], requests: list[BenchRequest]
) -> RoutingReference:
    """Both replays of `requests` (arrivals from 0 as they are to be sent)."""
    started_cpu_s = time.process_time()
    one = Deployment(tuple(flags), gpus_per_worker=1)  # GPUs do not enter a bench: only the flags
    single = cached_share(bench_deployment(one, requests).bench)
    fleet_of = Deployment(tuple(flags), 1, replicas, RouterSpec(router_policy, router_args))
    fleet = cached_share(bench_deployment(fleet_of, requests).bench)
    return RoutingReference(len(requests), replicas, router_policy, single, fleet, time.process_time() - started_cpu_s)


def write_routing_reference_json(path: Path, reference: RoutingReference) -> Path:
    return write_bytes_atomically(Path(path), json.dumps(asdict(reference), indent=2).encode() + b"\n")


def read_routing_reference_json(path: Path) -> RoutingReference | None:
    """The reference written at `path` (a run folder's ROUTING_REFERENCE_FILE), or None when none was."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        return RoutingReference(**json.loads(path.read_bytes()))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{path}: not a costbench routing_reference.json ({exc})") from None


def measure_routing_reference(
    endpoint: EndpointSpec, workload: Workload, speedup: float, cache_dir: Path | None = None
) -> RoutingReference | None:
    """The reference for a run of `workload` on a twin fleet `endpoint` replayed at `speedup`; None where it does
    not apply: one server (nothing to route), a real endpoint (the twin would model it, not measure it), a
    window of fewer than two requests. With `cache_dir`, done once per inputs (both replays are deterministic)."""
    fleet = endpoint.fleet
    if endpoint.mode is not EndpointMode.SIM or fleet is None:
        return None
    if speedup <= 0:
        raise ValueError(f"speedup must be positive, got {speedup}")
    flags = list(endpoint.server_args)
    key = [workload.content_hash, flags, fleet.replicas, fleet.router.policy, list(fleet.router.args), speedup,
           REFERENCE_RULES]  # fmt: skip
    cached = sweep_cache_path(cache_dir, key, prefix="routing-")
    if cached is not None and cached.exists():
        return read_routing_reference_json(cached)
    window = sweep_requests(workload)[:MAX_SWEEP_REQUESTS]
    if len(window) < 2:
        return None
    requests = compressed(window, speedup)  # the trace's arrivals at the replay's rate
    reference = routing_reference(flags, fleet.replicas, fleet.router.policy, fleet.router.args, requests)
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        write_routing_reference_json(cached, reference)
    return reference
