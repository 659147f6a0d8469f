"""The routing model's pure parts: the text smg routes on, the shared prefix tree, and cache_aware's choice."""

from __future__ import annotations

from endpoints.router import simple_policies
from endpoints.router.cache_aware_policy import CacheAwarePolicy
from endpoints.router.policy_params import parse_router_spec
from endpoints.router.router_spec import RouterSpec
from endpoints.router.routing_text import routing_text
from endpoints.router.simple_policies import RoundRobinPolicy
from endpoints.router.text_radix_tree import TextRadixTree
from endpoints.router.worker_loads import FleetView


def test_routing_text_is_the_raw_text_smg_reads() -> None:
    chat = {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": [
        {"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {}}, {"type": "text", "text": "there"}]}]}  # fmt: skip
    assert routing_text("/v1/chat/completions", chat) == "be brief hi there"
    assert routing_text("/generate", {"input_ids": [1, 22, 333]}) == "1 22 333"
    assert routing_text("/v1/completions", {"prompt": ["a", "b"]}) == "a b"
    # input_ids as smg writes them, whatever a client put in the list (token ids are written the fast way)
    for ids in ([0, -7, 2**63 - 1], [True, 1], [None, 2], [1.5, 2.0, 1e20], [2**70], ["1", 2], [[1, 2], [3]], []):
        assert routing_text("/generate", {"input_ids": ids}) == " ".join(
            map(str, [i for b in ids for i in b] if ids and isinstance(ids[0], list) else ids)
        )


def test_the_tree_finds_the_holders_of_the_deepest_prefix_and_evicts_the_stalest() -> None:
    tree = TextRadixTree()
    tree.insert("hello world", 0)
    tree.insert("hello world", 1)
    tree.insert("hello", 2)
    assert tree.match("hello world!").matched_chars == 11
    assert sorted(tree.match("hello world!").tenants) == [0, 1]
    assert sorted(tree.match("help").tenants) == [0, 1, 2]  # part-way along the shared edge "hel"
    tree.evict_to(tree.total_chars() - 6)  # the oldest leaf (" world" of worker 0) goes first
    assert tree.match("hello world").tenants == (1,) and tree.chars_of(0) == 5


def test_cache_aware_keeps_a_conversation_on_its_worker_until_it_spills() -> None:
    policy = CacheAwarePolicy(parse_router_spec(RouterSpec("cache_aware", ("--balance-abs-threshold", "2"))))
    urls = ("http://a", "http://b", "http://c")
    idle = FleetView(urls, (0, 0, 0), (True, True, True))
    home = policy.select("conversation one, turn one", idle, 0.0)
    assert policy.select("conversation one, turn one; turn two", idle, 1.0) == home
    busy = FleetView(urls, tuple(9 if w == home else 0 for w in range(3)), (True, True, True))
    assert policy.select("conversation one, turn one; turn two; three", busy, 2.0) != home  # over both margins


RR_URLS = ("http://a", "http://b", "http://c")


def _rr_view(*eligible: bool, urls=RR_URLS) -> FleetView:
    return FleetView(urls, (0,) * len(urls), eligible)


def test_a_worker_rejoining_resumes_the_full_set_s_rotation():
    policy = RoundRobinPolicy(parse_router_spec(RouterSpec("round_robin")))
    picks = [policy.select("", _rr_view(*e), 0.0) for e in [(1, 1, 1), (1, 1, 1), (1, 0, 1), (1, 0, 1), (1, 1, 1)]]
    # full set starts at 0: a, b; {a, c} is the second set seen, so starts at 1: c, then a; the full set resumes: c
    assert picks == [0, 1, 2, 0, 2]


def test_the_same_workers_in_another_order_rotate_on_their_own():
    policy = RoundRobinPolicy(parse_router_spec(RouterSpec("round_robin")))
    forward, backward = RR_URLS[:2], RR_URLS[1::-1]
    picks = [
        v.urls[policy.select("", v, 0.0)]
        for v in [
            _rr_view(1, 1, urls=forward),
            _rr_view(1, 1, urls=backward),
            _rr_view(1, 1, urls=forward),
            _rr_view(1, 1, urls=backward),
        ]
    ]
    assert picks == ["http://a", "http://a", "http://b", "http://b"]


def test_past_the_cap_the_least_recently_seen_set_is_forgotten(monkeypatch):
    monkeypatch.setattr(simple_policies, "MAX_TRACKED_SETS", 2)
    policy = RoundRobinPolicy(parse_router_spec(RouterSpec("round_robin")))
    full, ab, ac = _rr_view(1, 1, 1), _rr_view(1, 1, 0), _rr_view(1, 0, 1)
    assert [policy.select("", v, 0.0) for v in (full, ab, ac)] == [0, 1, 0]  # starts 0, 1, 2
    # ac's arrival evicted full (the oldest): full starts over from the shared position, 3 -> a, not b
    assert policy.select("", full, 0.0) == 0
