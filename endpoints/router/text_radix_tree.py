"""cache_aware's approximate prefix tree over routing text (smg's kv_index `string_tree.rs`): one radix tree
per model shared by every worker, each node holding the workers ("tenants") whose routed text passed
through it and when they last did.

A match walks the tree as far as the text agrees with any tenant's; the tenants of the deepest node reached
(even part-way along its edge) are the ones holding that prefix. Inserting marks the whole path for one
tenant. Eviction (`evict_to`) drops the least recently touched tenant leaves until the total, counted per
tenant as smg counts it, is at most the bound.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

MATCHED_TENANTS_CAP = 8  # kv_index common.rs: at most this many tenants come back from a match


@dataclass(slots=True)
class _Node:
    text: str
    parent: _Node | None
    children: dict[str, _Node] = field(default_factory=dict)
    tenants: dict[int, int] = field(default_factory=dict)  # worker index -> last touch (a counter)


@dataclass(frozen=True, slots=True)
class PrefixMatch:
    matched_chars: int
    input_chars: int
    tenants: tuple[int, ...]  # workers holding the deepest matched node; empty when nothing matched


def _shared_prefix(text: str, at: int, edge: str) -> int:
    """Length of the common prefix of text[at:] and edge (binary search on C-speed prefix comparisons)."""
    lo, hi = 0, min(len(text) - at, len(edge))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if text.startswith(edge[:mid], at):
            lo = mid
        else:
            hi = mid - 1
    return lo


class TextRadixTree:
    def __init__(self) -> None:
        self._root = _Node("", None)
        self._chars_by_tenant: dict[int, int] = {}
        self._tick = 0

    def add_tenant(self, tenant: int) -> None:
        """A worker joins with an empty path (smg's init_workers inserts "" for each)."""
        self._root.tenants.setdefault(tenant, self._tick)
        self._chars_by_tenant.setdefault(tenant, 0)

    def total_chars(self) -> int:
        return sum(self._chars_by_tenant.values())

    def chars_of(self, tenant: int) -> int:
        return self._chars_by_tenant.get(tenant, 0)

    def match(self, text: str) -> PrefixMatch:
        # `matched` indexes the text: no copy of the rest of a long prompt at each level.
        node, matched, end = self._root, 0, len(text)
        while matched < end:
            child = node.children.get(text[matched])
            if child is None:
                break
            edge = child.text
            shared = len(edge) if text.startswith(edge, matched) else _shared_prefix(text, matched, edge)
            matched += shared
            node = child
            if shared < len(edge):
                break
        tenants = tuple(list(node.tenants)[:MATCHED_TENANTS_CAP]) if matched else ()
        return PrefixMatch(matched, len(text), tenants)

    def insert(self, text: str, tenant: int) -> None:
        self._tick += 1
        node = self._root
        self._touch(node, tenant)
        at, end = 0, len(text)
        while at < end:
            child = node.children.get(text[at])
            if child is None:
                leaf = _Node(text[at:], node)
                node.children[text[at]] = leaf
                self._touch(leaf, tenant)
                return
            edge = child.text
            shared = len(edge) if text.startswith(edge, at) else _shared_prefix(text, at, edge)
            if shared < len(edge):
                child = self._split(child, shared)
            self._touch(child, tenant)
            node, at = child, at + shared

    def _split(self, node: _Node, at: int) -> _Node:
        """Cuts node's edge at `at`: a new parent holds the head and every tenant of node (same chars in all)."""
        assert node.parent is not None
        head = _Node(node.text[:at], node.parent, tenants=dict(node.tenants))
        node.parent.children[head.text[0]] = head
        node.text = node.text[at:]
        node.parent = head
        head.children[node.text[0]] = node
        return head  # each tenant's char count is unchanged: head + node is the old node

    def _touch(self, node: _Node, tenant: int) -> None:
        if tenant not in node.tenants:
            self._chars_by_tenant[tenant] = self._chars_by_tenant.get(tenant, 0) + len(node.text)
        node.tenants[tenant] = self._tick

    def evict_to(self, max_chars: int) -> None:
        """Least recently touched tenant leaves go first, until the total is at most max_chars."""
        if self.total_chars() <= max_chars:
            return
        heap: list[tuple[int, int, int, _Node]] = []
        stack = [self._root]
        order = 0
        while stack:
            node = stack.pop()
            stack.extend(node.children.values())
            if node is self._root:
                continue
            for tenant, touched in node.tenants.items():
                if not any(tenant in c.tenants for c in node.children.values()):
                    order += 1
                    heap.append((touched, order, tenant, node))
        heapq.heapify(heap)
        while heap and self.total_chars() > max_chars:
            _, _, tenant, node = heapq.heappop(heap)
            if tenant not in node.tenants or any(tenant in c.tenants for c in node.children.values()):
                continue
            del node.tenants[tenant]
            self._chars_by_tenant[tenant] -= len(node.text)
            parent = node.parent
            if parent is None:
                continue
            if not node.children and not node.tenants:
                del parent.children[node.text[0]]
            if parent is not self._root and tenant in parent.tenants:
                if not any(tenant in c.tenants for c in parent.children.values()):
                    order += 1
                    heapq.heappush(heap, (parent.tenants[tenant], order, tenant, parent))
