"""Each week replays that week's traffic: a weekly window rule moves through a long trace (deterministic in the
week, wrapping inside the trace), a {week} capture path finds the week's file (a missing week names its path),
a session share keeps whole sessions, and a canary keeps one window every week."""

from __future__ import annotations

import dataclasses
import shutil
from datetime import date, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from workloads.readers.reader_registry import read_trace
from workloads.scenarios import ScenarioError, default_endpoints_path, default_scenarios_path, load_scenarios
from workloads.weekly_traffic import WeekTraceMissing, session_share, week_traffic
from workloads.weekly_window import WeeklyWindow, week_window_start
from workloads.workload import TraceFormat

REPO = Path(__file__).resolve().parents[2]
AZURE = REPO / "workloads" / "traces" / "azure_conv_2023.csv"
ANCHOR = date(2026, 1, 5)
BASE = {
    "name": "chat",
    "trace": str(AZURE),
    "format": "azure",
    "duration_s": 600,
    "speedup": 1,
    "endpoint": "e",
    "slo": {"ttft_ms": 1000, "tpot_ms": 100},
}


def _load(tmp_path: Path, **entry) -> dict:
    path = tmp_path / "scenarios.yaml"
    path.write_text(yaml.safe_dump({"scenarios": [{**BASE, **entry}]}))
    return load_scenarios(path, tmp_path)


def test_each_week_takes_the_next_window_and_wraps_inside_the_trace():
    rule = WeeklyWindow(start_s=100.0, step_s=600.0, anchor_week=ANCHOR)
    end_s, duration_s = 3500.0, 600.0  # room for a window: [100, 2900]
    starts = [week_window_start(rule, duration_s, ANCHOR + timedelta(weeks=k), end_s) for k in range(7)]
    assert starts == [100.0, 700.0, 1300.0, 1900.0, 2500.0, 100.0 + 3000 % 2800, 100.0 + 3600 % 2800]
    assert all(100.0 <= s <= end_s - duration_s for s in starts)
    # Deterministic: the same week gives the same window, any day it is asked; weeks before the anchor wrap too.
    assert week_window_start(rule, duration_s, ANCHOR + timedelta(weeks=3), end_s) == starts[3]
    assert 100.0 <= week_window_start(rule, duration_s, ANCHOR - timedelta(weeks=1), end_s) <= end_s - duration_s
    # A trace shorter than a window replays from the rule's start every week.
    assert week_window_start(rule, 5000.0, ANCHOR + timedelta(weeks=2), end_s) == 100.0


def test_a_weekly_window_scenario_replays_different_requests_each_week(tmp_path):
    scenario = _load(tmp_path, weekly_window={"start_s": 0, "step_s": 900})["chat"]
    weeks = [date(2026, 11, 9), date(2026, 11, 16)]
    traffic = [week_traffic(scenario, week, tmp_path / "cache") for week in weeks]
    assert traffic[0].start_s != traffic[1].start_s and traffic[0].duration_s == traffic[1].duration_s == 600.0
    ids = [set(t.window_rows().table.column("request_id").to_pylist()) for t in traffic]
    assert ids[0] and ids[1] and not ids[0] & ids[1]
    assert week_traffic(scenario, weeks[0], tmp_path / "cache").start_s == traffic[0].start_s


def test_a_capture_pattern_reads_the_weeks_file_and_names_a_missing_one(tmp_path):
    captures = tmp_path / "captures"
    captures.mkdir()
    shutil.copy(AZURE, captures / "2026-11-16.csv")
    scenario = _load(tmp_path, trace="captures/{week}.csv", start_s=0)["chat"]
    traffic = week_traffic(scenario, date(2026, 11, 16), tmp_path / "cache")
    assert traffic.trace.header.source_path == str(captures / "2026-11-16.csv")
    assert traffic.window_rows().num_requests > 0
    with pytest.raises(WeekTraceMissing) as missing:
        week_traffic(scenario, date(2026, 11, 23), tmp_path / "cache")
    assert str(captures / "2026-11-23.csv") in str(missing.value) and "'chat'" in str(missing.value)


def test_a_session_share_keeps_whole_sessions_the_same_every_time():
    workload = read_trace(AZURE, TraceFormat.AZURE).window(0, 600)
    sessions = [f"s{i // 3}" for i in range(workload.num_requests)]  # three turns per session
    at = workload.table.schema.get_field_index("session_id")
    table = workload.table.set_column(at, workload.table.schema.field(at), pa.array(sessions, pa.string()))
    workload = dataclasses.replace(workload, table=table)
    quarter = session_share(workload, 0.25)
    kept = quarter.table.column("session_id").to_pylist()
    assert 0.15 < len(kept) / workload.num_requests < 0.35
    assert all(kept.count(s) == sessions.count(s) for s in set(kept))  # whole sessions
    assert session_share(workload, 0.25).table.equals(quarter.table)
    assert session_share(workload, 1.0) is workload


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"role": "canary", "weekly_window": {"start_s": 0, "step_s": 60}}, "a canary replays the same window"),
        ({"role": "canary", "start_s": 0, "trace": "c/{week}.csv"}, "a canary replays the same window"),
        ({"start_s": 0, "weekly_window": {"start_s": 0, "step_s": 60}}, "give start_s or weekly_window, not both"),
        ({}, "start_s is missing"),
        ({"start_s": 0, "trace": "c/{day}.csv"}, "trace: the only placeholder a trace path may hold is {week}"),
        ({"weekly_window": {"start_s": 0, "step_s": 60, "anchor_week": date(2026, 1, 6)}}, "must be a Monday"),
        ({"start_s": 0, "traffic_share": 1.5}, "traffic_share: must be <= 1"),
    ],
)
def test_a_bad_weekly_traffic_rule_is_refused_with_its_key(tmp_path, entry, message):
    with pytest.raises(ScenarioError, match=message.replace("{", r"\{").replace("}", r"\}")):
        _load(tmp_path, **entry)


def test_every_bundled_endpoint_in_use_has_a_canary_with_a_fixed_window():
    endpoints = yaml.safe_load(default_endpoints_path().read_text())["endpoints"]
    scenarios = load_scenarios(default_scenarios_path(), REPO, [e["name"] for e in endpoints])
    live = {s.endpoint for s in scenarios.values() if s.role == "live"}
    canaries = {s.endpoint: s for s in scenarios.values() if s.role == "canary"}
    assert live and live <= set(canaries)
    assert all(c.weekly_window is None and "{week}" not in str(c.trace) for c in canaries.values())
    assert all(s.weekly_window is not None for s in scenarios.values() if s.role == "live")
