"""What a SIGKILLed replay loses, and how long a completed record takes to reach a part file on disk.

Replays the first requests of the Azure conversation trace (workloads/traces/azure_conv_2023.csv)
with a pause of --pause-s inserted after the first 12 (the shape of a trace whose traffic stops for a
while), as `costbench replay` in a child process against the twin (endpoints/sim, served from this
process on 127.0.0.1), and SIGKILLs it: once inside the pause (--pause-kill-s after t0), then
--trials times at random moments. Per kill it prints how many requests the twin had finished, how many
records the part files hold, and how many the twin had finished more than flush_interval_s + 0.1 s
before the kill (all of those must be readable). Over all runs it prints the delay from a record's
finish_mono_s to the moment its part file was seen (polled every --poll-s; records' times are seconds
after t0, placed on this process's monotonic clock through run.json's t0_wall_s).

    python bench/replay_durability.py             # about 2-3 minutes
    python bench/replay_durability.py --trials 2  # about a minute
"""

from __future__ import annotations

import argparse
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import orjson
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from endpoints.probes.metrics_scrape import parse_sglang_metrics  # noqa: E402
from endpoints.sim.http.server import create_app  # noqa: E402
from endpoints.sim.server_args import parse_server_args  # noqa: E402
from endpoints_loopback import serve_in_thread  # noqa: E402
from replay.recording.requests_reader import part_paths, read_requests  # noqa: E402
from workloads.readers.reader_registry import read_trace  # noqa: E402

AZURE = REPO / "workloads" / "traces" / "azure_conv_2023.csv"
TWIN_FLAGS = ["--tp-size", "8", "--sim-hardware", "h200", "--sim-warmup-s", "0", "--enable-metrics"]
FLUSH_INTERVAL_S = 1.0  # ReplayConfig's default
BOUND_MARGIN_S = 0.1  # allowance for the write and the twin-to-client hop when checking the bound
FIRST_BURST = 12


def paused_trace(path: Path, pause_s: float, requests: int) -> None:
    """The Azure trace's first `requests` as Mooncake JSONL, every arrival after the 12th moved pause_s later."""
    table = read_trace(AZURE, "azure").table.slice(0, requests)
    arrivals = table.column("arrival_s").to_pylist()
    inputs = table.column("input_tokens").to_pylist()
    outputs = table.column("output_tokens").to_pylist()
    with path.open("wb") as f:
        for i, (arrival_s, n_in, n_out) in enumerate(zip(arrivals, inputs, outputs)):
            shifted_s = arrival_s + (pause_s if i >= FIRST_BURST else 0.0)
            blocks = [i * 1000 + b for b in range(math.ceil(n_in / 512))]  # no shared prefixes
            line = {
                "timestamp": round(shifted_s * 1000),
                "input_length": n_in,
                "output_length": n_out,
                "hash_ids": blocks,
            }
            f.write(orjson.dumps(line) + b"\n")


def twin_finished(url: str) -> float:
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as response:
        series = parse_sglang_metrics(response.read().decode())
    return sum(s.value for s in series if s.metric == "sglang:e2e_request_latency_seconds_count")


def one_kill(trace: Path, kill_after_s: float, poll_s: float) -> tuple[dict, list[float]]:
    """Replay `trace`, SIGKILL kill_after_s after t0; the counts, and each visible record's finish-to-disk delay."""
    with serve_in_thread(create_app(parse_server_args(TWIN_FLAGS))) as url, tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        argv = [sys.executable, "-m", "pipelines", "replay", "--trace", str(trace), "--format", "mooncake",
                "--url", url, "--out", str(out), "--no-progress"]  # fmt: skip
        proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL)
        seen_parts: set[str] = set()
        delays_s: list[float] = []
        finished_at: list[tuple[float, float]] = []  # (monotonic s, twin's finished count)
        try:
            while not (out / "run.json").exists():
                assert proc.poll() is None, "the replay exited before it started"
                time.sleep(poll_s)
            t0_wall_s = orjson.loads((out / "run.json").read_bytes())["t0_wall_s"]
            t0_mono_s = time.monotonic() + (t0_wall_s - time.time())
            kill_mono_s = t0_mono_s + kill_after_s
            while time.monotonic() < kill_mono_s:
                assert proc.poll() is None, "the replay ended before the kill"
                finished_at.append((time.monotonic(), twin_finished(url)))
                for part in part_paths(out):
                    if part.name not in seen_parts:
                        seen_mono_s = time.monotonic()
                        seen_parts.add(part.name)
                        finishes = pq.read_table(part, columns=["finish_mono_s"]).column(0).to_pylist()
                        delays_s += [seen_mono_s - (t0_mono_s + f) for f in finishes if f is not None]
                time.sleep(poll_s)
            finished = twin_finished(url)
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.wait(10)
        readable = read_requests(out, ["status"]).num_rows
        bound_s = kill_mono_s - FLUSH_INTERVAL_S - BOUND_MARGIN_S
        due = max((count for at_s, count in finished_at if at_s <= bound_s), default=0.0)
    counts = {"kill_s": kill_after_s, "finished": int(finished), "readable": readable, "due_by_bound": int(due)}
    return counts, delays_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=5, help="random-moment kills (default 5)")
    parser.add_argument("--pause-s", type=float, default=20.0, help="pause inserted after the first 12 requests")
    parser.add_argument("--pause-kill-s", type=float, default=25.0, help="the in-pause kill, seconds after t0")
    parser.add_argument("--kill-range-s", type=float, nargs=2, default=(5.0, 40.0), help="random kill window")
    parser.add_argument("--requests", type=int, default=400, help="requests of the trace to replay")
    parser.add_argument("--poll-s", type=float, default=0.02)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    kills = [args.pause_kill_s] + [rng.uniform(*args.kill_range_s) for _ in range(args.trials)]
    all_delays: list[float] = []
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "azure_paused.jsonl"
        paused_trace(trace, args.pause_s, args.requests)
        for kill_s in kills:
            counts, delays = one_kill(trace, kill_s, args.poll_s)
            rows.append(counts)
            all_delays += delays
            lost = counts["finished"] - counts["readable"]
            print(f"SIGKILL at {kill_s:5.1f} s: twin finished {counts['finished']:4d}, "
                  f"readable {counts['readable']:4d}, "
                  f"lost {lost:3d}; finished > {FLUSH_INTERVAL_S + BOUND_MARGIN_S:.1f} s before the kill "
                  f"{counts['due_by_bound']:4d} (all readable: {counts['readable'] >= counts['due_by_bound']})",
                  flush=True)  # fmt: skip
    random_rows = rows[1:]
    print(f"random kills: lost {sum(r['finished'] - r['readable'] for r in random_rows)} "
          f"of {sum(r['finished'] for r in random_rows)} finished")  # fmt: skip
    if all_delays:
        all_delays.sort()
        p99 = all_delays[min(len(all_delays) - 1, int(0.99 * len(all_delays)))]
        print(f"finish -> part file seen ({len(all_delays)} records, poll {args.poll_s * 1000:.0f} ms): "
              f"median {statistics.median(all_delays) * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, "
              f"max {all_delays[-1] * 1000:.0f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
