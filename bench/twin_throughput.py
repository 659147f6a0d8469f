"""How many streamed tokens per second, and how many concurrent streams, the HTTP twin sustains on
one core. The twin runs in its own process; this script is the client, in another, on loopback.

    python bench/twin_throughput.py            # 1,000 streams, --stream-interval 1 (about a minute)
    python bench/twin_throughput.py --quick    # 200 streams, a few seconds

The twin is configured so the simulated GPUs are faster than the Python can stream (8×B200 with DP
attention, short prompts, long outputs): the figure is the twin's own limit. It prints the client's
sustained tokens/s, the modelled rate the same steps would give, their ratio (below 1: Python is
the bottleneck and simulated time stretches), and the engine's per-step and per-token overhead.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import aiohttp

REPO = Path(__file__).resolve().parents[1]
TWIN_FLAGS = ["--model-path", "deepseek-ai/DeepSeek-V3", "--tp", "8", "--dp", "8", "--enable-dp-attention",
              "--sim-hardware", "b200", "--stream-interval", "1", "--max-running-requests", "4096"]  # fmt: skip


def start_twin(extra: list[str]) -> tuple[subprocess.Popen, str]:
    command = [sys.executable, "-m", "endpoints.sim", "--host", "127.0.0.1", "--port", "0", *TWIN_FLAGS, *extra]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None  # stdout=PIPE
    for line in process.stdout:
        match = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
        if match:
            return process, match.group(1)
    raise RuntimeError("the twin exited before listening")


def internal_state(url: str) -> dict:
    with urllib.request.urlopen(f"{url}/server_info", timeout=30) as response:
        return json.loads(response.read())["internal_states"][0]


async def stream(session: aiohttp.ClientSession, url: str, i: int, output_tokens: int, counts: list[int]) -> None:
    body = {"input_ids": [1000 + i, *range(2000, 2100)], "stream": True,
            "sampling_params": {"max_new_tokens": output_tokens, "ignore_eos": True}}  # fmt: skip
    async with session.post(f"{url}/generate", json=body) as response:
        async for data in response.content.iter_any():
            counts[i] += data.count(b"data: ")


async def drive(url: str, streams: int, output_tokens: int, window_s: float) -> dict:
    counts = [0] * streams
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=None)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        tasks = [asyncio.create_task(stream(session, url, i, output_tokens, counts)) for i in range(streams)]
        await asyncio.sleep(window_s / 3)  # ramp-up: every stream admitted and prefilled
        before_s, before_tokens, before_state = time.perf_counter(), sum(counts), internal_state(url)
        await asyncio.sleep(window_s)
        after_s, after_tokens, after_state = time.perf_counter(), sum(counts), internal_state(url)
        live = sum(1 for t in tasks if not t.done())
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    steps = after_state["sim_steps"] - before_state["sim_steps"]
    cpu_s = after_state["sim_loop_cpu_s"] - before_state["sim_loop_cpu_s"]
    tokens = after_tokens - before_tokens
    return {
        "streams": streams,
        "live_streams": live,
        "tok_s": tokens / (after_s - before_s),
        "modelled_tok_s": after_state["last_gen_throughput"],
        "steps": steps,
        "step_overhead_us": cpu_s / steps * 1e6 if steps else float("nan"),
        "engine_us_per_token": cpu_s / tokens * 1e6 if tokens else float("nan"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 streams, short window")
    parser.add_argument("--streams", type=int, default=None)
    parser.add_argument(
        "--cumulative", action="store_true", help="SGLang's default cumulative chunks instead of deltas"
    )
    args = parser.parse_args(argv)
    streams = args.streams or (200 if args.quick else 1000)
    window_s = 3.0 if args.quick else 15.0
    extra = [] if args.cumulative else ["--incremental-streaming-output"]
    process, url = start_twin(extra)
    try:
        result = asyncio.run(drive(url, streams, output_tokens=2_000, window_s=window_s))
    finally:
        process.terminate()
        process.wait(10)
    mode = "cumulative" if args.cumulative else "incremental"
    print(f"streams open: {result['streams']} ({result['live_streams']} still streaming at the end), "
          f"--stream-interval 1, {mode} chunks, native /generate")  # fmt: skip
    print(f"sustained streamed tokens/s (client): {result['tok_s']:,.0f}")
    print(f"modelled decode tokens/s (gen_throughput): {result['modelled_tok_s']:,.0f}")
    print(f"achieved / modelled: {result['tok_s'] / result['modelled_tok_s']:.2f}")
    print(f"engine Python per step: {result['step_overhead_us']:,.0f} µs over {result['steps']} steps; "
          f"per streamed token: {result['engine_us_per_token']:.1f} µs "
          "(scheduling and delivery, HTTP excluded)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
