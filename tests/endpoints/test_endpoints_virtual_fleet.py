"""A fleet on the virtual clock (endpoints/virtual_twin.py): two twins and the router's model of smg on one loop.
The same multi-turn conversations through cache_aware and round_robin: every request names its worker, the
workers' shares are the policy's, cache_aware keeps each conversation's turns on one cache (a higher fleet hit
rate), and the probes record every worker and the router as a wall-clock fleet's do."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from endpoints.probes.probe_records import GPU_SAMPLES_FILE, SERVER_SAMPLES_FILE
from endpoints.router.router_spec import RouterSpec
from endpoints.spec import EndpointClock, EndpointMode, EndpointSpec, FleetSpec, WorkerGroup, WorkerRole
from endpoints.virtual_twin import replay_on_virtual_twin
from replay.recording.requests_reader import read_requests
from replay.runner import ReplayConfig, run_replay_async
from workloads.workload import WORKLOAD_SCHEMA, TraceFormat, Workload

BLOCK = 64
CONVERSATIONS, TURNS = 7, 4  # an odd count: round_robin then moves every conversation on each turn
FLAGS = ("--tp", "8", "--sim-hardware", "h200", "--stream-interval", "4")


def _workload(name: str, columns: dict[str, list]) -> Workload:
    """A Mooncake-shaped workload of `columns` (request_id .. prefix_blocks), free-form prompts with no text."""
    n = len(columns["request_id"])
    unset = {c: [None] * n for c in ("prompt", "reasoning_tokens", "response_format", "constrained")}
    table = pa.Table.from_pydict({**columns, **unset}, schema=WORKLOAD_SCHEMA)
    return Workload(name, "test.jsonl", TraceFormat.MOONCAKE, "s", BLOCK, table)


def _conversations() -> Workload:
    """Conversation c's turn t is the conversation so far: 4 blocks a turn, so turn t's prompt holds turn t-1's."""
    rows = [(c, t) for t in range(TURNS) for c in range(CONVERSATIONS)]
    return _workload(
        "conversations",
        {
            "request_id": [f"c{c}t{t}" for c, t in rows],
            "session_id": [f"c{c}" for c, _ in rows],
            "turn": [t for _, t in rows],
            "arrival_s": [t * 6.0 + c * 0.4 for c, t in rows],  # light load: routing alone decides
            "input_tokens": [4 * BLOCK * (t + 1) for _, t in rows],
            "output_tokens": [16] * len(rows),
            "prefix_blocks": [[c * 1000 + j for j in range(4 * (t + 1))] for c, t in rows],
        },
    )


def _fleet(policy: str) -> EndpointSpec:
    fleet = FleetSpec(RouterSpec(policy), (WorkerGroup(WorkerRole.REGULAR, 2, 8),))
    return EndpointSpec("v3-2x-virtual", EndpointMode.SIM, "deepseek-ai/DeepSeek-V3", FLAGS, "H200", 16, 3.5,
                        scrape_interval_s=1.0, clock=EndpointClock.VIRTUAL, fleet=fleet)  # fmt: skip


def _run(run_dir: Path, policy: str) -> dict:
    workload = _conversations()
    seen: dict = {}

    def replay(endpoint, clock):
        seen["worker_urls"] = endpoint.worker_urls
        config = ReplayConfig(url=endpoint.url, backend="sglang", run_id=policy, request_timeout_s=60)
        return run_replay_async(workload, config, run_dir / "shard-0", clock)

    info = replay_on_virtual_twin(_fleet(policy), run_dir, policy, cold_start=True, replay=replay)
    requests = read_requests(run_dir / "shard-0").to_pylist()
    return {
        "info": info,
        "requests": requests,
        "workers": seen["worker_urls"],
        "samples": pq.read_table(run_dir / SERVER_SAMPLES_FILE).to_pylist(),
        "gpus": pq.read_table(run_dir / GPU_SAMPLES_FILE).to_pylist(),
        "facts": json.loads((run_dir / "server_facts.json").read_text()),
        "hit_rate": sum(r["cached_tokens"] for r in requests) / sum(r["prompt_tokens"] for r in requests),
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, dict]:
    return {policy: _run(tmp_path_factory.mktemp(policy), policy) for policy in ("cache_aware", "round_robin")}


@pytest.mark.parametrize("policy", ["cache_aware", "round_robin"])
def test_every_request_names_the_worker_that_served_it(runs, policy):
    run = runs[policy]
    assert run["info"].requests_ok == CONVERSATIONS * TURNS
    assert len(run["workers"]) == 2
    assert {r["worker"] for r in run["requests"]} == set(run["workers"])  # the model's x-smg-routed-worker-id


def test_cache_aware_keeps_a_conversation_on_one_worker_and_round_robin_alternates(runs):
    def homes(policy: str) -> dict[str, set[str]]:
        by_conversation: dict[str, set[str]] = {}
        for r in runs[policy]["requests"]:
            by_conversation.setdefault(r["session_id"], set()).add(r["worker"])
        return by_conversation

    assert all(len(workers) == 1 for workers in homes("cache_aware").values())
    assert all(len(workers) == 2 for workers in homes("round_robin").values())
    for policy in ("cache_aware", "round_robin"):
        counts = [sum(r["worker"] == url for r in runs[policy]["requests"]) for url in runs[policy]["workers"]]
        share = min(counts) / sum(counts)
        # round_robin: 14 and 14; cache_aware: whole conversations, the first turns spread by expected wait
        assert share == 0.5 if policy == "round_robin" else share >= 3 * TURNS / (CONVERSATIONS * TURNS), counts


def test_cache_aware_realises_the_higher_fleet_hit_rate(runs):
    # Turn t of a conversation holds turn t-1's prompt: on one cache t/(t+1) of it hits; moved every turn,
    # only turn t-2's (t-1)/(t+1) does.
    cache_aware, round_robin = runs["cache_aware"]["hit_rate"], runs["round_robin"]["hit_rate"]
    assert cache_aware > round_robin + 0.15, (cache_aware, round_robin)


@pytest.mark.parametrize("policy", ["cache_aware", "round_robin"])
def test_the_probes_scrape_every_worker_and_the_router_model(runs, policy):
    run = runs[policy]
    rows = run["samples"]
    last = max(r["sample_wall_s"] for r in rows)
    prompts = {r["worker"]: r["value"] for r in rows
               if r["metric"] == "sglang:prompt_tokens_total" and r["sample_wall_s"] == last}  # fmt: skip
    # each worker's own counter holds the prompts the router says it sent there
    assert prompts == {url: sum(r["prompt_tokens"] for r in run["requests"] if r["worker"] == url) for url in prompts}
    assert set(prompts) == set(run["workers"])
    assert {r["role"] for r in rows if r["metric"].startswith("sglang:")} == {"worker"}
    routed = {r["worker"]: r["value"] for r in rows
              if r["metric"] == "smg_worker_requests_total" and r["sample_wall_s"] == last}  # fmt: skip
    assert routed == {url: float(sum(r["worker"] == url for r in run["requests"])) for url in run["workers"]}
    assert {r["role"] for r in rows if r["metric"].startswith("smg_")} == {"router"}
    router = run["facts"]["router"]
    assert router["policy"] == policy and router["modelled"] is True and "not the smg binary" in router["model"]
    assert [w["url"] for w in run["facts"]["workers"]] == list(run["workers"])
    assert run["facts"]["clock"] == "virtual"


def test_each_worker_reports_its_own_modelled_gpus(runs):
    run = runs["round_robin"]
    hosts = {url.removeprefix("http://") for url in run["workers"]}
    rows = run["gpus"]
    assert {r["source"] for r in rows} == {"twin"} and {r["host"] for r in rows} == hosts  # one row set per worker
    for host in hosts:
        mine = [r for r in rows if r["host"] == host]
        assert {r["gpu_index"] for r in mine} == set(range(8))
        assert all(r["utilisation_pct"] is not None for r in mine) and max(r["utilisation_pct"] for r in mine) > 0


def test_a_policy_the_model_does_not_have_is_refused_by_name(tmp_path):
    spec = _fleet("cache_aware")
    unmodelled = replace(spec, fleet=replace(spec.fleet, router=RouterSpec("least_load")))
    with pytest.raises(ValueError, match="router policy 'least_load' is not modelled on the virtual clock"):
        replay_on_virtual_twin(unmodelled, tmp_path, "x", cold_start=False, replay=lambda endpoint, clock: None)


def _burst(requests: int = 240) -> Workload:
    """`requests` independent prompts arriving within 2 s, each with a long answer: far more in flight at once than
    an HTTP client pool's default 100 connections."""
    return _workload(
        "burst",
        {
            "request_id": [f"b{i}" for i in range(requests)],
            "session_id": [None] * requests,
            "turn": [None] * requests,
            "arrival_s": [i * 2.0 / requests for i in range(requests)],
            "input_tokens": [2 * BLOCK] * requests,
            "output_tokens": [400] * requests,
            "prefix_blocks": [[10_000 + 2 * i, 10_001 + 2 * i] for i in range(requests)],
        },
    )


def _burst_timings(run_dir: Path) -> list[tuple]:
    workload = _burst()

    def replay(endpoint, clock):
        config = ReplayConfig(url=endpoint.url, backend="sglang", run_id="burst", request_timeout_s=600)
        return run_replay_async(workload, config, run_dir / "shard-0", clock)

    replay_on_virtual_twin(_fleet("cache_aware"), run_dir, "burst", cold_start=True, replay=replay)
    rows = read_requests(run_dir / "shard-0").to_pylist()
    return sorted((r["request_id"], r["sent_mono_s"], r["first_token_mono_s"], r["finish_mono_s"]) for r in rows)


def test_an_overloaded_fleet_replays_the_same_twice_with_no_cap_on_requests_in_flight(tmp_path):
    first, second = _burst_timings(tmp_path / "a"), _burst_timings(tmp_path / "b")
    assert first == second  # the virtual clock repeats exactly, however many requests the router holds
    # More than 100 in flight at once (aiohttp's default pool would have queued the rest inside the router model).
    most = max(sum(sent <= t < finish for _, sent, _, finish in first) for _, t, _, _ in first)
    assert most > 100, most
