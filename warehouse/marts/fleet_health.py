"""Which of a run's workers served, for how long, and whether one was lost: the runs columns `workers_json`,
`degraded` and `degraded_reason` (warehouse/parquet/run_columns.py).

Two witnesses, both recorded while the run went on. The probes scraped every worker (and a fleet's router) once a
tick and wrote whether each scrape got an HTTP answer (server_samples rows of kind `health`,
endpoints/probes/probe_session.py): from them, how long each source answered inside the measured window. The
replay's records name the worker smg routed each request to (requests.worker): from them, how many requests each
worker completed and failed, and when it served its first and last. A source that answered none of
LOST_AFTER_MISSES consecutive scrapes whose time reaches into the window was lost: the run is `degraded`, and the
reason names it, when it stopped answering and for how long. Its cost is still the window's (every GPU was paid
for), so its figures hold a fleet that was not whole: the runs are flagged, not dropped.

    health = fleet_health(run_info, server_samples, requests)
    health.degraded, health.reason, health.workers_json()
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import pyarrow as pa
import pyarrow.compute as pc

from endpoints.probes.probe_records import ANSWERED_KIND, ANSWERED_METRIC
from replay.recording.records import RequestStatus, RunInfo

LOST_AFTER_MISSES = 3  # consecutive unanswered scrapes: one or two are a slow /metrics, three a source gone
_ROLE_WORDS = {"worker": "worker", "prefill": "prefill worker", "decode": "decode worker", "server": "server",
               "router": "router"}  # fmt: skip
_ROLE_ORDER = ("router", "prefill", "decode", "worker", "server")
_FAILED = (RequestStatus.ERROR.value, RequestStatus.TIMEOUT.value)


@dataclass(frozen=True, slots=True)
class WorkerHealth:
    """One worker (or the router) of a run; times are seconds into the measured window (from t0 + warmup_s)."""

    worker: str  # its URL (the router: its metrics URL, without /metrics)
    role: str  # router | prefill | decode | worker | server (server_samples.role)
    answered_s: float | None  # inside the window, how long its latest scrape had an answer (None: not probed)
    unanswered_s: float | None  # inside the window, how long its latest scrape had none
    lost_from_s: float | None  # the start of its first run of LOST_AFTER_MISSES unanswered scrapes (None: never)
    completed_requests: int  # requests.worker named it, status ok, not warm-up
    failed_requests: int  # the same, status error or timeout
    first_served_s: float | None  # finish of its first completed request
    last_served_s: float | None  # finish of its last completed request


@dataclass(frozen=True, slots=True)
class FleetHealth:
    workers: tuple[WorkerHealth, ...]
    degraded: bool | None  # a source was lost inside the window; None: the probes recorded no answers to judge by
    reason: str | None  # each lost source in words (None unless degraded)

    def workers_json(self) -> str | None:
        """The runs.workers_json text: one object per worker, as WorkerHealth's fields (None: no worker known)."""
        if not self.workers:
            return None
        return json.dumps([asdict(w) for w in self.workers], separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class _Source:
    url: str
    role: str
    ticks: tuple[tuple[float, bool], ...]  # (sample_wall_s, answered), in time order


def fleet_health(run: RunInfo, samples: pa.Table, requests: pa.Table) -> FleetHealth:
    """`samples`: the run's server_samples (any rows: only kind health are read); `requests`: its records (at least
    worker, status, is_warmup, finish_mono_s)."""
    window_s = run.window_s if run.window_s and run.window_s > 0 else None
    start_wall_s = run.t0_wall_s + run.warmup_s
    sources = _sources(samples, run.run_id)
    served = _served(requests, run.warmup_s)
    workers: list[WorkerHealth] = []
    for source in sources:
        answered_s, unanswered_s, lost_from_s = (
            _answered(source.ticks, start_wall_s, window_s) if window_s is not None else (None, None, None)
        )
        completed, failed, first_s, last_s = served.pop(source.url, (0, 0, None, None))
        workers.append(WorkerHealth(source.url, source.role, answered_s, unanswered_s, lost_from_s, completed, failed,
                                    first_s, last_s))  # fmt: skip
    for url, (completed, failed, first_s, last_s) in sorted(served.items()):
        # named by the router, never probed (not scraped, or under another URL)
        workers.append(WorkerHealth(url, "worker", None, None, None, completed, failed, first_s, last_s))
    workers.sort(key=lambda w: (_ROLE_ORDER.index(w.role) if w.role in _ROLE_ORDER else len(_ROLE_ORDER), w.worker))
    if window_s is None or not sources:
        return FleetHealth(tuple(workers), None, None)
    lost = [w for w in workers if w.lost_from_s is not None]
    reason = "; ".join(_lost_words(w, window_s) for w in lost) or None
    return FleetHealth(tuple(workers), bool(lost), reason)


def _sources(samples: pa.Table, run_id: str) -> list[_Source]:
    answered = pc.and_(
        pc.and_(pc.equal(samples["kind"], ANSWERED_KIND), pc.equal(samples["metric"], ANSWERED_METRIC)),
        pc.equal(samples["run_id"], run_id),
    )
    rows = samples.filter(answered).select(["sample_wall_s", "source_url", "value", "role"]).to_pylist()
    ticks: dict[tuple[str, str], list[tuple[float, bool]]] = {}
    for row in rows:
        ticks.setdefault((row["source_url"], row["role"] or "server"), []).append(
            (row["sample_wall_s"], row["value"] > 0)
        )
    return [_Source(url, role, tuple(sorted(found))) for (url, role), found in ticks.items()]


def _answered(
    ticks: tuple[tuple[float, bool], ...], start_wall_s: float, window_s: float
) -> tuple[float, float, float | None]:
    """(answered_s, unanswered_s, lost_from_s) inside [start, start + window_s): each scrape's outcome holds until
    the next scrape (the last one's until the window's end)."""
    end_wall_s = start_wall_s + window_s
    held = {True: 0.0, False: 0.0}
    for i, (at_s, answered) in enumerate(ticks):
        until_s = ticks[i + 1][0] if i + 1 < len(ticks) else end_wall_s
        held[answered] += max(0.0, min(until_s, end_wall_s) - max(at_s, start_wall_s))
    lost_from_s = None
    misses = 0
    for i, (_, answered) in enumerate(ticks):
        misses = 0 if answered else misses + 1
        if misses < LOST_AFTER_MISSES:
            continue
        first_s = ticks[i - misses + 1][0]
        until_s = ticks[i + 1][0] if i + 1 < len(ticks) else end_wall_s
        if first_s < end_wall_s and until_s > start_wall_s:  # the unanswered stretch reaches into the window
            lost_from_s = max(0.0, first_s - start_wall_s)
            break
    return round(held[True], 3), round(held[False], 3), None if lost_from_s is None else round(lost_from_s, 3)


def _served(requests: pa.Table, warmup_s: float) -> dict[str, tuple[int, int, float | None, float | None]]:
    """worker URL -> (completed, failed, first served, last served), of the measured requests that named one."""
    columns = requests.select(["worker", "status", "is_warmup", "finish_mono_s"]).to_pydict()
    found: dict[str, list] = {}
    for worker, status, warmup, finish_s in zip(
        columns["worker"], columns["status"], columns["is_warmup"], columns["finish_mono_s"], strict=True
    ):
        if worker is None or warmup:
            continue
        counts = found.setdefault(worker, [0, 0, None, None])
        if status == RequestStatus.OK.value:
            counts[0] += 1
            if finish_s is not None:
                at_s = round(finish_s - warmup_s, 3)
                counts[2] = at_s if counts[2] is None else min(counts[2], at_s)
                counts[3] = at_s if counts[3] is None else max(counts[3], at_s)
        elif status in _FAILED:
            counts[1] += 1
    return {worker: (c[0], c[1], c[2], c[3]) for worker, c in found.items()}


def _lost_words(worker: WorkerHealth, window_s: float) -> str:
    words = (
        f"{_ROLE_WORDS.get(worker.role, worker.role)} {worker.worker} stopped answering at +{worker.lost_from_s:.1f} s "
        f"of the {window_s:.1f} s window (unanswered {worker.unanswered_s:.1f} s)"
    )
    if worker.role == "router":
        return words
    if worker.last_served_s is None:
        return f"{words}; it completed no request"
    return f"{words}; it completed {worker.completed_requests} requests, the last at +{worker.last_served_s:.1f} s"
