"""virtual_bench.random_ids draws exactly what rng.randrange(3, 128000) would, so every prompt stays as it was."""

from __future__ import annotations

import random

from endpoints.sim.virtual_bench import random_ids


def test_random_ids_are_randranges_draw_for_draw():
    for seed in range(8):
        fast, reference = random.Random(seed), random.Random(seed)
        for n in (0, 1, 5, 3000):
            assert random_ids(n, fast) == tuple(reference.randrange(3, 128_000) for _ in range(n))
        assert fast.random() == reference.random()  # and the generator is left in the same state
