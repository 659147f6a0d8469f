"""The engine under speculative decoding (MTP): CPU seconds and a digest of every result, per workload, so a change
meant to be a pure speed-up can be shown to change nothing.

    python bench/twin_spec_digests.py            # 12 workloads of 1,000 requests: about 10 s of CPU on 2 cores
    python bench/twin_spec_digests.py > a.txt    # then, after the change, diff the digest columns

Six flag sets of DeepSeek-R1 on 8 GPUs with EAGLE/MTP, SGLang's flags: 3 steps top-1 with 4 draft tokens on H200;
3 steps top-2 with 6; 1 step with 2; the first with DP8 attention; the first with DP8 attention and EP8; the first on
MI325X. Each runs closed loop (C=48) and open loop (Poisson arrivals at 6 requests/s). Requests are drawn from a
fixed seed per flag set: prompts of 50-1,500 random tokens behind 0, 256 or 512 shared ones (so the radix cache
hits), answers of 20-1,200 tokens.

The digest is sha256 over the run's duration, every request's timing (TTFT, chunk gaps, cached tokens, retractions),
the engine's step count and running-request seconds, and its GPU counters' reading at the end: equal digests mean
equal results to the last bit. The CPU figure is `time.process_time()` around `run_bench`.
"""

from __future__ import annotations

import hashlib
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from endpoints.sim.virtual_bench import BenchRequest, run_bench  # noqa: E402

REQUESTS = 1000
CLOSED_LOOP_CONCURRENCY = 48
OPEN_LOOP_RPS = 6.0
R1 = ("--model-path", "deepseek-ai/DeepSeek-R1", "--tp", "8", "--schedule-policy", "lpm")


def eagle(steps: int, topk: int, draft_tokens: int) -> tuple[str, ...]:
    return ("--speculative-algorithm", "EAGLE", "--speculative-num-steps", str(steps), "--speculative-eagle-topk",
            str(topk), "--speculative-num-draft-tokens", str(draft_tokens))  # fmt: skip


MTP = eagle(3, 1, 4)
DP8 = ("--enable-dp-attention", "--dp-size", "8")
CAP = ("--max-running-requests", "128")
FLAG_SETS: dict[str, tuple[str, ...]] = {
    "mtp": (*R1, *MTP, *CAP, "--sim-hardware", "h200"),
    "mtp-topk2": (*R1, *eagle(3, 2, 6), *CAP, "--sim-hardware", "h200"),
    "mtp-dp8": (*R1, *MTP, *CAP, "--sim-hardware", "h200", *DP8),
    "mtp-1step": (*R1, *eagle(1, 1, 2), "--sim-hardware", "h200"),
    "mtp-dp8-ep8": (*R1, *MTP, *CAP, "--sim-hardware", "h200", *DP8, "--ep-size", "8"),
    "mtp-mi325x": (*R1, *MTP, *CAP, "--sim-hardware", "mi325x"),
}


def requests_for(seed: int, open_loop: bool) -> list[BenchRequest]:
    rng = random.Random(seed)
    shared = tuple(rng.randrange(1, 120_000) for _ in range(512))
    drawn, arrival_s = [], 0.0
    for _ in range(REQUESTS):
        arrival_s += rng.expovariate(OPEN_LOOP_RPS) if open_loop else 0.0
        own = tuple(rng.randrange(1, 120_000) for _ in range(rng.randint(50, 1_500)))
        drawn.append(BenchRequest(shared[: rng.choice((0, 256, 512))] + own, rng.randint(20, 1_200), arrival_s))
    return drawn


def main() -> int:
    print("| flags | loop | CPU s | digest |")
    print("|---|---|---|---|")
    total_s = 0.0
    for seed, (name, flags) in enumerate(FLAG_SETS.items()):
        for open_loop in (False, True):
            requests = requests_for(seed, open_loop)
            started = time.process_time()
            result = run_bench(list(flags), requests, None if open_loop else CLOSED_LOOP_CONCURRENCY)
            cpu_s = time.process_time() - started
            total_s += cpu_s
            engine = result.engine
            gpu = None if engine.gpu is None else engine.gpu.reading(engine.clock.now_s())
            state = (result.duration_s, result.requests, engine.steps, engine.running_request_s, gpu)
            digest = hashlib.sha256(repr(state).encode()).hexdigest()[:16]
            print(f"| {name} | {'open' if open_loop else 'closed'} | {cpu_s:.2f} | {digest} |", flush=True)
    print(f"\n{total_s:.2f} CPU s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
