"""End to end: replay a small trace window against the SGLang twin (endpoints/sim) over real HTTP."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from replay.runner import ReplayConfig, run_replay
from replay_sglang_peer import make_workload

REPO = Path(__file__).resolve().parents[1]
SIM_MAIN = REPO / "endpoints" / "sim" / "__main__.py"


@pytest.fixture
def sim_url():
    if not SIM_MAIN.exists():
        pytest.skip("endpoints/sim has no HTTP entry point yet")
    proc = subprocess.Popen(
        [sys.executable, "-m", "endpoints.sim", "--host", "127.0.0.1", "--port", "0", "--tp-size", "8",
         "--sim-hardware", "h200", "--sim-warmup-s", "0"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        seen = []
        for line in proc.stdout:
            seen.append(line)
            match = re.search(r"costbench-sim listening on (http://127\.0\.0\.1:\d+)", line)
            if match:
                yield match.group(1)
                break
        else:
            pytest.fail("the sim exited before listening:\n" + "".join(seen))
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.timeout(60)
def test_replay_against_the_sim(sim_url, tmp_path):
    # Two requests share their first 64 tokens (same block hash): the second should hit the cache.
    workload = make_workload([0.0, 0.3, 0.6], input_tokens=128, output_tokens=8)
    table = workload.table.set_column(
        workload.table.schema.get_field_index("prefix_blocks"), "prefix_blocks",
        [[[1, 2], [1, 3], [4, 5]]],
    )
    workload = type(workload)(workload.name, workload.source_path, workload.trace_format, "s", 64,
                              table.cast(workload.table.schema))
    run = run_replay(workload, ReplayConfig(url=sim_url, speedup=1.0, request_timeout_s=30), tmp_path)
    assert not run.partial and run.requests_ok == 3, pq.read_table(tmp_path / "requests.parquet").to_pylist()
    assert run.server_info  # the sim serves /server_info
    rows = sorted(pq.read_table(tmp_path / "requests.parquet").to_pylist(), key=lambda r: r["request_id"])
    for row in rows:
        assert row["prompt_tokens"] == 128 and row["completion_tokens"] == 8
        assert row["sent_mono_s"] < row["first_token_mono_s"] <= row["finish_mono_s"]
        assert len(row["chunk_mono_s"]) >= 1 and row["finish_reason"] == "length"
    assert rows[1]["cached_tokens"] is not None and rows[1]["cached_tokens"] >= 64
