"""The twin's admission against SGLang's own: the same KV state given to sglang's PrefillAdder and to the
twin's scheduler (conformance/twin_admission.py, run by the project's interpreter), and the number of waiting
requests each admits into the next prefill must be the same.

SGLang's side is its real PrefillAdder, Req and SamplingParams, over its real PrefillBudget; only the pool
and the cache under them are the smallest stand-ins that answer what admission asks (free slots, nothing
evictable, no locks, no storage): admission reads them and never allocates. The cases cover both of its
paths: add_one_req (a waiting request's prompt and whole budget against the running requests at the
new-token ratio) and add_one_req_ignore_eos (taken for ignore_eos against a disabled cache, as every
benchmark runs), alone and mixed, from an empty server to a nearly full one.
"""

from __future__ import annotations

import json
import random
import subprocess
from array import array
from pathlib import Path
from types import SimpleNamespace

import pytest
from sglang.srt import runtime_context
from sglang.srt.managers.schedule_batch import Req
from sglang.srt.managers.schedule_policy import AddReqResult, PrefillAdder
from sglang.srt.mem_cache.allocator.base import BaseTokenToKVPoolAllocator
from sglang.srt.sampling.sampling_params import SamplingParams
from twin_server import REPO_ROOT, twin_python

CASES = 60
NO_BUDGET_LIMIT = 1 << 20  # prefill token budgets out of the way: only the KV rules decide


class FreeSlots(BaseTokenToKVPoolAllocator):
    """A page-size-1 pool that only says how many slots are free."""

    page_size = 1

    def __init__(self, free_tokens: int) -> None:
        self.free_tokens = free_tokens

    def available_size(self) -> int:
        return self.free_tokens

    def alloc(self, need_size):
        raise AssertionError("admission never allocates")

    def free(self, free_index):
        raise AssertionError("admission never frees")

    def clear(self) -> None:
        pass


class DisabledCache:
    """A cache with `disable` set (ChunkCache's part in --disable-radix-cache): nothing evictable, no locks."""

    disable = True

    def supports_mamba(self) -> bool:
        return False

    def supports_prefix_sharing(self) -> bool:
        return False

    def is_tree_cache(self) -> bool:
        return False

    def evictable_size(self) -> int:
        return 0

    def full_evictable_size(self) -> int:
        return 0

    def lock(self, node):
        return None

    def unlock(self, lock) -> None:
        pass

    def inc_lock_ref(self, node):
        return SimpleNamespace(to_dec_params=lambda: None)

    def dec_lock_ref(self, node, params=None) -> None:
        pass

    def finish_storage_prefetch_admission(self, handle, **outcome) -> None:
        pass

    def discard_storage_prefetch_accounting(self, handle) -> None:
        pass


def _cases(seed: int = 22) -> list[dict]:
    rng = random.Random(seed)
    cases = []
    for i in range(CASES):
        share = (1.0, 0.0, 0.5)[i % 3]  # ignore_eos on all, none or about half of the requests
        running = []
        for _ in range(rng.randint(0, 24)):
            max_new = rng.randint(16, 6000)
            running.append((rng.randint(1, 8000), rng.randint(0, max_new - 1), max_new, rng.random() < share))
        held = sum(prompt + generated for prompt, generated, _, _ in running)
        waiting = [
            (rng.randint(1, 8000), rng.randint(1, 6000), rng.random() < share) for _ in range(rng.randint(1, 24))
        ]
        pool = held + rng.randint(0, 120_000)
        cases.append(
            {"pool_tokens": pool, "new_token_ratio": rng.uniform(0.098, 1.0), "running": running, "waiting": waiting}
        )
    return cases


def _req(rid: str, prompt: int, max_new: int, ignore_eos: bool, generated: int = 0) -> Req:
    req = Req(rid, "", array("q", range(3, 3 + prompt)), SamplingParams(max_new_tokens=max_new, ignore_eos=ignore_eos))
    req.output_ids.extend(range(3, 3 + generated))
    req.init_next_round_input(None)
    return req


def sglang_admitted(case: dict) -> int:
    running = [_req(f"run{i}", p, m, e, generated=g) for i, (p, g, m, e) in enumerate(case["running"])]
    held = sum(p + g for p, g, _, _ in case["running"])
    batch = SimpleNamespace(reqs=running, batch_size=lambda: len(running))
    adder = PrefillAdder(
        1, DisabledCache(), FreeSlots(case["pool_tokens"] - held), batch, case["new_token_ratio"],
        NO_BUDGET_LIMIT, NO_BUDGET_LIMIT,
    )  # fmt: skip
    for i, (prompt, max_new, ignore_eos) in enumerate(case["waiting"]):
        if adder.add_one_req(_req(f"wait{i}", prompt, max_new, ignore_eos), False, None) is not AddReqResult.CONTINUE:
            break
    return len(adder.can_run_list)


@pytest.fixture(scope="module")
def sglang_config():
    """PrefillAdder reads the process's published server config; publish a test one, as SGLang's tests do."""
    override = runtime_context._CONTEXT.override_server_args(disable_radix_cache=True)
    override.install()
    yield
    override.restore()


def test_the_twin_admits_what_sglangs_prefill_adder_admits(sglang_config, record_property):
    cases = _cases()
    twin = subprocess.run(
        [twin_python(), str(Path(__file__).with_name("twin_admission.py"))],
        input=json.dumps(cases), capture_output=True, text=True, cwd=REPO_ROOT, timeout=120, check=True,
    )  # fmt: skip
    ours = json.loads(twin.stdout)
    theirs = [sglang_admitted(case) for case in cases]
    differ = [(i, o, t) for i, (o, t) in enumerate(zip(ours, theirs)) if o != t]
    assert not differ, f"(case, twin, sglang) where the admitted counts differ: {differ}"
    assert len(set(theirs)) > 5 and 0 in theirs  # the cases reach both ends: none admitted to many
    record_property(
        "checked",
        f"{len(cases)} KV states (ignore_eos, budgeted, mixed; 0-24 running): PrefillAdder.add_one_req vs the "
        f"twin's next extend step, admitted counts {min(theirs)}-{max(theirs)}",
    )
