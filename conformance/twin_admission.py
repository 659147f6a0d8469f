"""The twin's admission decisions for the cases on stdin (JSON), one count per case on stdout.

Run with the project's own interpreter (COSTBENCH_TWIN_PYTHON), so the scheduler checked is the twin's as
users run it. Each case: a KV pool, running requests (prompt, tokens generated, max_new_tokens, ignore_eos),
the new-token ratio, and requests waiting in arrival order; the answer is how many of the waiting the
twin's next extend step admits. Prefill token budgets and the running cap are set out of the way, so only
the KV rules decide (test_admission.py gives SGLang's PrefillAdder the same).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from endpoints.clock import VirtualClock  # noqa: E402
from endpoints.sim.engine.kv_pool import KvPool  # noqa: E402
from endpoints.sim.engine.sim_request import GenerateInput, SimRequest, planned_output  # noqa: E402
from endpoints.sim.engine_builder import build_engine  # noqa: E402
from endpoints.sim.server_args import parse_server_args  # noqa: E402

FLAGS = [
    "--model-path", "deepseek-ai/DeepSeek-R1", "--tp", "8", "--sim-hardware", "h200", "--disable-radix-cache",
    "--chunked-prefill-size", "1048576", "--max-prefill-tokens", "1048576", "--max-running-requests", "4096",
]  # fmt: skip


def _request(rid: str, prompt_tokens: int, max_new_tokens: int, ignore_eos: bool) -> SimRequest:
    ids = tuple(range(3, 3 + prompt_tokens))
    spec = GenerateInput(rid, ids, max_new_tokens, ignore_eos=ignore_eos)
    plan = planned_output(ids, max_new_tokens, ignore_eos, 129_280, 1, 128_799, None, None, None)
    return SimRequest(spec, plan, arrival_s=0.0)


def admitted(case: dict) -> int:
    engine = build_engine(parse_server_args(FLAGS), VirtualClock())
    scheduler = engine.scheduler
    scheduler.pool = KvPool(case["pool_tokens"])
    scheduler.new_token_ratio = case["new_token_ratio"]
    for i, (prompt, generated, max_new, ignore_eos) in enumerate(case["running"]):
        r = _request(f"run{i}", prompt, max_new, ignore_eos)
        r.decoding, r.output_tokens = True, generated
        r.prefill_target = r.prefilled_tokens = prompt
        r.admitted_s = 0.0
        scheduler.pool.reserve(prompt + generated)  # its KV: the prompt and what it has generated
        r.held_tokens = prompt + generated
        scheduler.running.append(r)
    for i, (prompt, max_new, ignore_eos) in enumerate(case["waiting"]):
        scheduler.add(_request(f"wait{i}", prompt, max_new, ignore_eos))
    before = len(scheduler.waiting)
    scheduler._plan_extend(0.0)
    return before - len(scheduler.waiting)


def main() -> int:
    cases = json.load(sys.stdin)
    json.dump([admitted(case) for case in cases], sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
