"""scenarios.yaml: the bundled file loads and points at real traces and endpoints; bad files fail clearly."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from endpoints.spec import load_endpoint_specs
from workloads.scenarios import (
    CapacityRamp,
    Scenario,
    ScenarioError,
    default_endpoints_path,
    default_scenarios_path,
    load_scenarios,
)
from workloads.workload import TraceFormat

REPO_ROOT = Path(__file__).resolve().parents[2]

GOOD = {
    "name": "chat-v3",
    "description": "test scenario",
    "trace": "traces/t.jsonl",
    "format": "mooncake",
    "start_s": 10,
    "duration_s": 5,
    "speedup": 2,
    "endpoint": "v3",
    "slo": {"ttft_ms": 2000, "tpot_ms": 100},
}


def write_scenarios(tmp_path: Path, entries: list[dict]) -> Path:
    path = tmp_path / "scenarios.yaml"
    path.write_text(yaml.safe_dump({"scenarios": entries}))
    return path


def test_bundled_scenarios_load_and_resolve_to_real_traces_and_endpoints() -> None:
    assert default_scenarios_path() == REPO_ROOT / "workloads" / "scenarios.yaml"
    endpoints = load_endpoint_specs(default_endpoints_path())
    scenarios = load_scenarios(default_scenarios_path(), REPO_ROOT, endpoint_names=endpoints)
    assert list(scenarios) == [
        "chat-v3-h200",
        "chat-v3-h200-canary",
        "reasoning-r1-h200-canary",
        "reasoning-r1-h200-prompt-json",
    ]
    assert scenarios["chat-v3-h200-canary"].shared_prefix_tokens == 2048
    assert scenarios["reasoning-r1-h200-canary"].require_reasoning
    for scenario in scenarios.values():
        assert scenario.trace.is_file()
        assert scenario.endpoint in endpoints
    first = scenarios["chat-v3-h200"]
    assert first.trace_format is TraceFormat.AZURE
    assert first.duration_s > 0 and first.speedup > 0 and first.slo_ttft_ms > 0
    assert first.target_rps == 15.0 and first.budget_usd_per_request is None


def test_relative_trace_resolves_against_repo_root(tmp_path: Path) -> None:
    scenarios = load_scenarios(write_scenarios(tmp_path, [GOOD]), tmp_path / "root")
    assert scenarios["chat-v3"] == Scenario(
        name="chat-v3",
        description="test scenario",
        trace=tmp_path / "root" / "traces" / "t.jsonl",
        trace_format=TraceFormat.MOONCAKE,
        start_s=10.0,
        duration_s=5.0,
        speedup=2.0,
        endpoint="v3",
        slo_ttft_ms=2000.0,
        slo_tpot_ms=100.0,
    )


def test_a_canary_runs_twice_a_week_with_run_variation_unless_told_and_live_traffic_once(tmp_path: Path) -> None:
    entries = [GOOD, {**GOOD, "name": "canary", "role": "canary"},
               {**GOOD, "name": "canary-once", "role": "canary", "repeats": 1, "run_variation": False}]  # fmt: skip
    scenarios = load_scenarios(write_scenarios(tmp_path, entries), tmp_path)
    assert (scenarios["chat-v3"].repeats, scenarios["chat-v3"].twin_run_variation) == (1, False)
    assert (scenarios["canary"].repeats, scenarios["canary"].twin_run_variation) == (2, True)
    assert (scenarios["canary-once"].repeats, scenarios["canary-once"].twin_run_variation) == (1, False)


def test_null_duration_means_to_the_end(tmp_path: Path) -> None:
    scenarios = load_scenarios(write_scenarios(tmp_path, [{**GOOD, "duration_s": None}]), tmp_path)
    assert scenarios["chat-v3"].duration_s is None


def without(key: str) -> dict:
    return {k: v for k, v in GOOD.items() if k != key}


@pytest.mark.parametrize(
    ("entries", "message_part"),
    [
        ([without("speedup")], "scenarios[0].speedup: required key is missing (scenario 'chat-v3')"),
        ([{**GOOD, "speed_up": 2}], "scenarios[0].speed_up: unknown key (did you mean 'speedup'?)"),
        ([{**GOOD, "slo": {"ttft_ms": 100, "tpot_ms": 10, "e2e_ms": 1}}], "scenarios[0].slo.e2e_ms: unknown key"),
        ([{**GOOD, "format": "lmsys"}], "scenarios[0].format: unknown trace format 'lmsys': known formats are mooncake, azure, burstgpt"),
        ([GOOD, {**GOOD, "endpoint": "other"}], "scenarios[1].name: duplicate scenario name 'chat-v3' (first at scenarios[0])"),
        ([{**GOOD, "speedup": 0}], "scenarios[0].speedup: must be >= 0.001, got 0"),
        ([{**GOOD, "speedup": -1.5}], "speedup: must be >= 0.001, got -1.5"),
        ([{**GOOD, "speedup": True}], "speedup: must be a number, got True"),
        ([{**GOOD, "speedup": float("nan")}], "speedup: must be a finite number"),
        ([{**GOOD, "start_s": -1}], "start_s: must be >= 0, got -1"),
        ([{**GOOD, "duration_s": "long"}], "duration_s: must be a number, got 'long'"),
        ([{**GOOD, "name": "Chat_V3"}], "scenarios[0].name: must match ^[a-z0-9][a-z0-9-]{0,62}$"),
        ([{**GOOD, "name": "../../x"}], "scenarios[0].name: must match"),
        ([{**GOOD, "name": "chat v3"}], "name: must match"),
        ([{**GOOD, "name": 7}], "name: must be a string, got 7"),
        ([{**GOOD, "slo": {"ttft_ms": 100}}], "scenarios[0].slo.tpot_ms: required key is missing"),
        ([{**GOOD, "slo": "fast"}], "scenarios[0].slo: must be a mapping, got 'fast'"),
        ([{**GOOD, "slo": {"ttft_ms": 100, "tpot_ms": 0}}], "scenarios[0].slo.tpot_ms: must be > 0, got 0"),
        ([{**GOOD, "endpoint": ""}], "scenarios[0].endpoint: must match"),
        ([{**GOOD, "endpoint": "../../../x"}], "scenarios[0].endpoint: must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"),
        ([{**GOOD, "shards": 2.0}], "scenarios[0].shards: must be a whole number, got 2.0"),
        ([{**GOOD, "max_concurrency": 0}], "scenarios[0].max_concurrency: must be >= 1, got 0"),
        ([{**GOOD, "target_rps": "12"}], "scenarios[0].target_rps: must be a number, got '12'"),
        ([{**GOOD, "target_rps": 0}], "scenarios[0].target_rps: must be > 0, got 0"),
        ([{**GOOD, "budget_usd_per_request": -0.01}], "scenarios[0].budget_usd_per_request: must be > 0, got -0.01"),
        ([{**GOOD, "max_schedule_lag_p99_ms": 0}], "scenarios[0].max_schedule_lag_p99_ms: must be > 0, got 0"),
        ([{**GOOD, "backend": "grpc"}], "backend: must be one of 'sglang', 'openai-chat' or 'openai-completions', got 'grpc'"),
        ([{**GOOD, "repeats": 0}], "scenarios[0].repeats: must be >= 1, got 0"),
        ([{**GOOD, "plan_ep_widths": [16, 1]}], "scenarios[0].plan_ep_widths[1]: must be >= 2, got 1"),
        ([{**GOOD, "plan_ep_widths": 16}], "scenarios[0].plan_ep_widths: must be a list"),
        ([{**GOOD, "repeats": 17}], "scenarios[0].repeats: must be <= 16, got 17"),
        ([{**GOOD, "run_variation": "yes"}], "scenarios[0].run_variation: must be true or false"),
        ([], "scenarios: must not be empty"),
    ],
)  # fmt: skip
def test_invalid_scenarios_fail_with_file_key_path_and_reason(
    tmp_path: Path, entries: list[dict], message_part: str
) -> None:
    path = write_scenarios(tmp_path, entries)
    with pytest.raises(ScenarioError) as caught:
        load_scenarios(path, tmp_path)
    assert str(caught.value).startswith(f"{path}: ")
    assert message_part in str(caught.value)


def test_every_problem_of_a_file_is_reported_on_its_own_line(tmp_path: Path) -> None:
    path = write_scenarios(tmp_path, [{**GOOD, "speedup": 0}, {**without("trace"), "name": "b", "colds_start": True}])
    with pytest.raises(ScenarioError) as caught:
        load_scenarios(path, tmp_path)
    lines = str(caught.value).splitlines()
    assert lines == [
        f"{path}: scenarios[0].speedup: must be >= 0.001, got 0 (scenario 'chat-v3')",
        f"{path}: scenarios[1].trace: required key is missing (scenario 'b')",
        f"{path}: scenarios[1].colds_start: unknown key (did you mean 'cold_start'?) (scenario 'b')",
    ]


def test_a_scenario_naming_an_unknown_endpoint_is_refused_when_the_endpoints_are_given(tmp_path: Path) -> None:
    path = write_scenarios(tmp_path, [GOOD])
    assert load_scenarios(path, tmp_path, endpoint_names={"v3"})["chat-v3"].endpoint == "v3"
    with pytest.raises(ScenarioError) as caught:
        load_scenarios(path, tmp_path, endpoint_names={"r1", "v3-8xh200"})
    assert str(caught.value) == (
        f"{path}: scenarios[0].endpoint: no endpoint named 'v3' (endpoints: r1, v3-8xh200) (scenario 'chat-v3')"
    )


def test_fleet_target_and_budget_are_read(tmp_path: Path) -> None:
    path = write_scenarios(tmp_path, [{**GOOD, "target_rps": 12, "budget_usd_per_request": 0.002}])
    scenario = load_scenarios(path, tmp_path)["chat-v3"]
    assert (scenario.target_rps, scenario.budget_usd_per_request) == (12.0, 0.002)
    assert isinstance(scenario.target_rps, float)
    unset = load_scenarios(write_scenarios(tmp_path, [GOOD]), tmp_path)["chat-v3"]
    assert (unset.target_rps, unset.budget_usd_per_request) == (None, None)
    assert unset.max_schedule_lag_p99_ms == 100.0  # the runs_quality check's default bound
    shared = write_scenarios(tmp_path, [{**GOOD, "max_schedule_lag_p99_ms": 250}])
    assert load_scenarios(shared, tmp_path)["chat-v3"].max_schedule_lag_p99_ms == 250.0
    wide = write_scenarios(tmp_path, [{**GOOD, "target_rps": 40, "plan_ep_widths": [32, 16, 32]}])
    assert load_scenarios(wide, tmp_path)["chat-v3"].plan_ep_widths == (16, 32)  # sorted, once each


def test_file_without_scenarios_list(tmp_path: Path) -> None:
    path = tmp_path / "scenarios.yaml"
    path.write_text("endpoints: []\n")
    with pytest.raises(ScenarioError) as caught:
        load_scenarios(path, tmp_path)
    assert str(caught.value).splitlines() == [
        f"{path}: scenarios: required key is missing",
        f"{path}: endpoints: unknown key (known keys: scenarios)",
    ]
    path.write_text("- name: x\n")
    with pytest.raises(ScenarioError, match=r"scenarios.yaml: \(top level\): must be a mapping"):
        load_scenarios(path, tmp_path)


def test_missing_and_unparsable_files(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="nope.yaml: cannot read the file"):
        load_scenarios(tmp_path / "nope.yaml", tmp_path)
    bad = tmp_path / "bad.yaml"
    bad.write_text("scenarios: [\n")
    with pytest.raises(ScenarioError, match="bad.yaml: invalid YAML"):
        load_scenarios(bad, tmp_path)


RAMP = {"start_rps": 0.5, "step_factor": 1.5, "max_steps": 6, "step_duration_s": 20}


def test_a_capacity_ramp_is_read_and_a_bad_ramp_key_is_named_with_the_file(tmp_path: Path) -> None:
    path = write_scenarios(tmp_path, [{**GOOD, "capacity_ramp": RAMP}])
    ramp = load_scenarios(path, tmp_path)["chat-v3"].capacity_ramp
    assert ramp == CapacityRamp(start_rps=0.5, step_factor=1.5, max_steps=6, step_duration_s=20.0)
    assert load_scenarios(write_scenarios(tmp_path, [GOOD]), tmp_path)["chat-v3"].capacity_ramp is None
    typo = write_scenarios(tmp_path, [{**GOOD, "capacity_ramp": {**RAMP, "step_seconds": 20}}])
    with pytest.raises(ScenarioError) as caught:
        load_scenarios(typo, tmp_path)
    assert str(typo) in str(caught.value) and "scenarios[0].capacity_ramp.step_seconds" in str(caught.value)
    flat = write_scenarios(tmp_path, [{**GOOD, "capacity_ramp": {**RAMP, "step_factor": 1}}])
    with pytest.raises(ScenarioError, match=r"capacity_ramp\.step_factor"):
        load_scenarios(flat, tmp_path)
    sharded = write_scenarios(tmp_path, [{**GOOD, "shards": 2, "capacity_ramp": RAMP}])
    with pytest.raises(ScenarioError, match="capacity_ramp needs shards: 1"):
        load_scenarios(sharded, tmp_path)
