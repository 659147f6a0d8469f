"""Durability bounded by time, not by traffic: `costbench replay` as a real process against the twin
(endpoints/sim over HTTP on 127.0.0.1), stopped during a pause in arrivals.

The trace: four short requests at t = 0, one long one that is still streaming when the test stops the
run, then a 60 s pause before two more. SIGKILL in the pause, once flush_interval_s has passed since
the short ones finished, must leave all four readable from the part files; SIGTERM in the pause must
end the run exactly as SIGINT does, with every request of the window accounted for. And where SIGTERM
is taken over at all: only in the main thread, only where nothing else claimed it, put back after.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from endpoints.probes.metrics_scrape import parse_sglang_metrics
from endpoints.sim.http.server import create_app
from endpoints.sim.server_args import parse_server_args
from endpoints_loopback import serve_in_thread
from replay.recording.requests_reader import REQUESTS_FILE, read_requests, requests_partial_parts
from replay.recording.run_json import read_run_json
from replay.replay_config import ReplayConfig
from replay.schedule.open_loop import STOPPED_NOT_DUE, STOPPED_UNFINISHED
from replay.schedule.stop_signals import sigterm_as_sigint

REPO = Path(__file__).resolve().parents[2]
TWIN_FLAGS = ["--tp-size", "8", "--sim-hardware", "h200", "--sim-warmup-s", "0", "--enable-metrics"]
FLUSH_INTERVAL_S = ReplayConfig(url="http://127.0.0.1:1").flush_interval_s  # the default under test
# Request ids are the trace's line numbers.
SHORT = ["0", "1", "2", "3"]  # done ~0.3 s after t0 on the twin
LONG = "4"  # 4000 output tokens: streams for ~40 s, far longer than the test runs
LATE = ["5", "6"]  # due after the pause
TRACE = "".join(
    f'{{"timestamp": {t_ms}, "input_length": 20, "output_length": {out}, "hash_ids": [{i}]}}\n'
    for i, (t_ms, out) in enumerate([(0, 3), (10, 3), (20, 3), (30, 3), (40, 4000), (60_000, 3), (60_010, 3)])
)
# The CLI's own run_command in a fresh process, with SIGINT's default Python handler (a process
# started from a script with `&` inherits SIGINT ignored) and without importing Dagster, which the
# full `costbench` parser pulls in through other sub-commands and which costs seconds of start-up.
CHILD = """
import argparse, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
from pipelines.commands import replay_command
parser = argparse.ArgumentParser()
replay_command.register(parser.add_subparsers(dest="command", required=True))
args = parser.parse_args(sys.argv[1:])
sys.exit(args.func(args))
"""
WAIT_S = 30.0  # bound on every wait for the twin or the replay


def _start_replay(trace: Path, url: str, out: Path) -> subprocess.Popen:
    argv = ["replay", "--trace", str(trace), "--format", "mooncake", "--url", url, "--out", str(out), "--no-progress"]
    return subprocess.Popen([sys.executable, "-c", CHILD, *argv], cwd=REPO, stderr=subprocess.PIPE, text=True)


def _twin_metric(url: str, name: str) -> float:
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as response:
        series = parse_sglang_metrics(response.read().decode())
    return sum(s.value for s in series if s.metric == name)


def _finished_on_twin(url: str) -> float:
    return _twin_metric(url, "sglang:e2e_request_latency_seconds_count")


def _readable(out: Path) -> list[str]:
    try:
        return read_requests(out, ["request_id"]).column("request_id").to_pylist()
    except FileNotFoundError:
        return []


def _wait_for(condition, proc: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert proc.poll() is None, f"the replay exited before {what}: {proc.stderr.read()}"
        assert time.monotonic() < deadline, f"no {what} within {WAIT_S} s"
        time.sleep(0.05)


@pytest.fixture
def twin_url():
    with serve_in_thread(create_app(parse_server_args(TWIN_FLAGS))) as url:
        yield url


@pytest.fixture
def trace(tmp_path) -> Path:
    path = tmp_path / "paused.jsonl"
    path.write_text(TRACE)
    return path


@pytest.mark.timeout(90)
def test_sigkill_in_a_pause_of_arrivals_leaves_every_finished_request_readable(tmp_path, twin_url, trace):
    out = tmp_path / "run"
    proc = _start_replay(trace, twin_url, out)
    try:
        _wait_for(lambda: _finished_on_twin(twin_url) >= len(SHORT), proc, "the short requests finishing")
        finished_s = time.monotonic()
        # Kill once flush_interval_s has passed since they finished and they are readable, or at the
        # bound; before the timer flush they stayed in memory for the whole pause.
        kill_by_s = finished_s + FLUSH_INTERVAL_S + 5.0  # far inside the 60 s pause
        while time.monotonic() < kill_by_s and (
            time.monotonic() < finished_s + FLUSH_INTERVAL_S or len(_readable(out)) < len(SHORT)
        ):
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.05)
        assert _finished_on_twin(twin_url) == len(SHORT)  # still in the pause: nothing else finished
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(10)
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    assert requests_partial_parts(out)
    table = read_requests(out)
    assert sorted(table.column("request_id").to_pylist()) == SHORT
    assert set(table.column("status").to_pylist()) == {"ok"}
    run = read_run_json(out)
    assert run.partial and run.requests_total == len(SHORT) + 1 + len(LATE)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_sigterm_in_a_pause_of_arrivals_ends_the_run_like_sigint(tmp_path, twin_url, trace, stop):
    out = tmp_path / "run"
    proc = _start_replay(trace, twin_url, out)
    try:
        # The short requests are recorded by the replay and the long one streams: the pause has begun.
        _wait_for(lambda: sorted(_readable(out)) == SHORT, proc, "the short requests on disk")
        _wait_for(lambda: _twin_metric(twin_url, "sglang:num_running_reqs") == 1, proc, "the long request running")
        os.kill(proc.pid, stop)
        proc.wait(WAIT_S)
        stderr = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        proc.stderr.close()
    assert proc.returncode == 130, stderr
    assert "interrupted; partial results in" in stderr
    assert (out / REQUESTS_FILE).exists() and not requests_partial_parts(out)  # merged, as on a clean end
    rows = {r["request_id"]: r for r in read_requests(out).to_pylist()}
    assert sorted(rows) == SHORT + [LONG] + LATE  # every request of the window
    assert all(rows[i]["status"] == "ok" for i in SHORT)
    assert rows[LONG]["status"] == "cancelled" and rows[LONG]["error_message"] == STOPPED_UNFINISHED
    assert all(rows[i]["status"] == "cancelled" and rows[i]["error_message"] == STOPPED_NOT_DUE for i in LATE)
    run = read_run_json(out)
    assert run.partial and run.finished_wall_s is None
    assert (run.requests_total, run.requests_recorded, run.requests_ok) == (7, 7, 4)


def test_sigterm_calls_the_sigint_handler_of_the_moment_only_where_sigterm_was_unclaimed():
    previous_term, previous_int = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    seen: list = []
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        with sigterm_as_sigint():
            assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, signal.SIG_IGN)
            signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))  # as asyncio.run does inside
            signal.raise_signal(signal.SIGTERM)
        assert seen == [signal.SIGINT]
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # put back

        def host_handler(signum, frame):  # a host with its own SIGTERM handling (Dagster's run worker)
            seen.append("host")

        signal.signal(signal.SIGTERM, host_handler)
        with sigterm_as_sigint():
            assert signal.getsignal(signal.SIGTERM) is host_handler

        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        in_thread: list = []

        def other_thread() -> None:
            with sigterm_as_sigint():  # only the main thread may set handlers
                in_thread.append(signal.getsignal(signal.SIGTERM))

        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join(10)
        assert in_thread == [signal.SIG_DFL]
    finally:
        signal.signal(signal.SIGTERM, previous_term)
        signal.signal(signal.SIGINT, previous_int)
