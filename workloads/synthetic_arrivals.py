"""Synthetic arrival times for a trace without timestamps (ShareGPT) or for a what-if rate.

Inter-arrival gaps are drawn from the process, then the whole schedule is scaled so the mean rate is
exactly `rate_rps`: request 0 arrives at 0 and request n-1 at (n-1) / rate_rps (the normalisation
vLLM's benchmark applies). Gamma gaps have shape = burstiness and scale 1 / (rate · burstiness):
burstiness 1 is Poisson, < 1 burstier (coefficient of variation of the gaps 1/√burstiness), > 1 more
even. Requests keep their table order: request k gets the k-th arrival, so a session's later turns
come after its earlier ones (replay still holds a turn until the previous one finished).
"""

from __future__ import annotations

import math
from dataclasses import replace
from enum import Enum

import numpy as np
import pyarrow as pa

from workloads.workload import WORKLOAD_SCHEMA, Workload


class ArrivalProcess(str, Enum):
    POISSON = "poisson"  # exponential gaps
    GAMMA = "gamma"  # gamma gaps, shape = burstiness
    CONSTANT = "constant"  # equal gaps


def _gaps(process: ArrivalProcess, count: int, burstiness: float, rng: np.random.Generator) -> np.ndarray:
    if process is ArrivalProcess.CONSTANT:
        return np.ones(count)
    if process is ArrivalProcess.POISSON:
        return rng.exponential(1.0, count)
    return rng.gamma(shape=burstiness, scale=1.0 / burstiness, size=count)


def synthetic_offsets_s(
    count: int, process: ArrivalProcess, rate_rps: float, burstiness: float = 1.0, seed: int = 0
) -> np.ndarray:
    """`count` arrival offsets from 0, non-decreasing, with mean rate exactly `rate_rps`."""
    if not (math.isfinite(rate_rps) and rate_rps > 0):
        raise ValueError(f"rate_rps must be a finite number > 0, got {rate_rps}")
    if not (math.isfinite(burstiness) and burstiness > 0):
        raise ValueError(f"burstiness must be a finite number > 0, got {burstiness}")
    if count <= 1:
        return np.zeros(count)
    gaps = _gaps(ArrivalProcess(process), count - 1, burstiness, np.random.default_rng(seed))
    offsets = np.concatenate(([0.0], np.cumsum(gaps)))
    if offsets[-1] <= 0:  # a tiny gamma shape can draw only zeros: fall back to even spacing
        offsets = np.arange(count, dtype=np.float64)
    # Scale so the last request lands at (count-1)/rate: the realised mean rate is the one asked for.
    return offsets * ((count - 1) / rate_rps / offsets[-1])


def with_synthetic_arrivals(
    workload: Workload,
    process: ArrivalProcess,
    rate_rps: float,
    burstiness: float = 1.0,
    seed: int = 0,
) -> Workload:
    """`workload` with arrival_s replaced by a synthetic schedule; `arrival_process` records which.

    Deterministic in (workload rows, process, rate_rps, burstiness, seed).
    """
    process = ArrivalProcess(process)
    table = workload.table
    offsets = synthetic_offsets_s(table.num_rows, process, rate_rps, burstiness, seed)
    at = WORKLOAD_SCHEMA.get_field_index("arrival_s")
    table = table.set_column(at, WORKLOAD_SCHEMA.field("arrival_s"), pa.array(offsets, pa.float64()))
    suffix = f"{process.value}@{rate_rps:g}rps" + (f",b={burstiness:g}" if process is ArrivalProcess.GAMMA else "")
    return replace(workload, name=f"{workload.name}[{suffix}]", table=table, arrival_process=process.value)
