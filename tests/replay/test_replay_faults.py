"""The replay against the twin with its faults on: it finishes, and every request is accounted for."""

from __future__ import annotations

from collections import Counter

import pytest

from replay.recording.requests_reader import read_requests
from replay.runner import ReplayConfig, run_replay
from replay_sglang_peer import make_workload
from twin_process import running_sim

EARLY = 60  # every 50 ms for 3 s: errors, stalls, disconnects, the 503 period and the crash happen here
LATE = 5  # at 5 s, long after the crash: nothing listens any more
N = EARLY + LATE


@pytest.mark.timeout(60)
def test_errors_stalls_disconnects_a_503_period_and_a_crash_are_all_recorded(tmp_path):
    faults = (
        "--fault-error-rate", "0.15", "--fault-disconnect-rate", "0.15",
        "--fault-stall-s", "2", "--fault-stall-rate", "0.1",
        "--fault-503-after-s", "0.6", "--fault-503-for-s", "0.5",
        "--fault-crash-after", "25", "--fault-seed", "7",
    )  # fmt: skip
    arrivals = [i * 0.05 for i in range(EARLY)] + [5.0 + i * 0.05 for i in range(LATE)]
    workload = make_workload(arrivals, input_tokens=32, output_tokens=4)
    with running_sim(*faults) as (url, proc):
        run = run_replay(workload, ReplayConfig(url=url, request_timeout_s=1.0, flush_every_records=8), tmp_path)
        proc.wait(10)  # it crashed, as asked
    rows = read_requests(tmp_path).to_pylist()

    # The replay finished, and its counts add up to the workload.
    assert not run.partial
    assert run.requests_total == run.requests_recorded == len(rows) == N
    assert sorted(r["request_id"] for r in rows) == sorted(f"r{i}" for i in range(N))
    ok = [r for r in rows if r["status"] == "ok"]
    failed = [r for r in rows if r["status"] != "ok"]
    assert run.requests_ok == len(ok) and len(ok) + len(failed) == N
    # Every completed request is kept whole; every failed one says why.
    assert ok and all(r["completion_tokens"] == r["output_tokens"] and r["error_kind"] is None for r in ok)
    assert all(r["error_kind"] and r["error_message"] for r in failed)
    causes = Counter(r["error_kind"] for r in failed)
    assert causes["stream_error"] >= 1  # error events mid-stream
    assert causes["timeout"] >= 1 and all(r["status"] == "timeout" for r in failed if r["error_kind"] == "timeout")
    assert any(r["http_status"] == 503 for r in failed)  # the 503 period
    assert causes["connection"] + causes["incomplete_stream"] >= 1  # disconnects mid-stream and the crash
    # After the crash nothing answers: the late requests failed to connect, with no HTTP status.
    late = sorted(rows, key=lambda r: r["scheduled_mono_s"])[EARLY:]
    assert all(r["error_kind"] == "connection" and r["http_status"] is None for r in late), late
    # The cost window is the time the endpoint was held: to the end of the last request, the late refused ones
    # included, not to the last answer before the crash (which cut it to about 3 s of the 5.2 s replayed).
    answered_until_s = max(r["finish_mono_s"] for r in rows if r["finish_mono_s"] is not None)
    assert answered_until_s < 5.0 <= max(r["scheduled_mono_s"] for r in late) <= run.window_s
