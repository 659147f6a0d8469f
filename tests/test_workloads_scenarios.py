"""scenarios.yaml: the bundled file loads and points at real traces and endpoints; bad files fail clearly."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from endpoints.spec import load_endpoint_specs
from workloads.scenarios import (
    Scenario,
    ScenarioError,
    default_endpoints_path,
    default_scenarios_path,
    load_scenarios,
)
from workloads.workload import TraceFormat

REPO_ROOT = Path(__file__).resolve().parent.parent

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
    scenarios = load_scenarios(default_scenarios_path(), REPO_ROOT)
    endpoints = load_endpoint_specs(default_endpoints_path())
    assert list(scenarios) == ["chat-v3-h200", "azure-chat-v3-h200", "reasoning-r1-h200"]
    assert scenarios["azure-chat-v3-h200"].shared_prefix_tokens == 2048
    assert scenarios["reasoning-r1-h200"].require_reasoning
    for scenario in scenarios.values():
        assert scenario.trace.is_file()
        assert scenario.endpoint in endpoints
    first = scenarios["chat-v3-h200"]
    assert first.trace_format is TraceFormat.MOONCAKE
    assert first.duration_s > 0 and first.speedup > 0 and first.slo_ttft_ms > 0


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


def test_null_duration_means_to_the_end(tmp_path: Path) -> None:
    scenarios = load_scenarios(write_scenarios(tmp_path, [{**GOOD, "duration_s": None}]), tmp_path)
    assert scenarios["chat-v3"].duration_s is None


def without(key: str) -> dict:
    return {k: v for k, v in GOOD.items() if k != key}


@pytest.mark.parametrize(
    ("entries", "message_part"),
    [
        ([without("speedup")], "scenarios[0] (chat-v3): missing field(s) speedup"),
        ([{**GOOD, "format": "lmsys"}], "unknown format 'lmsys': known formats are mooncake, azure, burstgpt"),
        ([GOOD, {**GOOD, "endpoint": "other"}], "scenarios[1]: duplicate scenario name 'chat-v3'"),
        ([{**GOOD, "speedup": 0}], "speedup must be > 0"),
        ([{**GOOD, "speedup": -1.5}], "speedup must be > 0"),
        ([{**GOOD, "start_s": -1}], "start_s must be >= 0"),
        ([{**GOOD, "duration_s": "long"}], "duration_s must be a number"),
        ([{**GOOD, "name": "Chat_V3"}], "name 'Chat_V3' must match [a-z0-9-]+"),
        ([{**GOOD, "name": "chat v3"}], "must match [a-z0-9-]+"),
        ([{**GOOD, "slo": {"ttft_ms": 100}}], "slo must be a mapping with ttft_ms and tpot_ms"),
        ([{**GOOD, "slo": {"ttft_ms": 100, "tpot_ms": 0}}], "tpot_ms must be > 0"),
        ([{**GOOD, "endpoint": ""}], "endpoint must be a non-empty string"),
    ],
)
def test_invalid_scenarios_fail_with_file_and_reason(tmp_path: Path, entries: list[dict], message_part: str) -> None:
    path = write_scenarios(tmp_path, entries)
    with pytest.raises(ScenarioError) as caught:
        load_scenarios(path, tmp_path)
    assert str(caught.value).startswith(str(path))
    assert message_part in str(caught.value)


def test_file_without_scenarios_list(tmp_path: Path) -> None:
    path = tmp_path / "scenarios.yaml"
    path.write_text("endpoints: []\n")
    with pytest.raises(ScenarioError, match="top-level 'scenarios:' list"):
        load_scenarios(path, tmp_path)


def test_missing_and_unparsable_files(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="cannot read scenarios file"):
        load_scenarios(tmp_path / "nope.yaml", tmp_path)
    bad = tmp_path / "bad.yaml"
    bad.write_text("scenarios: [\n")
    with pytest.raises(ScenarioError, match="invalid YAML"):
        load_scenarios(bad, tmp_path)
