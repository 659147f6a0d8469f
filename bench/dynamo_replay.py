"""Dynamo's side of bench/twin_engine_speed.py: NVIDIA Dynamo's offline replay engine (PyPI `ai-dynamo` 1.6.1, the
engine AIPerf's dynosim backend drives) run on a request trace, timed in CPU seconds. It runs in its own environment
(build/dynamo-venv, built by `make dynamo-venv` from bench/dynamo_requirements.txt), imports nothing of costbench's,
and downloads nothing: no model config, no tokenizer (the trace carries token counts, not text).

    build/dynamo-venv/bin/python bench/dynamo_replay.py --trace requests.jsonl --concurrency 64 --engine '{...}'
    build/dynamo-venv/bin/python bench/dynamo_replay.py --trace requests.jsonl --concurrency 128 \\
        --prefill '{...}' --prefill-workers 1 --decode '{...}' --decode-workers 3

The trace is Mooncake JSONL (`write_trace` writes it): one request a line, every one at time 0, sent closed loop
behind `--concurrency` (Dynamo's `replay_concurrency`). An engine is Dynamo's launch config, e.g.
`{"engine": {"backend": "sglang", "block_size": 1, "num_gpu_blocks": 664536, "max_num_seqs": 2048}}`: its SGLang
scheduler (aisimulate_core's, compiled into ai-dynamo-runtime) with its built-in polynomial step-time model. Model-
and GPU-specific step times (`timing_model` provider "ais") need `aisimulate_core`, which only NVIDIA's own package
index serves (PyPI's `aisimulate` is a stub that downloads from there), so they are out of reach here.

The engine call is `dynamo.replay.run_trace_replay` (offline mode, round-robin routing): it reads the trace, builds the
Rust runtime and its workers, simulates every request on a virtual clock and returns the report (the summary's
percentiles computed in Rust, wrapped in Python). `time.process_time()` around that call alone, so every thread of
the process counts and the interpreter's start, the imports and the trace's writing do not. Prints one JSON line:
{"requests": N, "cpu_s": ..., "cpu_s_per_1000": ..., "simulated_s": ..., "output_tok_s": ..., "engine": ...}.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

TRACE_BLOCK_TOKENS = 512  # the Mooncake trace's hash-id block; each request's prompt has blocks of its own


def write_trace(path: Path, lengths: Iterable[tuple[int, int]]) -> int:
    """A Mooncake trace of (input tokens, output tokens) requests, all at time 0, with no prompt shared; returns how
    many requests it holds."""
    block = count = 0
    with path.open("w") as out:
        for input_tokens, output_tokens in lengths:
            blocks = math.ceil(input_tokens / TRACE_BLOCK_TOKENS)
            line = {"timestamp": 0, "input_length": input_tokens, "output_length": output_tokens,
                    "hash_ids": list(range(block, block + blocks))}  # fmt: skip
            out.write(json.dumps(line) + "\n")
            block += blocks
            count += 1
    return count


def replay(args: argparse.Namespace) -> dict[str, Any]:
    from importlib.metadata import version

    from dynamo.replay import run_trace_replay

    if args.engine is not None:
        roles: dict[str, Any] = {"extra_engine_args": json.loads(args.engine)}
    else:
        roles = {
            "prefill_engine_args": json.loads(args.prefill),
            "decode_engine_args": json.loads(args.decode),
            "num_prefill_workers": args.prefill_workers,
            "num_decode_workers": args.decode_workers,
        }
    started_s = time.process_time()
    report = run_trace_replay(
        str(args.trace), replay_concurrency=args.concurrency, router_mode="round_robin",
        trace_block_size=TRACE_BLOCK_TOKENS, **roles,
    )  # fmt: skip
    cpu_s = time.process_time() - started_s
    summary = report.summary
    requests = int(summary["num_requests"])
    if int(summary["completed_requests"]) != requests:
        raise SystemExit(f"Dynamo completed {summary['completed_requests']} of {requests} requests")
    return {
        "requests": requests,
        "cpu_s": round(cpu_s, 4),
        "cpu_s_per_1000": round(cpu_s / requests * 1000, 4),
        "simulated_s": round(float(summary["duration_ms"]) / 1000, 3),
        "output_tok_s": round(float(summary["output_throughput_tok_s"]), 1),
        "engine": f"ai-dynamo {version('ai-dynamo')}",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, help="Mooncake JSONL (without it: say how this is run, and exit)")
    parser.add_argument("--concurrency", type=int, default=64, help="requests in flight (closed loop)")
    parser.add_argument("--engine", help="an aggregated worker's launch config (JSON)")
    parser.add_argument("--prefill", help="a prefill worker's launch config (JSON)")
    parser.add_argument("--decode", help="a decode worker's launch config (JSON)")
    parser.add_argument("--prefill-workers", type=int, default=1)
    parser.add_argument("--decode-workers", type=int, default=1)
    args = parser.parse_args(argv)
    if args.trace is None:
        print("bench/twin_engine_speed.py runs this in build/dynamo-venv (`make dynamo-venv` builds it)")
        return 0
    if (args.engine is None) == (args.prefill is None or args.decode is None):
        parser.error("give --engine, or --prefill and --decode")
    # Dynamo logs each retraction at WARN to stderr; only errors, so logging costs no CPU inside the timed call.
    os.environ.setdefault("DYN_LOG", "error")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here may reach a model hub
    print(json.dumps(replay(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
