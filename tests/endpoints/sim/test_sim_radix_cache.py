"""The twin's radix prefix cache: matching, insertion, locking, LRU eviction, disabled mode."""

import heapq
import random

import pytest

from endpoints.sim.engine import radix_cache
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


def test_a_match_up_to_end_is_the_match_of_the_cut_sequence_with_the_same_splits_and_touches():
    """match_prefix(ids, end) (how the schedule policy matches a prompt less its last token, without copying it)
    leaves the tree as match_prefix(ids[:end]) does: the same length, edges split at the same token, the same
    nodes touched for eviction."""
    rng = random.Random(11)
    stored = [[rng.randint(0, 3) for _ in range(rng.randint(1, 30))] for _ in range(40)]
    probes = [s[: rng.randint(0, len(s))] + [rng.randint(0, 3) for _ in range(rng.randint(0, 5))] for s in stored]
    by_end, by_copy = RadixCache(), RadixCache()
    for cache in (by_end, by_copy):
        for seq in stored:
            cache.insert(seq)

    def shape(node, depth=0):
        return [(depth, child.key, child.last_access) for child in node.children.values()] + [
            item for child in node.children.values() for item in shape(child, depth + 1)
        ]

    for probe in probes:
        end = rng.randint(0, len(probe))
        assert by_end.match_prefix(tuple(probe), end)[0] == by_copy.match_prefix(probe[:end])[0]
        assert shape(by_end.root) == shape(by_copy.root)


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


def _victims_of_a_fresh_walk(cache: RadixCache, tokens: int) -> list[int]:
    """What eviction removes, by the rule written the plain way: every unlocked leaf of the tree now, least recently
    used first, a parent joining when its last child goes (ids of the nodes, in order)."""
    nodes, stack = [], list(cache.root.children.values())
    while stack:
        node = stack.pop()
        nodes.append(node)
        stack.extend(node.children.values())
    children = {id(n): len(n.children) for n in [cache.root, *nodes]}
    heap = [(n.last_access, id(n), n) for n in nodes if not n.children and n.lock_ref == 0]
    heapq.heapify(heap)
    victims, freed = [], 0
    while heap and freed < tokens:
        _, _, leaf = heapq.heappop(heap)
        victims.append(id(leaf))
        freed += len(leaf.key)
        children[id(leaf.parent)] -= 1
        parent = leaf.parent
        if parent is not cache.root and children[id(parent)] == 0 and parent.lock_ref == 0:
            heapq.heappush(heap, (parent.last_access, id(parent), parent))
    return victims


@pytest.mark.parametrize("rebuild_at", [8, radix_cache.LEAF_HEAP_MIN_REBUILD])
def test_eviction_kept_across_calls_removes_what_a_fresh_walk_would(monkeypatch, rebuild_at):
    """The cache keeps its leaves on a heap between evictions (and rebuilds it when stale entries pile up): under
    random inserts, matches that split edges, locks and unlocks, each eviction frees exactly the nodes, in the order,
    that collecting every unlocked leaf afresh gives."""
    monkeypatch.setattr(radix_cache, "LEAF_HEAP_MIN_REBUILD", rebuild_at)  # 8: rebuilt every few dozen operations
    rng = random.Random(11)
    cache = RadixCache()
    locked: list = []
    evictions = 0
    for _ in range(4000):
        seq = [rng.randint(0, 4) for _ in range(rng.randint(1, 10))]
        op = rng.random()
        if op < 0.45:
            cache.insert(seq)
        elif op < 0.75:
            _, node = cache.match_prefix(seq)
            if rng.random() < 0.3:
                cache.lock(node)
                locked.append(node)
        elif op < 0.85 and locked:
            cache.unlock(locked.pop(rng.randrange(len(locked))))
        else:
            tokens = rng.randint(1, 12)
            expected = _victims_of_a_fresh_walk(cache, tokens)
            before = {id(n): n for n in _all_nodes(cache)}
            freed = cache.evict(tokens)
            after = {id(n) for n in _all_nodes(cache)}
            gone = [i for i in before if i not in after]
            assert sorted(gone) == sorted(expected)
            assert freed == sum(len(before[i].key) for i in expected)
            evictions += 1
    assert evictions > 400


def _all_nodes(cache: RadixCache) -> list:
    nodes, stack = [], list(cache.root.children.values())
    while stack:
        node = stack.pop()
        nodes.append(node)
        stack.extend(node.children.values())
    return nodes
