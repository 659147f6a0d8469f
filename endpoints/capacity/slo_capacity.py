"""Capacity at the SLO: the highest request rate an endpoint sustains on a run's own workload, found by a
load sweep in virtual time on the twin.

A run's realised cost per request pays for every GPU-second of its window, idle ones included; the cost
at the SLO capacity is what a request would cost if the endpoint carried as much of the same traffic as
it can while staying inside the scenario's SLO. The gap between the two is the price of idle capacity,
and the capacity sizes the fleet (replicas for target_rps) and places the self-host vs API break-even.

The sweep replays the workload's requests through the twin's engine (endpoints/sim/virtual_bench.py:
the same engine, scheduler, radix cache and cost model as behind HTTP) with arrivals compressed by a
rate factor k (arrival_s / k), open loop, one fresh engine per probe so each starts cold. A rate is
sustained when the share of requests meeting both SLO parts (TTFT from arrival and time per output
token, as run_summary.good_requests counts them) is at least MIN_GOOD_SHARE of the share met when the
endpoint is idle (arrivals spread IDLE_FACTOR times wider): a request whose prompt alone takes longer
to prefill than the TTFT SLO misses it at any load, and must not make every load look unsustainable.
The factor is doubled (or halved) from 1 until the verdict flips, then bisected in log space: a
handful of probes. To keep it to seconds of CPU, the sweep takes the window's first MAX_SWEEP_REQUESTS
requests (a contiguous slice keeps the traffic's shape and prefix sharing). Sessions are replayed by
arrival time alone (no turn waits for the previous one), as a load test does.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from common.atomic_file import write_bytes_atomically
from common.run_folder import CAPACITY_FILE
from endpoints.capacity.deployment import Deployment, deployment_of
from endpoints.capacity.deployment_bench import bench_deployment, cached_share
from endpoints.sim.virtual_bench import BenchRequest, BenchResult
from endpoints.spec import EndpointMode, EndpointSpec
from workloads.prompts.prompt_materializer import materialize_input_ids
from workloads.workload import Workload

MIN_GOOD_SHARE = 0.95  # "sustained": 95% of what the idle endpoint keeps inside the SLO (the p95 convention)
IDLE_FACTOR = 1 / 64  # the idle reference: arrivals spread 64 times wider than the workload's
MAX_FACTOR = 1024.0  # rate factors probed: the workload's own rate x [1/MAX_FACTOR, MAX_FACTOR]
# The window's first requests the sweep replays (CPU grows with the count: 4-7 s a sweep at 300). With 60, the
# bundled chat windows' capacities came out 7.9-40 requests/s; with 300, 5.2-5.6, where replaying the canary's
# whole window at rising rates keeps 95% inside the SLO up to about 5.4.
MAX_SWEEP_REQUESTS = 300
# A sweep is trusted only when its requests turn the running batch over at least this many times at the capacity
# probe (requests / its mean running batch: Little's law with the span n / rate and the residence batch / rate).
# Fewer, and the requests end before the batch settles: a server that runs up to 2,048 requests at once read 126
# requests/s on 300 of a 400-token-answer trace whose capacity is about 5.8 (bench/worked_example.py). A single
# server's sweep that is not settled is swept again on enough of the window (repeated if short), at most
# MAX_SETTLED_REQUESTS; the bundled chat windows turn over about 8 times in 300, the R1 canary's about 4.6. A fleet's
# and a PD fleet's sweeps keep their requests: not checked yet.
MIN_TURNOVERS = 4.0
MAX_SETTLED_REQUESTS = 2400
SETTLE_SWEEPS = 2  # sweeps again at most this many times (a larger batch found asks for more requests)
# After bracketing, bisections to within a factor 2^(1/8) (about 9%); the capacity is then read where the share
# crosses its threshold inside that last bracket (_crossing), so it moves continuously with the engine's speed.
BISECTIONS = 3
# Everything that changes a sweep's answer besides its requests, flags and SLO (part of the cache key).
SWEEP_RULES = (MIN_GOOD_SHARE, IDLE_FACTOR, MAX_FACTOR, MAX_SWEEP_REQUESTS, BISECTIONS, MIN_TURNOVERS, 5)


@dataclass(frozen=True, slots=True)
class CapacityProbe:
    rate_factor: float  # arrivals compressed by this factor (ratio; 1 = the workload's own rate)
    rate_rps: float  # requests / arrival span at that factor (requests/s)
    good_share: float  # requests meeting both SLO parts (ratio 0-1)
    mean_running_requests: float | None = None  # time-weighted mean running batch of one replica (requests)


@dataclass(frozen=True, slots=True)
class SloCapacity:
    capacity_rps_at_slo: float | None  # highest rate found sustained (None: none was, or the idle share is 0)
    offered_rps: float  # the swept requests' own rate: requests / arrival span (requests/s)
    idle_good_share: float  # share inside the SLO on the idle endpoint (ratio 0-1): the reference
    requests: int  # requests the sweep replayed (count)
    probes: tuple[CapacityProbe, ...]  # in the order run
    cpu_s: float  # process CPU time the sweep took (s)
    # How the capacity was found (runs.capacity_source): twin_sweep (this sweep, a twin endpoint's), shadow_twin (a
    # real endpoint's, modelled: endpoints/capacity/shadow_capacity.py) | rate_ramp (a real endpoint's,
    # measured: replay/capacity_ramp.py).
    source: str = "twin_sweep"
    gpu_minutes: float | None = None  # GPU time the measurement held a real endpoint for (None: none, on the twin)

    @property
    def capacity_probe(self) -> int | None:
        """The index of the probe the capacity was read from (the fastest sustained rate; None: none was)."""
        rate_rps = self.capacity_rps_at_slo
        if rate_rps is None or not self.probes:
            return None
        return min(range(len(self.probes)), key=lambda i: abs(self.probes[i].rate_rps - rate_rps))

    @property
    def settled(self) -> bool:
        """Whether the requests turned the running batch over MIN_TURNOVERS times at the capacity probe (True when
        nothing was sustained or the batch was not recorded: nothing to doubt)."""
        running = self.running_requests_at_slo
        return running is None or running <= 0 or self.requests >= MIN_TURNOVERS * running

    @property
    def running_requests_at_slo(self) -> float | None:
        """One replica's mean running batch at the capacity probe: the batch the endpoint runs when it carries its
        capacity inside the SLO (None: no rate sustained, or not recorded)."""
        at = self.capacity_probe
        return None if at is None else self.probes[at].mean_running_requests


@dataclass(frozen=True, slots=True)
class FleetCapacity:
    """A deployment's sweep, with what its router did at the capacity probe."""

    replicas: int  # workers routed to (count; a disaggregated fleet's prefill workers)
    policy: str  # smg's --policy ("none": one server)
    capacity: SloCapacity  # the sweep, its rates the deployment's (requests/s)
    hit_rate: float | None  # cached ÷ prompt tokens at the capacity probe (ratio 0-1; None: no rate sustained)
    worker_shares: tuple[float, ...]  # share of requests each worker served at the capacity probe (ratio 0-1)
    p95_ttft_ms: float | None  # TTFT from arrival at the capacity probe, 95th percentile (ms)


def good_share(result: BenchResult, slo_ttft_ms: float, slo_tpot_ms: float) -> float:
    """Share of requests with TTFT <= slo_ttft_ms and time per output token <= slo_tpot_ms."""
    good = 0
    for r in result.requests:
        tpot_ms = (r.e2e_s - r.ttft_s) * 1000 / (r.output_tokens - 1) if r.output_tokens > 1 else 0.0
        if r.ttft_s * 1000 <= slo_ttft_ms and tpot_ms <= slo_tpot_ms:
            good += 1
    return good / len(result.requests)


def compressed(requests: Sequence[BenchRequest], factor: float) -> list[BenchRequest]:
    """The requests with arrivals counted from the first and compressed by `factor` (arrival_s / factor)."""
    first_s = min(r.arrival_s for r in requests)
    return [BenchRequest(r.input_ids, r.output_tokens, (r.arrival_s - first_s) / factor) for r in requests]


def arrival_span_s(requests: Sequence[BenchRequest]) -> float:
    arrivals = [r.arrival_s for r in requests]
    return max(arrivals) - min(arrivals)


def sweep_capacity(
    deployment: Deployment,
    requests: Sequence[BenchRequest],
    slo_ttft_ms: float,
    slo_tpot_ms: float,
    start_factor: float = 1.0,
    bisections: int = BISECTIONS,
    max_requests: int = MAX_SWEEP_REQUESTS,
) -> FleetCapacity:
    """The highest rate (requests/s) at which the deployment (deployment_bench.py) keeps MIN_GOOD_SHARE of the idle
    share of `requests` inside the SLO, by doubling then bisecting the arrival rate factor from `start_factor`,
    with the hit rate, worker shares and p95 TTFT at the capacity probe."""
    seen: list[tuple[float, tuple[float, ...], float]] = []  # (hit rate, worker shares, p95 TTFT), probe order
    routed = deployment.prefill_workers or deployment.workers  # a disaggregated fleet's shares: its prefill workers'

    def share_of(scaled: list[BenchRequest]) -> tuple[float, float]:
        result = bench_deployment(deployment, scaled)
        counts = [result.workers.count(w) for w in range(routed)]
        seen.append((cached_share(result.bench), tuple(c / len(scaled) for c in counts), p95_ttft_ms(result.bench)))
        return good_share(result.bench, slo_ttft_ms, slo_tpot_ms), result.mean_running_per_replica

    capacity = search_capacity(requests, share_of, bisections, start_factor, max_requests)
    at = capacity.capacity_probe
    found = None if at is None else seen[at]
    return FleetCapacity(
        replicas=routed,
        policy=deployment.policy,
        capacity=capacity,
        hit_rate=None if found is None else found[0],
        worker_shares=() if found is None else found[1],
        p95_ttft_ms=None if found is None else found[2],
    )


def p95_ttft_ms(result: BenchResult) -> float:
    """TTFT from arrival, 95th percentile, nearest rank (ms)."""
    ttfts_ms = sorted(r.ttft_s * 1000 for r in result.requests)
    return ttfts_ms[min(len(ttfts_ms) - 1, math.ceil(0.95 * len(ttfts_ms)) - 1)]


def search_capacity(
    requests: Sequence[BenchRequest],
    share_of: Callable[[list[BenchRequest]], tuple[float, float]],
    bisections: int = BISECTIONS,
    start_factor: float = 1.0,
    max_requests: int = MAX_SWEEP_REQUESTS,
) -> SloCapacity:
    """The sweep itself, for any server model: `share_of(scaled)` replays the requests (arrivals already
    compressed, counted from 0) on a fresh, cold model and returns the share inside the SLO and one replica's
    mean running batch (sweep_capacity: any deployment). The bracket starts at
    `start_factor` (a fleet plan starts near the rate it expects, saving the doublings up to it)."""
    requests = sorted(requests, key=lambda r: r.arrival_s)[:max_requests]
    if len(requests) < 2 or arrival_span_s(requests) <= 0:
        raise ValueError("a capacity sweep needs at least two requests arriving at different times")
    started_cpu_s = time.process_time()
    span_s = arrival_span_s(requests)
    probes: list[CapacityProbe] = []

    def share_at(factor: float) -> float:
        share, running = share_of(compressed(requests, factor))
        probes.append(CapacityProbe(factor, len(requests) * factor / span_s, share, running))
        return share

    idle_share = share_at(IDLE_FACTOR)
    offered_rps = len(requests) / span_s
    if idle_share == 0:
        return SloCapacity(None, offered_rps, 0.0, len(requests), tuple(probes), time.process_time() - started_cpu_s)

    def probe(factor: float) -> bool:
        return share_at(factor) >= MIN_GOOD_SHARE * idle_share

    # Bracket: `good` sustained, `bad` not (None: not found inside the probed range).
    good: float | None
    bad: float | None
    start_factor = min(max(start_factor, IDLE_FACTOR * 2), MAX_FACTOR)
    if probe(start_factor):
        good, bad = start_factor, None
        while good < MAX_FACTOR:
            if not probe(good * 2):
                bad = good * 2
                break
            good *= 2
    else:
        good, bad = None, start_factor
        while bad > IDLE_FACTOR:
            if probe(bad / 2):
                good = bad / 2
                break
            bad /= 2
    if good is not None and bad is not None:
        for _ in range(bisections):
            middle = math.sqrt(good * bad)
            if probe(middle):
                good = middle
            else:
                bad = middle
    crossing = good if good is None or bad is None else _crossing(probes, good, bad, MIN_GOOD_SHARE * idle_share)
    return SloCapacity(
        capacity_rps_at_slo=None if crossing is None else offered_rps * crossing,
        offered_rps=offered_rps,
        idle_good_share=idle_share,
        requests=len(requests),
        probes=tuple(probes),
        cpu_s=time.process_time() - started_cpu_s,
    )


def _crossing(probes: Sequence[CapacityProbe], good: float, bad: float, needed_share: float) -> float:
    """Where the share inside the SLO falls to `needed_share` between the last sustained factor and the first
    unsustained one, linear in log(factor). The bracket alone would step by its width (2^(1/2^bisections)): a run
    a few percent slower would read the same capacity as its neighbour, or one whole step lower, so the gate
    could not see run-to-run variation or a change smaller than the step."""
    share = {p.rate_factor: p.good_share for p in probes}
    above, below = share[good], share[bad]
    if above <= below:  # not monotone between the two (sampling noise): the bracket's low end
        return good
    weight = min(max((above - needed_share) / (above - below), 0.0), 1.0)
    return math.exp(math.log(good) + weight * (math.log(bad) - math.log(good)))


def sweep_requests(workload: Workload) -> list[BenchRequest]:
    """The requests a sweep replays: the window's first MAX_SWEEP_REQUESTS, and only those materialized (the
    table is sorted by arrival): a long window's thousands of prompts would cost more than the sweep."""
    return workload_bench_requests(replace(workload, table=workload.table.slice(0, MAX_SWEEP_REQUESTS)))


def workload_bench_requests(workload: Workload, min_requests: int = MAX_SWEEP_REQUESTS) -> list[BenchRequest]:
    """The workload's requests as the replay sends them: the same materialized token ids (so shared
    prefixes hit the twin's radix cache as they hit the server's), output lengths and arrivals.

    A window of fewer than `min_requests` is repeated until it has that many, each copy after the last
    (shifted by the window's span plus one mean gap) and materialized with another seed, so a copy shares
    prefixes within itself as the trace does, never with an earlier copy: a short burst alone always
    fits in the queue, and would make any rate look sustainable."""
    outputs = [int(o) for o in workload.table.column("output_tokens").to_pylist()]
    arrivals = [float(t) for t in workload.table.column("arrival_s").to_pylist()]
    if not arrivals:
        return []
    span_s = max(arrivals) - min(arrivals)
    shift_s = span_s + span_s / max(len(arrivals) - 1, 1)
    requests: list[BenchRequest] = []
    copy = 0
    while copy == 0 or (len(requests) < min_requests and shift_s > 0):
        ids = materialize_input_ids(workload, seed=copy)
        requests += [BenchRequest(tuple(a.tolist()), o, t + copy * shift_s) for a, o, t in zip(ids, outputs, arrivals)]
        copy += 1
    return requests


def write_capacity_json(run_dir: Path, capacity: SloCapacity, name: str = CAPACITY_FILE) -> Path:
    body = {
        "capacity_rps_at_slo": capacity.capacity_rps_at_slo,
        "offered_rps": capacity.offered_rps,
        "idle_good_share": capacity.idle_good_share,
        "requests": capacity.requests,
        "cpu_s": capacity.cpu_s,
        "probes": [asdict(p) for p in capacity.probes],
        "source": capacity.source,
        "gpu_minutes": capacity.gpu_minutes,
    }
    return write_bytes_atomically(Path(run_dir) / name, json.dumps(body, indent=2).encode() + b"\n")


def read_capacity_json(run_dir: Path, name: str = CAPACITY_FILE) -> SloCapacity | None:
    """The sweep's result for a run, or None when no sweep ran for it."""
    path = Path(run_dir) / name
    if not path.exists():
        return None
    try:
        raw = json.loads(path.read_bytes())
        return SloCapacity(
            capacity_rps_at_slo=raw["capacity_rps_at_slo"],
            offered_rps=raw["offered_rps"],
            idle_good_share=raw["idle_good_share"],
            requests=raw["requests"],
            probes=tuple(CapacityProbe(**p) for p in raw["probes"]),
            cpu_s=raw["cpu_s"],
            source=raw.get("source", "twin_sweep"),  # files from before real endpoints' capacities: the sweep's
            gpu_minutes=raw.get("gpu_minutes"),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a costbench capacity.json ({exc})") from None


def sweep_cache_path(cache_dir: Path | None, key_parts: list, prefix: str = "") -> Path | None:
    """Where a sweep with these inputs is kept (a hash of them), or None without a cache folder."""
    if cache_dir is None:
        return None
    return Path(cache_dir) / f"{prefix}{hashlib.sha256(json.dumps(key_parts).encode()).hexdigest()[:24]}.json"


def sweepable_requests(workload: Workload) -> list[BenchRequest] | None:
    """The sweep's requests of a window, or None when the ones it sweeps have fewer than two distinct arrivals."""
    requests = sweep_requests(workload)
    if len(requests) < 2 or arrival_span_s(requests[:MAX_SWEEP_REQUESTS]) <= 0:
        return None
    return requests


def measure_capacity(
    endpoint: EndpointSpec,
    workload: Workload,
    slo_ttft_ms: float,
    slo_tpot_ms: float,
    cache_dir: Path | None = None,
) -> SloCapacity | None:
    """The sweep for a run of `workload` on `endpoint` (one server, a fleet or a PD fleet: deployment_of), on twins
    with the endpoint's flags; None where it does not apply: a real endpoint (the twin would be a model of it, not a
    measurement), or a window with fewer than two distinct arrivals. With `cache_dir`, a sweep of the same requests,
    deployment and SLO is done once (the twin and the policy model are deterministic): a canary's fixed window is
    swept again only when its configuration changes. One server's sweep that has not settled is swept again on more
    of the window; a fleet's and a PD fleet's are not checked yet."""
    if endpoint.mode is not EndpointMode.SIM:
        return None
    deployment = deployment_of(endpoint)
    key = [workload.content_hash, asdict(deployment), slo_ttft_ms, slo_tpot_ms, SWEEP_RULES]
    cached = sweep_cache_path(cache_dir, key, prefix="sweep-")
    if cached is not None and cached.exists():
        return read_fleet_capacity_json(cached).capacity
    requests = sweepable_requests(workload)
    if requests is None:
        return None
    fleet = sweep_capacity(deployment, requests, slo_ttft_ms, slo_tpot_ms)
    for _ in range(SETTLE_SWEEPS if deployment.router is None else 0):  # too few requests to settle: again, on more
        running = fleet.capacity.running_requests_at_slo
        wanted = 0 if running is None else min(MAX_SETTLED_REQUESTS, math.ceil(MIN_TURNOVERS * running))
        if fleet.capacity.settled or wanted <= fleet.capacity.requests:
            break
        more = workload_bench_requests(workload, wanted)[:wanted]
        fleet = sweep_capacity(deployment, more, slo_ttft_ms, slo_tpot_ms, max_requests=wanted)
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        write_fleet_capacity_json(cached, fleet)
    return fleet.capacity


def write_fleet_capacity_json(path: Path, fleet: FleetCapacity) -> Path:
    body = {
        "replicas": fleet.replicas,
        "policy": fleet.policy,
        "hit_rate": fleet.hit_rate,
        "worker_shares": list(fleet.worker_shares),
        "p95_ttft_ms": fleet.p95_ttft_ms,
        "capacity": {**asdict(fleet.capacity), "probes": [asdict(p) for p in fleet.capacity.probes]},
    }
    return write_bytes_atomically(path, json.dumps(body, indent=2).encode() + b"\n")


def read_fleet_capacity_json(path: Path) -> FleetCapacity:
    try:
        raw = json.loads(Path(path).read_bytes())
        cap = raw["capacity"]
        capacity = SloCapacity(**{**cap, "probes": tuple(CapacityProbe(**p) for p in cap["probes"])})
        return FleetCapacity(
            raw["replicas"], raw["policy"], capacity, raw["hit_rate"], tuple(raw["worker_shares"]), raw["p95_ttft_ms"]
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a costbench capacity sweep file ({exc})") from None
