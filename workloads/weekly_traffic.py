"""Which traffic a scenario replays in a given week: the week's capture, or the week's window of a long trace,
and the share of it one replica carries.

A scenario names its weekly traffic in one of three ways (workloads/scenarios.py validates which):
- a fixed window (`start_s`, `duration_s`): the same seconds every week (a canary's reference workload);
- a weekly window rule (`weekly_window: {start_s, step_s}`): week k after the anchor week replays
  [start_s + (k * step_s mod room), +duration_s), where room is what the trace leaves after start_s for a
  whole window, so the window wraps and always lies inside the trace;
- a capture per week: a trace path holding `{week}` (the week's Monday, 2026-11-16), e.g. the weekly
  `costbench capture` output `captures/{week}.parquet`.

`traffic_share` keeps a session-sharded fraction of the window (whole sessions, chosen by a hash of the
session id): what one replica of a fleet behind a session-affine router receives.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from workloads.weekly_window import WEEK_PLACEHOLDER
from workloads.workload import Workload
from workloads.workload_file import WorkloadFile, open_workload

if TYPE_CHECKING:
    from workloads.scenarios import Scenario


class WeekTraceMissing(ValueError):
    """A scenario's capture for one week is not there; the message names the scenario, the week and the path."""


def week_trace_path(trace: Path, week_start: date, scenario: str) -> Path:
    """The trace file of the week: `trace` with {week} replaced by the week's Monday (YYYY-MM-DD).

    Raises WeekTraceMissing naming the path when a weekly capture is not there (a fixed trace is checked by
    its reader, later).
    """
    text = str(trace)
    if WEEK_PLACEHOLDER not in text:
        return trace
    path = Path(text.replace(WEEK_PLACEHOLDER, week_start.isoformat()))
    if not path.is_file():
        raise WeekTraceMissing(
            f"scenario {scenario!r}: no capture for the week of {week_start.isoformat()}: {path} does not exist "
            f"(trace: {text})"
        )
    return path


def unresolved_trace(scenario: Scenario) -> str | None:
    """Why `scenario`'s trace cannot be found before any run starts, or None when it can: a fixed trace that is not
    a file, or a weekly capture pattern ({week}) whose folder does not exist or holds no file of the pattern."""
    text = str(scenario.trace)
    if WEEK_PLACEHOLDER not in text:
        return None if scenario.trace.is_file() else f"scenario {scenario.name!r}: trace {text} is not a file"
    pattern = Path(text)
    folder = pattern.parent
    if WEEK_PLACEHOLDER in str(folder) or not folder.is_dir():
        return f"scenario {scenario.name!r}: trace {text}: the folder {folder} does not exist"
    if not any(folder.glob(pattern.name.replace(WEEK_PLACEHOLDER, "????-??-??"))):
        return f"scenario {scenario.name!r}: trace {text}: no capture in {folder} matches it yet"
    return None


def trace_end_s(spooled: Path) -> float:
    """The last arrival (trace seconds) of a spooled canonical trace, from its row groups' statistics
    (the file is sorted by arrival_s, so nothing but the footer is read)."""
    metadata = pq.ParquetFile(spooled).metadata
    column = metadata.schema.to_arrow_schema().get_field_index("arrival_s")
    last = 0.0
    for group in range(metadata.num_row_groups):
        stats = metadata.row_group(group).column(column).statistics
        if stats is None or not stats.has_min_max:
            return float(pq.read_table(spooled, columns=["arrival_s"]).column("arrival_s").to_numpy().max())
        last = max(last, float(stats.max))
    return last


def _unit_hash(keys: list[str]) -> np.ndarray:
    # A stable hash of each key in [0, 1): the same session is kept (or not) every week and on every machine.
    return np.array(
        [int.from_bytes(hashlib.blake2b(k.encode(), digest_size=8).digest(), "little") / 2**64 for k in keys]
    )


def session_share(workload: Workload, share: float) -> Workload:
    """The requests of a `share` of the sessions (all of them at 1.0): a session is kept whole or left out,
    chosen by a hash of its session_id (request_id for a request without a session)."""
    if share >= 1.0 or workload.num_requests == 0:
        return workload
    sessions = workload.table.column("session_id").to_pylist()
    requests = workload.table.column("request_id").to_pylist()
    keys = [s if s is not None else f"request:{r}" for s, r in zip(sessions, requests, strict=True)]
    keep = pa.array(_unit_hash(keys) < share)
    return dataclasses.replace(workload, table=workload.table.filter(keep))


@dataclass(frozen=True, slots=True)
class WeekTraffic:
    """The trace a scenario replays in one week, spooled, and the window of it."""

    trace: WorkloadFile
    start_s: float
    duration_s: float | None

    def window_rows(self) -> Workload:
        """The window's rows, arrivals as in the trace (the replay re-bases them)."""
        return self.trace.window_rows(self.start_s, self.duration_s)


def week_traffic(scenario: Scenario, week_start: date, cache_dir: Path) -> WeekTraffic:
    """Where `scenario`'s traffic of the week of `week_start` comes from: its trace (or the week's capture,
    WeekTraceMissing when absent) spooled in `cache_dir`, and the week's window of it."""
    trace = open_workload(week_trace_path(scenario.trace, week_start, scenario.name), scenario.trace_format, cache_dir)
    end_s = trace_end_s(trace.path) if scenario.weekly_window is not None else 0.0
    start_s, duration_s = scenario.window_for(week_start, end_s)
    return WeekTraffic(trace, start_s, duration_s)
