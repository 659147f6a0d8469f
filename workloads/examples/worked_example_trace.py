"""The worked example's synthetic trace (docs/warehouse.md, "The runtime's cost band: a worked example"):
requests of about 300 input tokens of their own (150-450, uniform) answered in about 400 (350-450), arriving
as a Poisson process, written in the Azure CSV format so the bundled reader reads it. The shared system prompt is
not in the trace: the scenario puts it in front (shared_prefix_tokens, workloads/examples/worked_example.yaml).

    python -m workloads.examples.worked_example_trace    # rewrites workloads/traces/worked_example.csv

Deterministic: the same seed writes the same bytes (a test holds the bundled file to it).
"""

from __future__ import annotations

import random
import sys
from datetime import datetime, timedelta
from pathlib import Path

from workloads.synthetic_arrivals import ArrivalProcess, synthetic_offsets_s

TRACE_PATH = Path(__file__).resolve().parents[1] / "traces" / "worked_example.csv"
SEED = 2026
REQUESTS = 1_500  # enough for a queue to settle at V3 8xH200's capacity (bench/worked_example.py says why)
RATE_RPS = 2.0  # the trace's own mean rate; the bench and a scenario's speedup set the rate replayed
INPUT_TOKENS = (150, 450)  # the request's own tokens, uniform: about 300
OUTPUT_TOKENS = (350, 450)  # uniform: about 400
START = datetime(2026, 1, 5, 9, 0, 0)  # a Monday; the reader rebases arrivals to the first row
HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def worked_example_csv(seed: int = SEED, requests: int = REQUESTS) -> str:
    """The trace's text: Azure's header, then one row per request in arrival order."""
    offsets_s = synthetic_offsets_s(requests, ArrivalProcess.POISSON, RATE_RPS, seed=seed)
    lengths = random.Random(seed)
    rows = [HEADER]
    for offset_s in offsets_s:
        at = START + timedelta(microseconds=round(float(offset_s) * 1e6))
        # Azure writes 7 fractional digits; microseconds give 6, the seventh is 0.
        rows.append(
            f"{at:%Y-%m-%d %H:%M:%S}.{at.microsecond:06d}0,"
            f"{lengths.randint(*INPUT_TOKENS)},{lengths.randint(*OUTPUT_TOKENS)}\n"
        )
    return "".join(rows)


def main() -> int:
    TRACE_PATH.write_text(worked_example_csv())
    print(f"wrote {TRACE_PATH} ({REQUESTS} requests)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
