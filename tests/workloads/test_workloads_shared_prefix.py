"""A scenario's shared system prompt: every request starts with the same blocks, nothing else is shared."""

from __future__ import annotations

import pytest

from workloads.prompts.prompt_materializer import materialize_input_ids
from workloads.prompts.shared_prefix import SharedPrefixError, with_shared_prefix
from workloads.readers.reader_registry import read_trace
from workloads.scenarios import ScenarioError, load_scenarios
from workloads.trace_stats import trace_stats

REPO = __import__("pathlib").Path(__file__).resolve().parents[2]


def test_azure_requests_share_exactly_the_system_prompt():
    azure = read_trace(REPO / "workloads/traces/azure_conv_2023.csv", "azure").window(0, 20)
    prompted = with_shared_prefix(azure, 2048)
    assert prompted.block_size == 512
    assert prompted.table.column("input_tokens").to_pylist() == [
        t + 2048 for t in azure.table.column("input_tokens").to_pylist()
    ]
    ids = materialize_input_ids(prompted)
    first, second = ids[0], ids[1]
    assert list(first[:2048]) == list(second[:2048])
    assert first[2048] != second[2048]  # own tokens start distinct: no accidental extra cache hit
    assert [len(x) for x in ids] == prompted.table.column("input_tokens").to_pylist()
    # Theoretical reuse is the system prompt's share of the input tokens (all but the first request).
    tokens = sum(prompted.table.column("input_tokens").to_pylist())
    expected = 2048 * (prompted.num_requests - 1) / tokens
    assert trace_stats(prompted).prefix_reuse_share == pytest.approx(expected)


def test_mooncake_blocks_keep_their_sharing_behind_the_prompt():
    mooncake = read_trace(REPO / "workloads/traces/mooncake_conversation.jsonl", "mooncake").window(0, 5)
    prompted = with_shared_prefix(mooncake, 1024)
    blocks = prompted.table.column("prefix_blocks").to_pylist()
    original = mooncake.table.column("prefix_blocks").to_pylist()
    assert all(b[:2] == [-1, -2] and b[2:] == o for b, o in zip(blocks, original))


def test_prompt_must_be_whole_blocks():
    mooncake = read_trace(REPO / "workloads/traces/mooncake_conversation.jsonl", "mooncake").window(0, 5)
    with pytest.raises(SharedPrefixError, match="multiple of the workload's block size \\(512"):
        with_shared_prefix(mooncake, 1000)


def test_scenario_fields_are_validated(tmp_path):
    path = tmp_path / "scenarios.yaml"
    base = (
        "scenarios:\n  - name: s\n    trace: t.jsonl\n    format: mooncake\n    start_s: 0\n    duration_s: 1\n"
        "    speedup: 1\n    endpoint: e\n    slo: {ttft_ms: 1, tpot_ms: 1}\n"
    )
    path.write_text(base + "    cold_start: true\n    shared_prefix_tokens: 2048\n")
    scenario = load_scenarios(path, tmp_path)["s"]
    assert scenario.cold_start and scenario.shared_prefix_tokens == 2048
    path.write_text(base + "    cold_start: sometimes\n")
    with pytest.raises(ScenarioError, match="cold_start: must be true or false"):
        load_scenarios(path, tmp_path)
    path.write_text(base + "    shared_prefix_tokens: -512\n")
    with pytest.raises(ScenarioError, match="shared_prefix_tokens: must be >= 0"):
        load_scenarios(path, tmp_path)


def test_replay_fields_of_a_scenario_are_validated(tmp_path):
    path = tmp_path / "scenarios.yaml"
    base = (
        "scenarios:\n  - name: s\n    trace: t.jsonl\n    format: mooncake\n    start_s: 0\n    duration_s: 1\n"
        "    speedup: 1\n    endpoint: e\n    slo: {ttft_ms: 1, tpot_ms: 1}\n"
    )
    path.write_text(
        base
        + "    backend: openai-chat\n    shards: 2\n    warmup_s: 3\n    max_concurrency: 64\n    require_reasoning: true\n"
    )
    scenario = load_scenarios(path, tmp_path)["s"]
    assert (
        scenario.backend,
        scenario.shards,
        scenario.warmup_s,
        scenario.max_concurrency,
        scenario.require_reasoning,
    ) == ("openai-chat", 2, 3.0, 64, True)
    for bad, message in (
        ("backend: grpc", "backend: must be"),
        ("shards: 0", "shards: must be"),
        ("warmup_s: -1", "warmup_s: must be"),
    ):
        path.write_text(base + f"    {bad}\n")
        with pytest.raises(ScenarioError, match=message):
            load_scenarios(path, tmp_path)


def test_reasoning_budget_lengthens_outputs_and_records_the_reasoning():
    from workloads.prompts.reasoning_budget import with_reasoning

    azure = read_trace(REPO / "workloads/traces/azure_conv_2023.csv", "azure").window(0, 20)
    r1 = with_reasoning(azure, 1.5)
    answers = azure.table.column("output_tokens").to_pylist()
    reasoning = r1.table.column("reasoning_tokens").to_pylist()
    assert reasoning == [round(a * 1.5) for a in answers]
    assert r1.table.column("output_tokens").to_pylist() == [a + r for a, r in zip(answers, reasoning)]
    assert with_reasoning(azure, 0) is azure
    with pytest.raises(ValueError, match="reasoning ratio must be"):
        with_reasoning(azure, -1)
