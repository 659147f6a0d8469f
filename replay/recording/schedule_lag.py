"""Schedule lag: how late requests left compared with the open-loop schedule.

lag = sent − (scheduled + held): time a request was deliberately held (session order, concurrency cap)
is the workload's doing, not the client's, and is recorded separately as `held_s`. This is the one
definition: `schedule_lag_s` here, the runs' p50/p99/max, the live progress display and the warehouse's
`requests.schedule_lag_ms` (warehouse/schema.sql) all mean this quantity.

A client that falls behind hides latency (coordinated omission), so every run reports its lag and is
flagged degraded when the p99 passes a threshold (docs/replay.md, "Honest timing"). Like every run metric, the
percentiles leave warm-up requests out (warehouse/schema.sql, "Measured window").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from replay.recording.records import RequestRecord, RequestStatus


def schedule_lag_s(record: RequestRecord) -> float | None:
    """sent − scheduled − held (s); None for a request that was never sent."""
    if record.sent_mono_s is None:
        return None
    return record.sent_mono_s - record.scheduled_mono_s - record.held_s


@dataclass(frozen=True, slots=True)
class ScheduleLag:
    p50_ms: float | None
    p99_ms: float | None
    max_ms: float | None
    degraded: bool  # p99 past the run's threshold

    @staticmethod
    def from_lags_s(lags_s: Iterable[float], degraded_p99_ms: float) -> "ScheduleLag":
        values_ms = np.fromiter(lags_s, dtype=np.float64) * 1000.0
        if values_ms.size == 0:
            return ScheduleLag(None, None, None, False)
        p50_ms, p99_ms = np.percentile(values_ms, [50, 99])
        return ScheduleLag(float(p50_ms), float(p99_ms), float(values_ms.max()), bool(p99_ms > degraded_p99_ms))


class RunTally:
    """What the runner keeps per completed record: small numbers only, not the records themselves."""

    __slots__ = ("lags_s", "recorded", "ok", "last_end_s")

    def __init__(self) -> None:
        self.lags_s: list[float] = []
        self.recorded = 0
        self.ok = 0
        # When the run's last request ended (s from t0): its last byte, or, for one that got none (refused,
        # reset, timed out, stopped), the moment its record came in. The run held its endpoint until then,
        # whatever the endpoint answered, so this, not the last successful answer, ends the cost window.
        self.last_end_s: float | None = None

    def add(self, record: RequestRecord, recorded_s: float | None = None) -> None:
        """`recorded_s`: when the record came in (s from t0), the end of a request that has no finish."""
        self.recorded += 1
        if record.status is RequestStatus.OK:
            self.ok += 1
        lag_s = schedule_lag_s(record)
        if lag_s is not None and not record.is_warmup:
            self.lags_s.append(lag_s)
        end_s = record.finish_mono_s if record.finish_mono_s is not None else recorded_s
        if end_s is not None and (self.last_end_s is None or end_s > self.last_end_s):
            self.last_end_s = end_s
