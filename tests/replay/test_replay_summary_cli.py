"""The summary math, and `costbench replay` end to end against a real peer."""

from __future__ import annotations

import argparse
import dataclasses
import socket

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.commands import replay_command
from replay.recording.records import REQUEST_RECORD_SCHEMA, RequestRecord, RequestStatus, RunInfo
from replay.recording.run_json import read_run_json
from replay.recording.summary import summarize
from replay_sglang_peer import PeerBehaviour, peer_in_thread


def _ok(
    request_id: str, sent_s: float, ttft_s: float, e2e_s: float, prompt: int | None, cached: int | None
) -> RequestRecord:
    return RequestRecord(
        run_id="r",
        request_id=request_id,
        session_id=None,
        turn=None,
        input_tokens=10,
        output_tokens=5,
        scheduled_mono_s=sent_s - 0.01,
        sent_mono_s=sent_s,
        first_token_mono_s=sent_s + ttft_s,
        first_answer_mono_s=None,
        finish_mono_s=sent_s + e2e_s,
        chunk_mono_s=(),
        prompt_tokens=prompt,
        completion_tokens=5,
        cached_tokens=cached,
        reasoning_tokens=None,
        finish_reason="length",
        http_status=200,
        status=RequestStatus.OK,
    )


def _run_info(**changes) -> RunInfo:
    base = RunInfo(
        run_id="r",
        workload_name="w",
        workload_hash="h",
        trace_path="t",
        trace_format="mooncake",
        start_s=0.0,
        duration_s=None,
        speedup=1.0,
        url="http://x",
        backend="sglang",
        t0_wall_s=0.0,
        finished_wall_s=1.0,
        window_s=10.0,
        requests_total=4,
        requests_recorded=4,
        requests_ok=3,
        schedule_lag_p50_ms=0.1,
        schedule_lag_p99_ms=0.4,
        schedule_lag_max_ms=0.5,
        client_degraded=False,
        partial=False,
    )
    return dataclasses.replace(base, **changes)


def test_summary_math_uses_the_warehouse_definitions():
    records = [
        _ok("a", 0.0, 0.1, 1.0, prompt=100, cached=50),
        _ok("b", 1.0, 0.2, 2.0, prompt=100, cached=0),
        _ok("c", 2.0, 0.3, 3.0, prompt=None, cached=None),  # not reported: left out of the hit rate
        dataclasses.replace(
            _ok("d", 3.0, 0.4, 4.0, 100, 100),
            status=RequestStatus.ERROR,
            error_kind="http_status",
            first_token_mono_s=None,
            finish_mono_s=None,
            completion_tokens=None,
        ),
        dataclasses.replace(
            _ok("e", 4.0, 0.5, 5.0, 100, 0),
            status=RequestStatus.CANCELLED,
            error_kind="cancelled",
            first_token_mono_s=None,
            finish_mono_s=None,
            completion_tokens=None,
        ),
        # Warm-up: counted as such and in nothing else (its 9 s TTFT, its full cache hit, its error).
        dataclasses.replace(_ok("w1", 0.0, 9.0, 9.5, 100, 100), is_warmup=True),
        dataclasses.replace(
            _ok("w2", 0.0, 9.0, 9.5, 100, 100), is_warmup=True, status=RequestStatus.TIMEOUT, error_kind="timeout"
        ),
    ]
    table = pa.Table.from_pylist([r.to_row() for r in records], schema=REQUEST_RECORD_SCHEMA)
    s = summarize(table, _run_info(requests_total=7))
    assert (s.requests_completed, s.requests_failed, s.requests_cancelled, s.requests_warmup) == (3, 1, 1, 2)
    assert s.requests_total == 7
    assert s.request_rate_per_s == pytest.approx(0.3)  # 3 completed over the 10 s measured window
    assert s.output_tokens_per_s == pytest.approx(1.5)
    assert s.ttft_p50_ms == pytest.approx(200.0)
    assert s.e2e_p50_ms == pytest.approx(2000.0)
    assert s.e2e_p95_ms == pytest.approx(2900.0)
    assert s.e2e_from_scheduled_p95_ms == pytest.approx(2910.0)
    assert s.prefix_cache_hit_rate == pytest.approx(50 / 200)  # completed requests only, as run_summary
    assert s.errors_by_kind == (("http_status", 1), ("cancelled", 1))


def test_summary_of_nothing_is_empty_not_a_crash():
    table = REQUEST_RECORD_SCHEMA.empty_table()
    s = summarize(table, _run_info(window_s=None, requests_ok=0))
    assert s.requests_completed == 0 and s.ttft_p50_ms is None and s.prefix_cache_hit_rate is None
    assert s.request_rate_per_s is None


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    replay_command.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


MOONCAKE = "".join(
    f'{{"timestamp": {t}, "input_length": 20, "output_length": 3, "hash_ids": [0]}}\n' for t in (0, 100, 200, 5000)
)


def test_cli_replays_a_trace_window_and_prints_the_summary(tmp_path, capsys):
    trace = tmp_path / "trace.jsonl"
    trace.write_text(MOONCAKE)
    out = tmp_path / "run"
    with peer_in_thread(PeerBehaviour(cached_tokens=10)) as peer:
        code = _cli(
            [
                "replay",
                "--trace",
                str(trace),
                "--format",
                "mooncake",
                "--url",
                peer.url,
                "--start-s",
                "0",
                "--duration-s",
                "1",
                "--speedup",
                "4",
                "--out",
                str(out),
            ]
        )
    assert code == 0
    assert len(peer.bodies) == 3  # the request at 5 s is outside the window
    assert all(len(b["input_ids"]) == 20 and b["sampling_params"]["max_new_tokens"] == 3 for b in peer.bodies)
    assert peer.bodies[0]["input_ids"][:20] == peer.bodies[1]["input_ids"][:20]  # same block hash, same ids
    table = pq.read_table(out / "requests.parquet")
    assert table.num_rows == 3 and set(table.column("status").to_pylist()) == {"ok"}
    assert sorted(table.column("scheduled_mono_s").to_pylist()) == pytest.approx([0.0, 0.025, 0.05])
    run = read_run_json(out)
    assert not run.partial and run.requests_ok == 3 and run.trace_format == "mooncake"
    printed = capsys.readouterr().out
    assert "3 / 0 / 3" in printed and "50.0 %" in printed  # completed/failed/total; 10 of 20 prompt tokens cached


def test_cli_exit_2_on_a_bad_trace(tmp_path, capsys):
    trace = tmp_path / "bad.jsonl"
    trace.write_text('{"timestamp": 0}\n')
    assert _cli(["replay", "--trace", str(trace), "--format", "mooncake", "--url", "http://127.0.0.1:9"]) == 2
    assert "bad.jsonl" in capsys.readouterr().err


def test_cli_exit_2_when_the_endpoint_is_unreachable(tmp_path, capsys):
    trace = tmp_path / "trace.jsonl"
    trace.write_text(MOONCAKE)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = _cli(
        [
            "replay",
            "--trace",
            str(trace),
            "--format",
            "mooncake",
            "--url",
            f"http://127.0.0.1:{port}",
            "--out",
            str(tmp_path / "run"),
        ]
    )
    assert code == 2
    assert "unreachable" in capsys.readouterr().err


def test_progress_shows_the_live_counters_and_is_quiet_in_ci():
    import io

    from rich.console import Console

    from replay.recording.progress_counters import ReplayProgress
    from replay.recording.progress_display import progress_wanted, render_progress

    progress = ReplayProgress(total=10)
    for _ in range(4):
        progress.on_sent()
    record = _ok("a", sent_s=1.003, ttft_s=0.1, e2e_s=0.5, prompt=10, cached=0)  # scheduled 10 ms earlier
    progress.on_record(record)
    progress.on_record(dataclasses.replace(record, status=RequestStatus.ERROR))
    console = Console(file=io.StringIO(), width=120, force_terminal=True)
    console.print(render_progress(progress, lag_degraded_ms=5.0))
    shown = console.file.getvalue()
    for text in ("sent 4/10", "done 2", "errors 1", "in flight 2", "lag 10.0 ms"):
        assert text in shown, shown
    assert progress_wanted(console, environ={}) and not progress_wanted(console, environ={"CI": "true"})
    assert not progress_wanted(Console(file=io.StringIO()), environ={})  # not a terminal
