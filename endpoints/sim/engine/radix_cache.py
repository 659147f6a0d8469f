"""Radix tree over token ids: which prompt prefixes already have KV in the pool.

Edges hold tuples of token ids; comparisons use tuple slices (C speed), so a 30k-token prompt
matches in a handful of comparisons rather than a Python loop per token. Running requests lock the
path they use (a reference count on every node of it); eviction frees least-recently-used
unlocked leaves. With `disabled=True` nothing is stored and every match is 0 tokens, like SGLang's
--disable-radix-cache.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence


class RadixNode:
    __slots__ = ("key", "children", "parent", "lock_ref", "last_access")

    def __init__(self, key: tuple[int, ...], parent: RadixNode | None) -> None:
        self.key = key
        self.children: dict[int, RadixNode] = {}
        self.parent = parent
        self.lock_ref = 0
        self.last_access = 0


def _common_prefix_len(edge: tuple[int, ...], ids: tuple[int, ...], start: int, end: int) -> int:
    """Length of the common prefix of `edge` and `ids[start:end]`, by binary search on slice equality
    (a prefix of length n matches only if every shorter one does)."""
    limit = min(len(edge), end - start)
    if edge[:limit] == ids[start : start + limit]:
        return limit
    lo, hi = 1, limit - 1  # the first token matched (it chose this child); the whole span did not
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if edge[:mid] == ids[start : start + mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


LEAF_HEAP_MIN_REBUILD = 4096  # entries; past max(this, 4x the last rebuild's) the leaf heap is rebuilt


class RadixCache:
    def __init__(self, disabled: bool = False) -> None:
        self.disabled = disabled
        self.root = RadixNode((), None)
        self.root.lock_ref = 1  # never evicted
        self._tokens = 0
        self._evictable = 0  # tokens in unlocked nodes, kept current so admission checks are O(1)
        self._tick = itertools.count(1)  # access order for LRU; a counter, not a clock, so runs repeat exactly
        # Every leaf, keyed (last_access, id) as evict orders them, kept across evictions so one does not walk the
        # tree: an entry is pushed when a node becomes a leaf or a leaf is touched, and skipped when popped if it is
        # stale (the node has children now, was touched since, or left the tree). Rebuilt from the tree when stale
        # entries pile up.
        self._leaves: list[tuple[int, int, RadixNode]] = []
        self._rebuild_at = LEAF_HEAP_MIN_REBUILD

    @property
    def total_tokens(self) -> int:
        return self._tokens

    def match_prefix(self, ids: Sequence[int], end: int | None = None) -> tuple[int, RadixNode]:
        """Longest cached prefix of `ids[:end]`: (its length, the node where it ends). Splits an edge that
        matches only in part, so locking the returned node protects exactly the matched tokens. `end` spares the
        caller a copy of a prompt less its last token (the schedule policy matches every waiting prompt each step)."""
        if self.disabled:
            return 0, self.root
        key = tuple(ids)  # no copy of a tuple
        end = len(key) if end is None else end
        node, pos = self.root, 0
        tick = next(self._tick)
        while pos < end:
            child = node.children.get(key[pos])
            if child is None:
                break
            shared = _common_prefix_len(child.key, key, pos, end)
            child.last_access = tick
            if not child.children:
                self._push_leaf(child)
            if shared < len(child.key):
                child = self._split(child, shared)
            node, pos = child, pos + shared
        return pos, node

    def insert(self, ids: Sequence[int]) -> int:
        """Add `ids` as a cached sequence; returns how many tokens were new to the tree."""
        if self.disabled or not ids:
            return 0
        key = tuple(ids)
        node, pos = self.root, 0
        tick = next(self._tick)
        while pos < len(key):
            child = node.children.get(key[pos])
            if child is None:
                leaf = RadixNode(key[pos:], node)
                leaf.last_access = tick
                node.children[key[pos]] = leaf
                self._push_leaf(leaf)
                added = len(key) - pos
                self._tokens += added
                self._evictable += added
                return added
            shared = _common_prefix_len(child.key, key, pos, len(key))
            child.last_access = tick
            if not child.children:
                self._push_leaf(child)
            if shared < len(child.key):
                child = self._split(child, shared)
            node, pos = child, pos + shared
        return 0

    def _split(self, child: RadixNode, at: int) -> RadixNode:
        """Cut `child`'s edge after `at` tokens; returns the new upper node."""
        parent = child.parent
        assert parent is not None  # only the root has no parent, and it has no edge to cut
        upper = RadixNode(child.key[:at], parent)
        upper.lock_ref = child.lock_ref  # a lock on the lower part covers the upper part too
        upper.last_access = child.last_access
        parent.children[child.key[0]] = upper
        child.key = child.key[at:]
        child.parent = upper
        upper.children[child.key[0]] = child
        return upper

    def lock(self, node: RadixNode | None) -> None:
        """Lock `node` and its ancestors up to the root (None: nothing)."""
        while node is not None:
            if node.lock_ref == 0:
                self._evictable -= len(node.key)
            node.lock_ref += 1
            node = node.parent

    def unlock(self, node: RadixNode | None) -> None:
        while node is not None:
            node.lock_ref -= 1
            if node.lock_ref < 0:
                raise RuntimeError("radix cache: unlock without a matching lock")
            if node.lock_ref == 0:
                self._evictable += len(node.key)
            node = node.parent

    def evict(self, tokens: int) -> int:
        """Free at least `tokens` tokens from unlocked leaves, least recently used first (whole nodes);
        returns the number freed, less than asked when everything left is locked."""
        if tokens <= 0:
            return 0
        # Unlocked leaves in (last_access, id) order, as a heap of every leaf built afresh would give them: this runs
        # on every admission that finds the pool full.
        heap, root = self._leaves, self.root
        locked: list[tuple[int, int, RadixNode]] = []  # leaves that stay (and stay on the heap)
        freed = 0
        while heap and freed < tokens:
            entry = heapq.heappop(heap)
            leaf = entry[2]
            parent = leaf.parent
            if (
                leaf.children
                or leaf.last_access != entry[0]
                or parent is None
                or parent.children.get(leaf.key[0]) is not leaf
            ):
                continue  # stale: an inner node now, touched since, or gone from the tree
            if leaf.lock_ref:
                locked.append(entry)
                continue
            del parent.children[leaf.key[0]]
            freed += len(leaf.key)
            if parent is not root and not parent.children:
                heapq.heappush(heap, (parent.last_access, id(parent), parent))
        for entry in locked:
            heapq.heappush(heap, entry)
        self._tokens -= freed
        self._evictable -= freed
        return freed

    def _push_leaf(self, node: RadixNode) -> None:
        heap = self._leaves
        heapq.heappush(heap, (node.last_access, id(node), node))
        if len(heap) > self._rebuild_at:
            self._rebuild_leaves()

    def _rebuild_leaves(self) -> None:
        """The heap of every leaf in the tree now, one entry each."""
        leaves: list[tuple[int, int, RadixNode]] = []
        stack = list(self.root.children.values())
        while stack:
            node = stack.pop()
            if node.children:
                stack.extend(node.children.values())
            else:
                leaves.append((node.last_access, id(node), node))
        heapq.heapify(leaves)
        self._leaves = leaves
        self._rebuild_at = max(LEAF_HEAP_MIN_REBUILD, 4 * len(leaves))

    def evictable_tokens(self) -> int:
        return self._evictable

    def reset(self) -> None:
        """Drop everything (SGLang's /flush_cache); only valid when nothing is locked."""
        self.root = RadixNode((), None)
        self.root.lock_ref = 1
        self._tokens = 0
        self._evictable = 0
        self._leaves = []
        self._rebuild_at = LEAF_HEAP_MIN_REBUILD
