"""Synthetic arrivals: exact mean rate, burstiness shapes the gaps, deterministic in the seed."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from workloads.synthetic_arrivals import ArrivalProcess, synthetic_offsets_s, with_synthetic_arrivals
from workloads.workload import UNTIMED, WORKLOAD_SCHEMA, TraceFormat, Workload


def untimed_workload(count: int) -> Workload:
    table = pa.table(
        {
            "request_id": [f"r{i}" for i in range(count)],
            "session_id": pa.nulls(count, pa.string()),
            "turn": pa.nulls(count, pa.int32()),
            "arrival_s": [0.0] * count,
            "input_tokens": pa.array([10] * count, pa.int32()),
            "output_tokens": pa.array([2] * count, pa.int32()),
            "prefix_blocks": pa.nulls(count, pa.list_(pa.int64())),
            "prompt": pa.nulls(count, pa.string()),
            "reasoning_tokens": pa.nulls(count, pa.int32()),
            "response_format": pa.nulls(count, pa.string()),
            "constrained": pa.nulls(count, pa.bool_()),
        },
        schema=WORKLOAD_SCHEMA,
    )
    return Workload("share", "share.json", TraceFormat.SHAREGPT, UNTIMED, 0, table, arrival_process="none")


def gap_cv(offsets: np.ndarray) -> float:
    gaps = np.diff(offsets)
    return float(gaps.std() / gaps.mean())


@pytest.mark.parametrize("process", list(ArrivalProcess))
def test_mean_rate_is_exact_for_every_process(process: ArrivalProcess) -> None:
    offsets = synthetic_offsets_s(1001, process, rate_rps=4.0, burstiness=0.5, seed=1)
    assert offsets[0] == 0.0
    assert offsets[-1] == pytest.approx(1000 / 4.0, rel=1e-12)  # 1000 gaps at 4 per second
    assert np.all(np.diff(offsets) >= 0)


def test_burstiness_sets_the_spread_of_the_gaps() -> None:
    count = 20_000
    cv = {b: gap_cv(synthetic_offsets_s(count, ArrivalProcess.GAMMA, 10.0, burstiness=b, seed=7)) for b in (0.25, 1, 4)}
    # Gamma gaps with shape k have coefficient of variation 1/sqrt(k).
    assert cv[0.25] == pytest.approx(2.0, rel=0.1)
    assert cv[1] == pytest.approx(1.0, rel=0.05)
    assert cv[4] == pytest.approx(0.5, rel=0.05)
    assert gap_cv(synthetic_offsets_s(count, ArrivalProcess.POISSON, 10.0, seed=7)) == pytest.approx(1.0, rel=0.05)
    assert gap_cv(synthetic_offsets_s(count, ArrivalProcess.CONSTANT, 10.0)) == pytest.approx(0.0, abs=1e-9)


def test_deterministic_in_the_seed() -> None:
    a = synthetic_offsets_s(100, ArrivalProcess.POISSON, 2.0, seed=3)
    assert np.array_equal(a, synthetic_offsets_s(100, ArrivalProcess.POISSON, 2.0, seed=3))
    assert not np.array_equal(a, synthetic_offsets_s(100, ArrivalProcess.POISSON, 2.0, seed=4))


def test_workload_gets_the_schedule_in_table_order_and_records_the_process() -> None:
    timed = with_synthetic_arrivals(untimed_workload(50), ArrivalProcess.GAMMA, rate_rps=5.0, burstiness=0.5, seed=2)
    assert timed.table.column("request_id").to_pylist() == [f"r{i}" for i in range(50)]
    arrivals = timed.table.column("arrival_s").to_numpy()
    assert arrivals[-1] == pytest.approx(49 / 5.0)
    assert (timed.arrival_process, timed.needs_arrivals, timed.name) == ("gamma", False, "share[gamma@5rps,b=0.5]")
    assert with_synthetic_arrivals(untimed_workload(50), "gamma", 5.0, 0.5, 2).table.equals(timed.table)


def test_edge_cases_and_bad_parameters() -> None:
    assert synthetic_offsets_s(1, ArrivalProcess.POISSON, 1.0).tolist() == [0.0]
    assert synthetic_offsets_s(0, ArrivalProcess.POISSON, 1.0).tolist() == []
    with pytest.raises(ValueError, match="rate_rps"):
        synthetic_offsets_s(10, ArrivalProcess.POISSON, 0.0)
    with pytest.raises(ValueError, match="burstiness"):
        synthetic_offsets_s(10, ArrivalProcess.GAMMA, 1.0, burstiness=-1)
