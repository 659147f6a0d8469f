"""SGLang's own benchmark client, `python -m sglang.bench_serving`, against the twin over loopback HTTP.

Native (`--backend sglang`, /generate) and OpenAI (`sglang-oai` /v1/completions, `sglang-oai-chat`
/v1/chat/completions) backends, 20 prompts each of 64 tokens in and 16 out (`--dataset-name random` over a
local ShareGPT-format file, a tokenizer built from local files, HF_HUB_OFFLINE=1): every request completes,
none fails, and the output tokens bench_serving counts are the ones asked for.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from bench_inputs import write_sharegpt, write_tokenizer

PROMPTS, INPUT_LEN, OUTPUT_LEN = 20, 64, 16
TIMEOUT_S = 240


BACKENDS = ("sglang", "sglang-oai", "sglang-oai-chat")


@pytest.fixture(scope="module")
def runs(tmp_path_factory, twin_v3) -> dict[str, tuple[subprocess.CompletedProcess, Path]]:
    """One bench_serving process per backend, run side by side (most of each one's time is importing sglang)."""
    root = tmp_path_factory.mktemp("bench_serving")
    tokenizer, dataset = write_tokenizer(root / "tokenizer"), write_sharegpt(root / "sharegpt.json")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    started = {}
    for backend in BACKENDS:
        output = root / f"{backend}.jsonl"
        command = [
            sys.executable, "-W", "ignore", "-m", "sglang.bench_serving", "--backend", backend,
            "--base-url", twin_v3.base_url, "--model", "deepseek-ai/DeepSeek-V3", "--tokenizer", str(tokenizer),
            "--dataset-name", "random", "--dataset-path", str(dataset), "--num-prompts", str(PROMPTS),
            "--random-input-len", str(INPUT_LEN), "--random-output-len", str(OUTPUT_LEN),
            "--random-range-ratio", "1.0", "--request-rate", "inf", "--max-concurrency", "8", "--seed", "1",
            "--disable-tqdm", "--output-file", str(output), "--output-details",
        ]  # fmt: skip
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        started[backend] = (process, command, output)
    finished = {}
    for backend, (process, command, output) in started.items():
        stdout, _ = process.communicate(timeout=TIMEOUT_S)
        finished[backend] = (subprocess.CompletedProcess(command, process.returncode, stdout), output)
    return finished


@pytest.mark.parametrize("backend", BACKENDS)
def test_bench_serving_runs_against_the_twin_with_no_failed_request(backend, runs, record_property):
    run, output = runs[backend]
    assert run.returncode == 0, run.stdout[-4000:]
    result = json.loads(output.read_text().splitlines()[-1])
    errors = [e for e in result.get("errors", []) if e]
    record_property(
        "checked",
        f"{result['completed']}/{PROMPTS} completed, {len(errors)} errors, {result['total_output_tokens']} output "
        f"tokens, {result['output_throughput']:.0f} tok/s, median TTFT {result['median_ttft_ms']:.0f} ms",
    )
    assert result["completed"] == PROMPTS and not errors, errors[:3]
    assert result["total_output_tokens"] == PROMPTS * OUTPUT_LEN
