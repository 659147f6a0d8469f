"""What a simulated request costs in CPU: the twin's engine in-process (virtual clock, no HTTP) beside NVIDIA Dynamo's
offline replay engine (`ai-dynamo` 1.6.1, the engine AIPerf's dynosim backend drives), on the same requests.

    python bench/twin_engine_speed.py            # 2,000 + 2,000 + 1,280 requests: under a minute of CPU
    python bench/twin_engine_speed.py --quick    # 300 + 300 + 256 requests: a few seconds of CPU
    make dynamo-venv                             # Dynamo's environment, once (build/dynamo-venv)

Three closed-loop workloads, every request sent at once behind the concurrency cap, no warm-ups:
1. 1k/1k: DeepSeek-R1-0528 on 8×H200, TP8, radix cache off; bench_serving's random lengths on [800, 1,000] in and
   out; C=64, 2,000 requests.
2. 8k/1k: the same server; lengths on [0.8·8,192, 8,192] in, [0.8·1,024, 1,024] out; C=64, 2,000 requests.
3. PD: calibration point 14.c128's fleet (endpoints/sim/calibration/published_points.py): one B200 prefill worker
   with DP8 attention, three TP8 decode workers, round robin, at its concurrency (128), on its first 1,280 prompts
   (8k/1k, ratio 0.8; all of them: the point sends 1,280 after 256 warm-ups, which are left out here).

The twin's figure: `time.process_time()` around `run_bench` (or `run_pd_fleet`), which builds the engines from the
SGLang flags, runs every request through the scheduler and cost model, streams each request's chunks to its client
coroutine (stream interval as the flags set it: 1 for the 8×H200 server, 30 in the fleet; `--stream-interval`
overrides it) and returns the timings. The requests are drawn before the clock starts.

Dynamo's figure: bench/dynamo_replay.py in build/dynamo-venv, given the same requests' token counts as a Mooncake
trace and, per worker, its SGLang scheduler with the twin's limits for these flags: KV pool (tokens, page size 1),
running requests and chunked-prefill sizes per DP rank, radix cache on or off, and for a PD worker the KV bytes per
token and the link's GB/s. It times `dynamo.replay.run_trace_replay` alone with `time.process_time()` (trace read,
runtime built, every request simulated, report made), in its own process, after the twin's run. Its step times come
from its built-in polynomial model, not from DeepSeek-R1 on H200 or B200 (that model, `aisimulate_core`, is only on
NVIDIA's own package index); its simulated durations differ from the twin's, the number of steps much less so.

Prints a table: workload, requests, the twin's CPU s and CPU s per 1,000 requests, Dynamo's, and their ratio. Without
build/dynamo-venv it says how to make it and prints the twin's figures alone.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dynamo_replay import write_trace  # noqa: E402  (bench/, beside this file)

from endpoints.clock import VirtualClock  # noqa: E402
from endpoints.sim.calibration.published_points import POINTS_BY_KEY, Workload  # noqa: E402
from endpoints.sim.cost.profiles import model_profile_for  # noqa: E402
from endpoints.sim.engine.disaggregation import DisaggregationMode  # noqa: E402
from endpoints.sim.engine_builder import build_engine  # noqa: E402
from endpoints.sim.pd_fleet_bench import PdFleet, run_pd_fleet  # noqa: E402
from endpoints.sim.server_args import parse_server_args  # noqa: E402
from endpoints.sim.virtual_bench import BenchRequest, random_requests, run_bench  # noqa: E402

DYNAMO_VENV_PYTHON = REPO / "build" / "dynamo-venv" / "bin" / "python"
DYNAMO_REPLAY = REPO / "bench" / "dynamo_replay.py"
DYNAMO_TIMEOUT_S = 600
R1_H200_TP8 = ("--model-path", "deepseek-ai/DeepSeek-R1-0528", "--tp", "8", "--sim-hardware", "h200",
               "--disable-radix-cache")  # fmt: skip
PD_POINT = "14.c128"
COUNTS = (2000, 2000, 1280)  # 1k/1k, 8k/1k, PD
QUICK_COUNTS = (300, 300, 256)
DYNAMO_ROLE = {DisaggregationMode.PREFILL: "prefill", DisaggregationMode.DECODE: "decode"}


@dataclass(frozen=True, slots=True)
class SpeedWorkload:
    name: str
    requests: tuple[BenchRequest, ...]
    concurrency: int
    flags: tuple[str, ...] = ()  # one aggregated server's SGLang flags
    fleet: PdFleet | None = None  # or a disaggregated fleet


@dataclass(frozen=True, slots=True)
class EngineCost:
    requests: int
    cpu_s: float
    simulated_s: float

    @property
    def cpu_s_per_1000(self) -> float:
        return self.cpu_s / self.requests * 1000


def workloads(counts: tuple[int, int, int]) -> list[SpeedWorkload]:
    point = POINTS_BY_KEY[PD_POINT]
    pd = point.workload
    assert isinstance(pd, Workload) and point.fleet is not None  # a whole fleet, driven closed loop
    return [
        SpeedWorkload("1k/1k R1 8×H200 TP8, C=64", tuple(random_requests(counts[0], 1000, 1000, 0.8, seed=1)), 64,
                      R1_H200_TP8),
        SpeedWorkload("8k/1k R1 8×H200 TP8, C=64", tuple(random_requests(counts[1], 8192, 1024, 0.8, seed=1)), 64,
                      R1_H200_TP8),
        # The point's prompts are drawn by the same call, so the first N are its first N.
        SpeedWorkload(f"PD {PD_POINT}: B200 1P (DP8) + 3D (TP8), 8k/1k, C={pd.concurrency}",
                      tuple(random_requests(counts[2], pd.input_len, pd.output_len, pd.range_ratio, seed=pd.seed)),
                      pd.concurrency, fleet=point.fleet),
    ]  # fmt: skip


def with_stream_interval(w: SpeedWorkload, interval: int | None) -> SpeedWorkload:
    if interval is None:
        return w
    extra = ("--stream-interval", str(interval))  # a flag given twice: the last one counts
    if w.fleet is None:
        return SpeedWorkload(w.name, w.requests, w.concurrency, w.flags + extra)
    fleet = PdFleet(w.fleet.prefill_flags + extra, w.fleet.prefill_workers, w.fleet.decode_flags + extra,
                    w.fleet.decode_workers)  # fmt: skip
    return SpeedWorkload(w.name, w.requests, w.concurrency, fleet=fleet)


def run_twin(w: SpeedWorkload) -> EngineCost:
    started_s = time.process_time()
    if w.fleet is None:
        result = run_bench(list(w.flags), list(w.requests), w.concurrency)
    else:
        result = run_pd_fleet(w.fleet, w.requests, max_concurrency=w.concurrency).bench
    cpu_s = time.process_time() - started_s
    return EngineCost(len(w.requests), cpu_s, result.duration_s)


def dynamo_launch(flags: tuple[str, ...]) -> dict[str, Any]:
    """Dynamo's launch config for one worker (its SGLang scheduler) with the twin's limits for these SGLang flags.
    Under DP attention Dynamo runs `dp_size` engines of this config, one per rank, as SGLang does."""
    args = parse_server_args(list(flags))
    ranks = args.parallel.attention_ranks
    # The pool as the twin sizes it (weights, activations and --mem-fraction-static on the GPU's memory).
    kv_tokens = build_engine(args, VirtualClock()).scheduler.capacity_tokens
    role = DYNAMO_ROLE.get(args.disaggregation_mode, "aggregated")
    engine: dict[str, Any] = {
        "backend": "sglang",
        "worker_type": role,
        "block_size": 1,  # SGLang's page size, the only one the twin models (Dynamo's default for sglang too)
        "num_gpu_blocks": kv_tokens // ranks,
        "max_num_seqs": max(1, args.max_running_requests // ranks),
        "enable_prefix_caching": not args.disable_radix_cache,
        "sglang": {"chunked_prefill_size": args.rank_chunked_prefill_size,
                   "max_prefill_tokens": args.max_prefill_tokens},
    }  # fmt: skip
    if role != "aggregated":
        # Each TP rank sends its own copy of the (MLA) KV over its own NIC: the per-GPU link is the transfer's.
        model = model_profile_for(args.model_path)
        engine["kv_transfer_bytes_per_token"] = model.kv_bytes_per_token(args.kv_dtype_bytes)
        engine["kv_transfer_bandwidth"] = args.sim_kv_link_gb_s
    return {"dp_size": ranks, "tensor_parallel_size": args.parallel.tp_size // ranks, "engine": engine}


def run_dynamo(python: Path, w: SpeedWorkload, folder: Path) -> EngineCost:
    trace = folder / "requests.jsonl"
    write_trace(trace, ((len(r.input_ids), r.output_tokens) for r in w.requests))
    command = [str(python), str(DYNAMO_REPLAY), "--trace", str(trace), "--concurrency", str(w.concurrency)]
    if w.fleet is None:
        command += ["--engine", json.dumps(dynamo_launch(w.flags))]
    else:
        command += ["--prefill", json.dumps(dynamo_launch(w.fleet.prefill_flags)),
                    "--prefill-workers", str(w.fleet.prefill_workers),
                    "--decode", json.dumps(dynamo_launch(w.fleet.decode_flags)),
                    "--decode-workers", str(w.fleet.decode_workers)]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(DYN_LOG="error", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=DYNAMO_TIMEOUT_S)
    if done.returncode != 0:
        raise SystemExit(f"Dynamo's replay failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    answer = json.loads(done.stdout.splitlines()[-1])
    if answer["requests"] != len(w.requests):
        raise SystemExit(f"Dynamo replayed {answer['requests']} requests of {len(w.requests)}")
    return EngineCost(answer["requests"], answer["cpu_s"], answer["simulated_s"])


def table(rows: list[tuple[SpeedWorkload, EngineCost, EngineCost | None]]) -> list[str]:
    header = ("workload", "requests", "twin CPU s", "twin CPU s/1k req", "Dynamo CPU s", "Dynamo CPU s/1k req",
              "twin ÷ Dynamo", "simulated s twin / Dynamo")  # fmt: skip
    body = []
    for w, twin, dynamo in rows:
        peer = ("-", "-", "-", "-") if dynamo is None else (
            f"{dynamo.cpu_s:.2f}", f"{dynamo.cpu_s_per_1000:.3f}", f"{twin.cpu_s / dynamo.cpu_s:.0f}×",
            f"{twin.simulated_s:,.0f} / {dynamo.simulated_s:,.0f}",
        )  # fmt: skip
        body.append((w.name, f"{twin.requests:,}", f"{twin.cpu_s:.2f}", f"{twin.cpu_s_per_1000:.2f}", *peer))
    widths = [max(len(r[i]) for r in (header, *body)) for i in range(len(header))]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(c.ljust(n) if i == 0 else c.rjust(n) for i, (c, n) in enumerate(zip(cells, widths)))

    return [line(header), "  ".join("-" * n for n in widths), *(line(r) for r in body)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{', '.join(map(str, QUICK_COUNTS))} requests")
    parser.add_argument("--dynamo-python", type=Path, help=f"Dynamo's Python (default {DYNAMO_VENV_PYTHON})")
    parser.add_argument("--stream-interval", type=int, help="the twin's --stream-interval on every server")
    args = parser.parse_args(argv)
    dynamo_python: Path | None = args.dynamo_python or DYNAMO_VENV_PYTHON
    if dynamo_python is not None and not dynamo_python.exists():
        if args.dynamo_python is not None:
            raise SystemExit(f"{dynamo_python}: no such interpreter")
        venv = DYNAMO_VENV_PYTHON.parents[1].relative_to(REPO)
        print(f"Dynamo's environment {venv} is missing (`make dynamo-venv` builds it): the twin's figures alone")
        dynamo_python = None
    counts = QUICK_COUNTS if args.quick else COUNTS
    rows: list[tuple[SpeedWorkload, EngineCost, EngineCost | None]] = []
    with tempfile.TemporaryDirectory() as folder:
        for w in workloads(counts):
            w = with_stream_interval(w, args.stream_interval)
            twin = run_twin(w)
            print(f"{w.name}: twin {twin.cpu_s:.1f} CPU s", file=sys.stderr)
            dynamo = None if dynamo_python is None else run_dynamo(dynamo_python, w, Path(folder))
            rows.append((w, twin, dynamo))
    print("\n".join(table(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
