"""A fleet endpoint: its spec, the command lines a user would type, and a real one (two twins behind the real
smg router, wall clock) started, routed through, scraped and stopped with nothing left behind."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from endpoints.fleet_commands import fleet_workers, router_command, smg_program, worker_extra_args
from endpoints.probes.probe_records import SERVER_SAMPLES_FILE
from endpoints.probes.probe_session import probe_session
from endpoints.process_group import process_start
from endpoints.provision import EndpointStartError, provision, server_command, start_detached
from endpoints.router.router_spec import RouterSpec
from endpoints.spec import (
    EndpointMode,
    EndpointSpec,
    EndpointSpecError,
    FleetSpec,
    WorkerGroup,
    WorkerRole,
    load_endpoint_specs,
)
from process_members import group_members, listener_pid
from replay.recording.requests_reader import read_requests
from replay.runner import ReplayConfig, run_replay
from replay_sglang_peer import make_workload

BASE = {"name": "v3-fleet", "mode": "sim", "model": "deepseek-ai/DeepSeek-V3", "gpu_type": "H200", "gpu_count": 16,
        "usd_per_gpu_hour": 3.5}  # fmt: skip
TWIN_ARGS = ("--tp", "8", "--sim-hardware", "h200", "--sim-warmup-s", "0")


def _load(tmp_path: Path, **entry) -> EndpointSpec:
    path = tmp_path / "endpoints.yaml"
    path.write_text(json.dumps({"endpoints": [{**BASE, **entry}]}))
    return load_endpoint_specs(path)["v3-fleet"]


def test_a_fleet_is_replicas_behind_a_router_and_gpu_count_is_its_total(tmp_path):
    spec = _load(tmp_path, replicas=2, router={"policy": "round_robin", "args": ["--cache-threshold", 0.5]})
    assert spec.fleet == FleetSpec(RouterSpec("round_robin", ("--cache-threshold", "0.5")),
                                   (WorkerGroup(WorkerRole.REGULAR, 2, 8),))  # fmt: skip
    assert _load(tmp_path, replicas=2).fleet.router.policy == "cache_aware"  # smg's default
    assert _load(tmp_path).fleet is None and _load(tmp_path, replicas=1).fleet is None
    attach = _load(tmp_path, mode="attach", url="http://router:30000", router={"policy": "cache_aware"},
                   worker_urls=["http://gpu-1:30000", "http://gpu-2:30000"])  # fmt: skip
    assert attach.fleet.replicas == 2
    # worker_urls without a router block: the router's policy is not known, so no fleet is claimed
    assert _load(tmp_path, mode="attach", url="http://r:1", worker_urls=["http://a:1", "http://b:1"]).fleet is None


@pytest.mark.parametrize(
    "entry, message",
    [
        (
            {"replicas": 2, "clock": "virtual", "router": {"policy": "least_load"}},
            r"router: router policy 'least_load' is not modelled on the virtual clock",
        ),
        (
            {"replicas": 2, "clock": "virtual", "router": {"args": ["--cache-index", "hash"]}},
            r"router: router flag --cache-index hash: only smg's default \(tree\) is modelled",
        ),
        ({"replicas": 3}, r"gpu_count: is the fleet's total: 16 GPUs do not split evenly over 3 replicas"),
        ({"replicas": 2, "router": {"policy": "cache-aware"}}, r"router.policy: unknown router policy 'cache-aware'"),
        ({"replicas": 2, "router": {"args": ["--port", "1"]}}, r"router.args\[0\]: --port is set by costbench"),
        ({"replicas": 2, "router": {"args": ["--api-key", "k"]}}, r"router.args\[0\]: --api-key would write a secret"),
        ({"replicas": 2, "router": {"args": ["--prefill", "http://p:1"]}}, r"--prefill is set by costbench"),
        ({"replicas": 2, "router": {"polcy": "x"}}, r"router.polcy"),
        (
            {"mode": "attach", "url": "http://r:1", "replicas": 2},
            r"replicas: attach counts its replicas in worker_urls",
        ),
        ({"mode": "attach", "url": "http://r:1", "router": {}}, r"router: a router block describes a fleet"),
    ],
)
def test_bad_fleets_are_refused_naming_the_file_and_the_key(tmp_path, entry, message):
    with pytest.raises(EndpointSpecError, match=message) as caught:
        _load(tmp_path, **entry)
    assert str(tmp_path / "endpoints.yaml") in str(caught.value)


def test_launch_builds_the_commands_a_user_would_type(tmp_path):
    spec = _load(tmp_path, mode="launch", replicas=2, gpu_count=8, server_args=["--tp", "4"],
                 router={"policy": "cache_aware", "args": ["--cache-threshold", "0.5"]})  # fmt: skip
    workers = [
        [*server_command(spec, 31001 + i, "127.0.0.1"), *worker_extra_args(spec, fleet_workers(spec.fleet)[i])]
        for i in (0, 1)
    ]
    assert workers[1][1:] == ["-m", "sglang.launch_server", "--model-path", "deepseek-ai/DeepSeek-V3",
                              "--host", "127.0.0.1", "--port", "31002", "--enable-metrics", "--enable-cache-report",
                              "--tp", "4", "--base-gpu-id", "4"]  # fmt: skip
    assert workers[0][-2:] == ["--base-gpu-id", "0"]
    router = router_command("smg", spec.fleet, ["http://127.0.0.1:31001", "http://127.0.0.1:31002"], "0.0.0.0", 30000,
                            29000)  # fmt: skip
    assert " ".join(router) == (
        "smg launch --worker-urls http://127.0.0.1:31001 http://127.0.0.1:31002 --host 0.0.0.0 --port 30000 "
        "--prometheus-host 0.0.0.0 --prometheus-port 29000 --policy cache_aware --cache-threshold 0.5"
    )
    placed = _load(tmp_path, mode="launch", replicas=2, server_args=["--tp", "8", "--base-gpu-id", "0"])
    assert worker_extra_args(placed, fleet_workers(placed.fleet)[1]) == []  # the user's own placement is kept


# --- a real fleet: two `costbench sim` twins and the real smg, on loopback, in real time ------------------


def _fleet_spec(policy: str = "round_robin", server_args: tuple[str, ...] = TWIN_ARGS) -> EndpointSpec:
    fleet = FleetSpec(RouterSpec(policy), (WorkerGroup(WorkerRole.REGULAR, 2, 8),))
    return EndpointSpec("v3-fleet", EndpointMode.SIM, "deepseek-ai/DeepSeek-V3", server_args, "H200", 16, 3.5,
                        ready_timeout_s=60.0, fleet=fleet)  # fmt: skip


pytestmark_smg = pytest.mark.skipif(smg_program() is None, reason="smg (SGLang's router) is pinned in pyproject.toml")


@pytestmark_smg
def test_a_fleet_routes_through_the_real_router_is_scraped_per_worker_and_leaves_nothing(tmp_path):
    groups: list[int] = []
    workload = make_workload([0.0, 0.2, 0.4, 0.6], input_tokens=24)
    with provision(_fleet_spec(), tmp_path) as endpoint:
        assert len(endpoint.worker_urls) == 2 and endpoint.router_metrics_url
        facts = json.loads((tmp_path / "server_facts.json").read_text())
        assert [w["url"] for w in facts["workers"]] == list(endpoint.worker_urls)
        assert facts["router"]["policy"] == "round_robin" and facts["router"]["command"][1] == "launch"
        groups.append(os.getpgid(listener_pid(endpoint.url)))
        assert len(group_members(groups[0])) >= 3  # two twins and the router, in one group
        probes = probe_session(endpoint, tmp_path, "run-1")
        probes.tick()
        run = run_replay(workload, ReplayConfig(url=endpoint.url, run_id="run-1", request_timeout_s=30), tmp_path)
        probes.stop(final_tick=True)
    assert group_members(groups[0]) == []  # every twin and the router stopped
    requests = read_requests(tmp_path).to_pylist()
    assert run.requests_ok == 4, [r["error_message"] for r in requests]
    # round_robin: the router names the worker of each request (x-smg-routed-worker-id), two each
    served = [r["worker"] for r in sorted(requests, key=lambda r: r["sent_mono_s"])]
    assert sorted(served) == sorted(endpoint.worker_urls * 2) and served[0] != served[1]
    rows = pq.read_table(tmp_path / SERVER_SAMPLES_FILE).to_pylist()
    last = max(r["sample_wall_s"] for r in rows)
    prompts = {r["worker"]: r["value"] for r in rows
               if r["metric"] == "sglang:prompt_tokens_total" and r["sample_wall_s"] == last}  # fmt: skip
    # each worker's own counter holds exactly the prompts the router says it sent there
    assert prompts == {url: sum(r["prompt_tokens"] for r in requests if r["worker"] == url) for url in prompts}
    assert set(prompts) == set(endpoint.worker_urls)
    assert {r["role"] for r in rows if r["metric"].startswith("sglang:")} == {"worker"}
    routed = {r["worker"]: r["value"] for r in rows if r["metric"] == "smg_worker_requests_total"
              and r["sample_wall_s"] == last}  # fmt: skip
    assert routed == {url: 2.0 for url in endpoint.worker_urls}  # the router's own count, per worker
    assert {r["role"] for r in rows if r["metric"].startswith("smg_")} == {"router"}


@pytestmark_smg
def test_a_fleet_whose_worker_cannot_start_fails_and_stops_every_process(tmp_path):
    spawned: list[int] = []
    with pytest.raises(EndpointStartError, match=r"exited with code 2 before it was healthy; log .*worker-0"):
        start_detached(_fleet_spec(server_args=(*TWIN_ARGS, "--no-such-flag")), tmp_path, on_spawned=spawned.append)
    assert spawned and group_members(spawned[0]) == [] and process_start(spawned[0]) is None
