"""The twin's radix prefix cache: matching, insertion, locking, LRU eviction, disabled mode."""

import random

from endpoints.sim.engine.radix_cache import RadixCache


def test_match_returns_longest_cached_prefix_and_insert_counts_new_tokens():
    cache = RadixCache()
    assert cache.insert([1, 2, 3, 4, 5]) == 5
    assert cache.insert([1, 2, 3, 9, 9, 9]) == 3  # shares 3 tokens, adds 3
    assert cache.insert([1, 2, 3]) == 0
    assert cache.total_tokens == 8
    assert cache.match_prefix([1, 2, 3, 4, 5, 6])[0] == 5
    assert cache.match_prefix([1, 2, 3, 9, 7])[0] == 4
    assert cache.match_prefix([1, 2, 7])[0] == 2
    assert cache.match_prefix([2, 1])[0] == 0
    assert cache.total_tokens == 8  # matching splits edges but never adds tokens


def test_matches_agree_with_brute_force_on_random_sequences():
    rng = random.Random(7)
    cache = RadixCache()
    stored: list[list[int]] = []
    for _ in range(300):
        base = rng.choice(stored) if stored and rng.random() < 0.7 else []
        seq = base[: rng.randint(0, len(base))] + [rng.randint(0, 3) for _ in range(rng.randint(1, 12))]
        probe = seq if rng.random() < 0.5 else seq[: rng.randint(1, len(seq))] + [rng.randint(0, 3)]

        def brute(p):
            return max(
                (next((i for i, (a, b) in enumerate(zip(s, p)) if a != b), min(len(s), len(p))) for s in stored),
                default=0,
            )

        assert cache.match_prefix(probe)[0] == brute(probe)
        cache.insert(seq)
        stored.append(seq)
    distinct_prefixes = {tuple(s[:i]) for s in stored for i in range(1, len(s) + 1)}
    assert cache.total_tokens == len(distinct_prefixes)


def test_eviction_frees_least_recently_used_unlocked_leaves_first():
    cache = RadixCache()
    cache.insert([1] * 10)
    cache.insert([2] * 10)
    cache.insert([3] * 10)
    cache.match_prefix([1] * 10)  # touch: [2]*10 is now the oldest
    assert cache.evict(5) == 10  # whole nodes go
    assert cache.match_prefix([2] * 10)[0] == 0
    assert cache.match_prefix([1] * 10)[0] == 10
    assert cache.total_tokens == 20


def test_locked_paths_survive_eviction_until_unlocked():
    cache = RadixCache()
    cache.insert([1, 2, 3, 4])
    cache.insert([1, 2, 5, 6])
    matched, node = cache.match_prefix([1, 2, 3, 4])
    cache.lock(node)
    assert cache.evict(100) == 2  # only the unlocked branch [5, 6]
    assert cache.match_prefix([1, 2, 3, 4])[0] == 4
    assert cache.evictable_tokens() == 0
    cache.unlock(node)
    assert cache.evict(100) == 4
    assert cache.total_tokens == 0


def test_lock_on_a_partial_match_protects_exactly_the_matched_tokens():
    cache = RadixCache()
    cache.insert(list(range(100)))
    matched, node = cache.match_prefix(list(range(40)) + [999])
    assert matched == 40
    cache.lock(node)
    assert cache.evict(1000) == 60  # the unmatched tail of the edge is free to go
    assert cache.match_prefix(list(range(100)))[0] == 40


def test_disabled_cache_never_matches_or_stores():
    cache = RadixCache(disabled=True)
    assert cache.insert([1, 2, 3]) == 0
    assert cache.match_prefix([1, 2, 3])[0] == 0
    assert cache.total_tokens == 0


def test_long_prompts_are_fast():
    rng = random.Random(1)
    system = [rng.randrange(129_000) for _ in range(20_000)]
    prompts = [system + [rng.randrange(129_000) for _ in range(10_000)] for _ in range(100)]
    cache = RadixCache()
    for p in prompts:
        cache.match_prefix(p)
        cache.insert(p)
    assert cache.match_prefix(prompts[-1])[0] == 30_000
