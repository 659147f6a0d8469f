"""Calibration of the SGLang twin: the published setups of shared/reference/calibration.md, run on
the twin's engine in virtual time, printed as predicted vs published with their ratio.

    python bench/twin_calibration.py            # every modelled row (about a minute)
    python bench/twin_calibration.py --quick    # fewer prompts per row (a few seconds)

A ratio inside 0.67-1.5 is a good result for a model this simple. Rows 5-6 (PD disaggregation and
expert parallelism over 12 nodes) are not modelled and are printed as such.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from endpoints.sim.virtual_bench import BenchRequest, BenchResult, random_ids, random_requests, run_bench  # noqa: E402

B200_R1 = ["--model-path", "deepseek-ai/DeepSeek-R1-0528", "--tp", "8", "--sim-hardware", "b200"]
# Row 4: 16×H200 decode with DP attention (2 nodes, --tp 16 --dp 16), 2 requests per rank.
H200_DP16 = ["--model-path", "deepseek-ai/DeepSeek-R1", "--tp", "16", "--dp", "16", "--enable-dp-attention",
             "--sim-hardware", "h200"]  # fmt: skip


@dataclass(frozen=True, slots=True)
class Row:
    figure: str
    setup: str
    published: float | None
    predicted: float | None
    unit: str


def _cookbook_rows(concurrency: int, prompts: int, published: dict[str, float]) -> list[Row]:
    # bench_serving random 1000/1000 with range ratio 0: lengths uniform in [1, 1000].
    result = run_bench(B200_R1, random_requests(prompts, 1000, 1000, 0.0, seed=concurrency), concurrency)
    setup = f"8×B200 R1 TP8, concurrency {concurrency}, {prompts} prompts"
    measures = {
        "output tok/s": result.output_tok_s,
        "total tok/s": result.total_tok_s,
        "TTFT ms": result.mean_ttft_s * 1e3,
        "TPOT ms": result.mean_tpot_s * 1e3,
        "ITL ms": result.mean_itl_s * 1e3,
    }
    return [Row(name, setup, published[name], measures[name], name.split()[-1]) for name in published]


def _decode_per_rank(result: BenchResult, ranks: int) -> float:
    """Decode tokens per second per DP rank, from the moment every request has its first token."""
    start = max(r.sent_s + r.ttft_s for r in result.requests)
    end = max(r.sent_s + r.e2e_s for r in result.requests)
    tokens = 0
    for r in result.requests:
        t = r.sent_s + r.ttft_s
        for gap in r.chunk_gaps_s:
            t += gap
            if start < t <= end:
                tokens += 1
    return tokens / (end - start) / ranks


def _row4(quick: bool) -> list[Row]:
    rng = random.Random(4)
    out_len = 512 if quick else 4096
    requests = [BenchRequest(random_ids(65_536, rng), out_len) for _ in range(32)]
    result = run_bench(H200_DP16, requests)
    setup = f"16×H200 DP attention, 2 req/rank, 65,536 in / {out_len} out (decode phase)"
    return [Row("decode tok/s per rank", setup, 51.0, _decode_per_rank(result, 16), "tok/s")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer prompts per row")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    scale = 5 if args.quick else 1
    rows: list[Row] = []
    rows += _cookbook_rows(1, 10, {"output tok/s": 105, "TTFT ms": 153})
    rows += _cookbook_rows(16, 80 // scale * 1 if args.quick else 160, {"output tok/s": 795})
    rows += _cookbook_rows(100, 500 // scale, {"output tok/s": 2283, "total tok/s": 4545, "TTFT ms": 563,
                                               "TPOT ms": 40, "ITL ms": 39})  # fmt: skip
    rows += _row4(args.quick)
    rows.append(Row("input/output tok/s per node", "96×H100 PD + large-scale EP (rows 5-6)", None, None, "-"))

    print("| # | setup | figure | published | twin | twin / published |")
    print("|---|---|---|---|---|---|")
    for i, row in enumerate(rows, 1):
        if row.predicted is None:
            print(f"| {i} | {row.setup} | {row.figure} | see calibration.md | not modelled (PD disaggregation, EP) | - |")
            continue
        print(f"| {i} | {row.setup} | {row.figure} | {row.published:,.0f} | {row.predicted:,.0f} | {row.predicted / row.published:.2f} |")
    print(f"\n(wall time {time.perf_counter() - started:.1f} s{', --quick' if args.quick else ''})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
