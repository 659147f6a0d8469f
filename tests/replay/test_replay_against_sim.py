"""End to end against the SGLang twin (endpoints/sim) over real HTTP: exact prompts, prefix reuse, R1."""

from __future__ import annotations

from pathlib import Path

import pytest

from replay.recording.requests_reader import read_requests
from replay.runner import ReplayConfig, run_replay
from replay_sglang_peer import make_workload
from twin_process import running_sim

REPO = Path(__file__).resolve().parents[2]
BLOCK = 64


def _prefix_workload():
    """Groups of requests sharing k leading blocks (k = 1, 2, 3) with a first request that warms the
    prefix; every later one arrives after the first finished. Lengths vary and end mid-block."""
    arrivals, inputs, outputs, blocks, shared = [], [], [], [], []
    t = 0.0
    for group, k in enumerate((1, 2, 3)):
        common = [1000 * (group + 1) + j for j in range(k)]
        for member in range(3):
            own = [1000 * (group + 1) + 100 + member * 10 + j for j in range(2)]
            arrivals.append(t)
            inputs.append(BLOCK * (k + 2) - 5 - member)  # the last own block is cut short
            outputs.append(3 + member * 2)
            blocks.append(common + own)
            shared.append(k if member > 0 else 0)
            t += 0.4
    workload = make_workload(arrivals, prefix_blocks=blocks, block_size=BLOCK)
    table = workload.table
    table = table.set_column(table.schema.get_field_index("input_tokens"), "input_tokens", [inputs])
    table = table.set_column(table.schema.get_field_index("output_tokens"), "output_tokens", [outputs])
    return type(workload)(workload.name, workload.source_path, workload.trace_format, "s", BLOCK,
                          table.cast(workload.table.schema)), shared  # fmt: skip


@pytest.mark.timeout(60)
def test_exact_prompts_and_prefix_reuse_against_the_twin(tmp_path):
    workload, shared_blocks = _prefix_workload()
    with running_sim() as (url, _):
        run = run_replay(workload, ReplayConfig(url=url, request_timeout_s=30, flush_every_records=4), tmp_path)
    rows = {r["request_id"]: r for r in read_requests(tmp_path).to_pylist()}
    assert not run.partial and run.requests_ok == len(rows) == 9, [
        (r["error_kind"], r["error_message"]) for r in rows.values()
    ]
    assert run.server_info  # the twin serves /server_info
    for i, k in enumerate(shared_blocks):
        row = rows[f"r{i}"]
        assert row["prompt_tokens"] == row["input_tokens"], row  # the server saw exactly the ids we meant
        assert row["completion_tokens"] == row["output_tokens"], row  # and produced exactly what we asked
        assert row["sent_mono_s"] < row["first_token_mono_s"] <= row["finish_mono_s"]
        assert len(row["chunk_mono_s"]) >= 1 and row["finish_reason"] == "length"
        assert row["cached_tokens"] is not None
        if k:  # the group's first request finished before this one was sent: its k blocks are warm
            assert row["finish_mono_s"] is not None and rows[f"r{i - i % 3}"]["finish_mono_s"] < row["sent_mono_s"]
            assert row["cached_tokens"] >= k * BLOCK, (i, k, row["cached_tokens"])


@pytest.mark.timeout(60)
def test_r1_reasoning_length_reaches_the_twin_and_first_answer_follows_it(tmp_path):
    workload = make_workload([0.0, 0.2], input_tokens=32, output_tokens=12, reasoning_tokens=[5, 9])
    with running_sim("--model-path", "deepseek-ai/DeepSeek-R1", "--reasoning-parser", "deepseek-r1") as (url, _):
        run = run_replay(workload, ReplayConfig(url=url, require_reasoning=True), tmp_path)
    assert run.requests_ok == 2
    for row in read_requests(tmp_path).to_pylist():
        reasoning = 5 if row["request_id"] == "r0" else 9
        assert row["reasoning_tokens"] == reasoning and row["completion_tokens"] == 12
        # One token per chunk here: the first answer token is the chunk right after the reasoning.
        assert row["first_token_mono_s"] == row["chunk_mono_s"][0]
        assert row["first_answer_mono_s"] == row["chunk_mono_s"][reasoning]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend", ["openai-chat", "openai-completions"])
def test_openai_backends_against_the_twin_record_usage_and_reasoning(tmp_path, backend):
    """Text prompts through the OpenAI routes of an R1 twin: usage as reported (cached tokens under
    --enable-cache-report), reasoning_content counted, the first answer token after the reasoning."""
    workload = make_workload([0.0, 0.3], input_tokens=64, output_tokens=12, reasoning_tokens=[4, 7])
    flags = ("--model-path", "deepseek-ai/DeepSeek-R1", "--reasoning-parser", "deepseek-r1", "--enable-cache-report")
    with running_sim(*flags) as (url, _):
        run = run_replay(workload, ReplayConfig(url=url, backend=backend, request_timeout_s=30), tmp_path)
    rows = read_requests(tmp_path).to_pylist()
    assert run.requests_ok == len(rows) == 2, [(r["error_kind"], r["error_message"]) for r in rows]
    for row in rows:
        assert row["completion_tokens"] == row["output_tokens"] == 12  # ignore_eos + max tokens honoured
        assert row["prompt_tokens"] and row["prompt_tokens"] > 0  # text prompts: the server's own count
        assert row["sent_mono_s"] < row["first_token_mono_s"] <= row["finish_mono_s"]
    if backend == "openai-chat":
        for row in rows:
            reasoning = 4 if row["request_id"] == "r0" else 7
            assert row["reasoning_tokens"] == reasoning
            assert row["first_answer_mono_s"] > row["first_token_mono_s"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend", ["openai-chat", "openai-completions"])
@pytest.mark.parametrize("cache_report", [True, False])
def test_openai_backends_count_cold_requests_as_zero_cached_under_cache_report(tmp_path, backend, cache_report):
    """SGLang under --enable-cache-report omits prompt_tokens_details when nothing was cached (the twin
    does the same). A cold request then records 0 cached tokens, staying in the hit rate's denominator;
    without cache reporting nothing is known and every count stays None."""
    from replay.recording.summary import SUMMARY_COLUMNS, summarize

    block = 16
    # r0 warms the shared blocks; r1 (sent after r0 finished) reuses them.
    workload = make_workload([0.0, 0.6], input_tokens=4 * block, output_tokens=4, prefix_blocks=[[7, 8, 9, 10]] * 2,
                             block_size=block)  # fmt: skip
    flags = ("--enable-cache-report",) if cache_report else ()
    with running_sim(*flags) as (url, _):
        run = run_replay(workload, ReplayConfig(url=url, backend=backend, request_timeout_s=30), tmp_path)
    rows = {r["request_id"]: r for r in read_requests(tmp_path).to_pylist()}
    assert run.requests_ok == 2, [(r["error_kind"], r["error_message"]) for r in rows.values()]
    cold, warm = rows["r0"], rows["r1"]
    hit_rate = summarize(read_requests(tmp_path, SUMMARY_COLUMNS), run).prefix_cache_hit_rate
    if not cache_report:
        assert cold["cached_tokens"] is None and warm["cached_tokens"] is None and hit_rate is None
        return
    assert cold["cached_tokens"] == 0 and warm["cached_tokens"] > 0
    assert hit_rate == pytest.approx(warm["cached_tokens"] / (cold["prompt_tokens"] + warm["prompt_tokens"]))
