"""A request's planned output ids are built only when read (sim_request.PlannedIds), and read the same however they
are read: whole, by index or by slice, equal to the plain definition (the i-th id (seed + i·stride) mod span, offset,
with `</think>` and the EOS at their places). The same prompt must keep giving the same answer: the radix cache and
a conversation's next turn match on these ids."""

from __future__ import annotations

import random

import pytest

from endpoints.sim.engine.sim_request import PlannedIds, planned_output, prompt_seed

VOCAB, EOS, THINK_END = 129_280, 1, 128_799


def _defined(seed: int, length: int, overrides: dict[int, int]) -> list[int]:
    span = VOCAB - 3
    return [overrides.get(i, (seed + i * 2_654_435_761) % span + 3) for i in range(length)]


def test_a_reasoning_answer_that_stops_early_reads_as_defined_whole_by_index_and_by_slice():
    prompt = tuple(random.Random(7).randrange(3, VOCAB) for _ in range(300))
    plan = planned_output(prompt, 200, False, VOCAB, EOS, THINK_END, (0.4, 0.6))
    ids, n = plan.output_ids, len(plan.output_ids)
    assert isinstance(ids, PlannedIds) and plan.finish_reason == {"type": "stop", "matched": EOS}
    assert 0 < plan.reasoning_tokens < n < 200
    expected = _defined(prompt_seed(prompt), n, {plan.reasoning_tokens - 1: THINK_END, n - 1: EOS})
    assert list(ids) == expected and ids == expected and ids[:] == expected
    assert [ids[i] for i in range(n)] == expected and [ids[i] for i in range(-n, 0)] == expected
    rng = random.Random(1)
    for _ in range(300):
        a, b = rng.randrange(-n - 5, n + 5), rng.randrange(-n - 5, n + 5)
        step = rng.choice((None, 1, 2, 3, -1, -2))
        assert ids[a:b:step] == expected[a:b:step], (a, b, step)
    # A PD prefill server keeps the first id only; a head keeps what falls in it (here `</think>` too)
    for k in (0, 1, plan.reasoning_tokens - 1, plan.reasoning_tokens, n, n + 5):
        assert ids.head(k) == expected[:k] and len(ids.head(k)) == len(expected[:k])
    with pytest.raises(IndexError):
        ids[n]
    with pytest.raises(IndexError):
        ids[-n - 1]


def test_the_same_prompt_gives_the_same_ids_and_a_budget_run_to_its_end_has_no_eos():
    prompt = tuple(range(3, 103))
    first = planned_output(prompt, 64, True, VOCAB, EOS)
    again = planned_output(prompt, 64, True, VOCAB, EOS)
    assert first.output_ids == again.output_ids and len(first.output_ids) == 64
    assert first.finish_reason == {"type": "length", "length": 64} and EOS not in list(first.output_ids)
    assert first.output_ids == _defined(prompt_seed(prompt), 64, {})
    assert PlannedIds(5, 100, 3) != PlannedIds(6, 100, 3) and PlannedIds(5, 100, 0) == []
