"""The rate ramp: a real endpoint's capacity at the SLO, measured, by replaying the run's window at rising rates
against it (as AIPerf's adaptive scale steps its load until the SLO breaks).

Step k replays the window's requests open-loop at start_rps x step_factor^k: the trace's arrivals compressed to that
rate (speedup = rate / the window's own rate), for step_duration_s of the compressed window (all of it when it is
shorter). A step counts as sustained while the share of its requests inside both SLO parts (TTFT from the schedule,
time per output token; as run_summary.good_requests counts them, failures counted outside) stays at least
MIN_GOOD_SHARE of the first, low-rate step's: the same rule as the twin's sweep (endpoints/capacity/
slo_capacity.py), whose idle reference the first step stands in for. The ramp stops at the first step that breaks
it (or after max_steps), and the capacity is read where the share crosses the threshold between the last sustained
step and that one, linear in log(rate) as the sweep's _crossing reads it. Each step materializes its prompts with
a seed of its own, so it meets a prefix cache the earlier steps did not fill with its own prompts; the endpoint
serves every step's requests to the end before the next starts. The endpoint is held for the whole ramp: its
cost, gpu_count x wall seconds / 60 GPU-minutes, is part of the result.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from replay.recording.records import RequestStatus
from replay.recording.requests_reader import read_requests
from replay.replay_config import ReplayConfig
from replay.runner import run_replay
from workloads.scenarios import CapacityRamp
from workloads.workload import Workload

MIN_GOOD_SHARE = 0.95  # as slo_capacity.MIN_GOOD_SHARE: sustained while 95% of the first step's share holds
SEED_BASE = 1_000  # step k's prompt seed: SEED_BASE + k, none of them the run's own (0)
_COLUMNS = ("status", "is_warmup", "scheduled_mono_s", "first_token_mono_s", "finish_mono_s", "completion_tokens")


@dataclass(frozen=True, slots=True)
class RampStep:
    rate_rps: float  # the step's offered rate: its requests / the compressed trace time it replayed (requests/s)
    requests: int  # requests the step sent (count)
    good_share: float  # of those, inside both SLO parts (ratio 0-1)
    wall_s: float  # the step's wall time, its last request served included (s)


@dataclass(frozen=True, slots=True)
class RampCapacity:
    capacity_rps_at_slo: float | None  # None: the first step kept nothing inside the SLO
    broke: bool  # a step broke the SLO rule (False: the capacity is only a lower bound, the last step's rate)
    window_rps: float  # the window's own rate: requests / arrival span at speedup 1 (requests/s)
    steps: tuple[RampStep, ...]  # in the order run
    wall_s: float  # the whole ramp (s)
    gpu_minutes: float  # gpu_count x wall_s / 60: what the ramp held the endpoint for (GPU-minutes)


def good_share(run_dir: Path, slo_ttft_ms: float, slo_tpot_ms: float) -> tuple[float, int]:
    """(share of the run's measured requests inside both SLO parts, their count)."""
    table = read_requests(run_dir, _COLUMNS)

    def floats(name: str) -> np.ndarray:
        return np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=np.float64)

    measured = ~np.asarray(table.column("is_warmup").to_pylist(), dtype=bool)
    ok = np.asarray(table.column("status").to_pylist(), dtype=object) == RequestStatus.OK.value
    ttft_ms = (floats("first_token_mono_s") - floats("scheduled_mono_s")) * 1000.0
    tokens = floats("completion_tokens")
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot_ms = (floats("finish_mono_s") - floats("first_token_mono_s")) * 1000.0 / (tokens - 1)
    tpot_ok = ~(tokens > 1) | np.isnan(tpot_ms) | (tpot_ms <= slo_tpot_ms)
    good = measured & ok & (ttft_ms <= slo_ttft_ms) & tpot_ok
    count = int(measured.sum())
    return (float(good.sum()) / count if count else 0.0), count


def window_rps(workload: Workload, start_s: float, duration_s: float | None) -> tuple[float, float]:
    """(the window's requests / arrival span at speedup 1, that span in trace seconds)."""
    arrivals = workload.window(start_s, duration_s).table.column("arrival_s").to_pylist()
    span_s = max(arrivals) - min(arrivals) if len(arrivals) > 1 else 0.0
    if span_s <= 0:
        raise ValueError("a rate ramp needs a window of at least two requests arriving at different times")
    return len(arrivals) / span_s, span_s


def ramp_capacity(
    workload: Workload,
    base: ReplayConfig,
    ramp: CapacityRamp,
    slo: tuple[float, float],
    gpu_count: int,
    out_dir: Path,
    clock: Callable[[], float] = time.monotonic,
) -> RampCapacity:
    """Ramp the endpoint at `base.url` on `base`'s window of `workload` (one folder per step under `out_dir`)."""
    rate0_rps, span_s = window_rps(workload, base.start_s, base.duration_s)
    first = min(workload.window(base.start_s, base.duration_s).table.column("arrival_s").to_pylist())
    started_s = clock()
    steps: list[RampStep] = []
    broke = False
    for k in range(ramp.max_steps):
        speedup = ramp.start_rps * ramp.step_factor**k / rate0_rps
        trace_s = min(ramp.step_duration_s * speedup, span_s)  # trace seconds the step replays
        config = replace(
            base, speedup=speedup, start_s=base.start_s + first, duration_s=math.nextafter(trace_s, math.inf),
            run_id=f"{base.run_id}-ramp-{k}", seed=SEED_BASE + k, warmup_s=0.0, max_concurrency=None,
            shard_index=0, shard_count=1, rendezvous_dir=None, start_at_epoch_s=None,
        )  # fmt: skip
        step_started_s = clock()
        info = run_replay(workload, config, out_dir / f"step-{k}")
        share, sent = good_share(out_dir / f"step-{k}", *slo)
        rate_rps = info.requests_total / (trace_s / speedup) if trace_s > 0 else ramp.start_rps
        steps.append(RampStep(rate_rps, sent, share, clock() - step_started_s))
        if k > 0 and share < MIN_GOOD_SHARE * steps[0].good_share:
            broke = True
            break
    wall_s = clock() - started_s
    return RampCapacity(
        capacity_rps_at_slo=_capacity(steps, broke),
        broke=broke,
        window_rps=rate0_rps,
        steps=tuple(steps),
        wall_s=wall_s,
        gpu_minutes=gpu_count * wall_s / 60.0,
    )


def _capacity(steps: list[RampStep], broke: bool) -> float | None:
    reference = steps[0].good_share
    if reference == 0:
        return None
    if not broke:
        return steps[-1].rate_rps
    good, bad = steps[-2], steps[-1]
    needed = MIN_GOOD_SHARE * reference
    if good.good_share <= bad.good_share:  # not monotone (noise): the last sustained step
        return good.rate_rps
    weight = min(max((good.good_share - needed) / (good.good_share - bad.good_share), 0.0), 1.0)
    return math.exp(math.log(good.rate_rps) + weight * (math.log(bad.rate_rps) - math.log(good.rate_rps)))
