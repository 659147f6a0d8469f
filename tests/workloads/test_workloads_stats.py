"""trace_stats on a hand-worked example and on the bundled traces; the `workload inspect` command."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest

from pipelines import cli
from workloads.readers.mooncake_reader import read_mooncake
from workloads.trace_stats import TraceStats, trace_stats
from workloads.workload import WORKLOAD_SCHEMA, TraceFormat, Workload

TRACES = Path(__file__).resolve().parents[2] / "workloads" / "traces"


def make_workload(rows: list[tuple[float, int, int, list[int] | None]], block_size: int) -> Workload:
    """rows: (arrival_s, input_tokens, output_tokens, prefix_blocks)."""
    count = len(rows)
    columns = list(zip(*rows))
    table = pa.table(
        {
            "request_id": [str(i) for i in range(count)],
            "session_id": pa.nulls(count, pa.string()),
            "turn": pa.nulls(count, pa.int32()),
            "arrival_s": pa.array(columns[0], pa.float64()),
            "input_tokens": pa.array(columns[1], pa.int32()),
            "output_tokens": pa.array(columns[2], pa.int32()),
            "prefix_blocks": pa.array(columns[3], pa.list_(pa.int64())),
            "prompt": pa.nulls(count, pa.string()),
            "reasoning_tokens": pa.nulls(count, pa.int32()),
            "response_format": pa.nulls(count, pa.string()),
            "constrained": pa.nulls(count, pa.bool_()),
        },
        schema=WORKLOAD_SCHEMA,
    )
    return Workload("hand", "hand", TraceFormat.MOONCAKE, "ms", block_size, table)


def test_stats_on_a_hand_worked_example() -> None:
    # block_size 4. Reusable tokens per request (longest prefix equal to an earlier request's prefix):
    #   r0 [1,2]   input 8  → nothing seen yet                          0
    #   r1 [1,2,3] input 10 → [1,2] seen (r0)                 2×4 =     8
    #   r2 [1,5]   input 6  → [1] seen                        1×4 =     4
    #   r3 [2]     input 3  → 2 was only seen after 1, not first        0
    #   r4 [1,2]   input 7  → [1,2] seen, 8 capped at input             7
    #   r5 none    input 5  → no blocks                                 0
    # reused = 19 of 39 input tokens.
    workload = make_workload(
        [
            (0.0, 8, 1, [1, 2]),
            (1.0, 10, 2, [1, 2, 3]),
            (2.5, 6, 3, [1, 5]),
            (3.0, 3, 4, [2]),
            (4.0, 7, 5, [1, 2]),
            (10.0, 5, 6, None),
        ],
        block_size=4,
    )
    assert trace_stats(workload) == TraceStats(
        requests=6,
        duration_s=10.0,
        mean_input_tokens=6.5,
        mean_output_tokens=3.5,
        prefix_reuse_share=pytest.approx(19 / 39),
        block_size=4,
        time_unit="ms",
    )


def test_no_blocks_means_no_reuse_and_empty_is_zero() -> None:
    assert trace_stats(make_workload([(0.0, 8, 1, None), (1.0, 8, 1, None)], block_size=0)).prefix_reuse_share == 0.0
    empty = make_workload([(0.0, 8, 1, [1])], block_size=4).window(5, 1)
    stats = trace_stats(empty)
    assert (stats.requests, stats.duration_s, stats.prefix_reuse_share) == (0, 0.0, 0.0)


def brute_force_reuse_share(workload: Workload) -> float:
    """The definition, literally: a set of every prefix tuple seen so far."""
    seen: set[tuple[int, ...]] = set()
    reused = total = 0
    for row in workload.table.to_pylist():
        blocks = row["prefix_blocks"] or []
        matched = 0
        while matched < len(blocks) and tuple(blocks[: matched + 1]) in seen:
            matched += 1
        reused += min(matched * workload.block_size, row["input_tokens"])
        total += row["input_tokens"]
        seen.update(tuple(blocks[: k + 1]) for k in range(len(blocks)))
    return reused / total


def test_trie_agrees_with_the_definition_on_real_traffic() -> None:
    window = read_mooncake(TRACES / "mooncake_conversation.jsonl").window(0, 600)
    share = trace_stats(window).prefix_reuse_share
    assert 0.1 < share < 0.9
    assert share == pytest.approx(brute_force_reuse_share(window))


def test_bundled_mooncake_stats() -> None:
    workload = read_mooncake(TRACES / "mooncake_conversation.jsonl")
    stats = trace_stats(workload)
    assert stats.requests == 12031
    assert stats.duration_s == pytest.approx(3536.999)
    assert stats.mean_output_tokens == pytest.approx(343, abs=1)


# --- `costbench workload inspect` -------------------------------------------------------------


def run_cli(argv: list[str]) -> int:
    return cli.main(argv)  # the entry point: it turns a bad trace into one stderr line and exit 2


def test_inspect_prints_the_stats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "small.jsonl"
    # 3 requests over 2.5 s; r1 reuses r0's first block (512 of 1024+600+700 = 2324 tokens → 22.0%).
    path.write_text(
        '{"timestamp": 0, "input_length": 1024, "output_length": 10, "hash_ids": [1, 2]}\n'
        '{"timestamp": 1000, "input_length": 600, "output_length": 20, "hash_ids": [1, 3]}\n'
        '{"timestamp": 2500, "input_length": 700, "output_length": 30, "hash_ids": [4, 5]}\n'
    )
    assert run_cli(["workload", "inspect", str(path), "--format", "mooncake"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"requests\s+│\s+3\s", out)
    for expected in ("2.5 s", "774.7 tokens", "20.0 tokens", "22.0%", "512 tokens", "ms"):
        assert expected in out


def test_inspect_bundled_azure(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["workload", "inspect", str(TRACES / "azure_conv_2023.csv"), "--format", "azure"]) == 0
    out = capsys.readouterr().out
    assert "19,366" in out and "0.0%" in out and "datetime" in out


def test_inspect_malformed_file_exits_2_with_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}\n{"timestamp": 1}\n')
    assert run_cli(["workload", "inspect", str(path), "--format", "mooncake"]) == 2
    captured = capsys.readouterr()
    assert f"{path}:2: missing field(s)" in captured.err
    assert captured.out == ""


def test_inspect_rejects_unknown_format_at_parse_time(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        run_cli(["workload", "inspect", "x.csv", "--format", "lmsys"])
    assert caught.value.code == 2
    assert "mooncake" in capsys.readouterr().err


def test_inspect_shows_excluded_rows_and_untimed_traces(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    burst = tmp_path / "burst.csv"
    burst.write_text(
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "1,ChatGPT,10,5,15,x\n2,ChatGPT,10,0,10,x\n3,GPT-4,10,5,15,x\n"
    )
    assert run_cli(["workload", "inspect", str(burst), "--format", "burstgpt", "--model", "ChatGPT"]) == 0
    out = capsys.readouterr().out
    assert "excluded rows" in out and "2 (failed (Response tokens = 0): 1; other model than ChatGPT: 1)" in out

    share = tmp_path / "share.json"
    share.write_text(
        '[{"id": "c", "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]}]'
    )
    assert run_cli(["workload", "inspect", str(share), "--format", "sharegpt", "--block-size", "8"]) == 0
    out = capsys.readouterr().out
    assert "none: untimed, needs synthetic arrivals" in out and "approx-4-bytes" in out and "8 tokens" in out
