"""A disaggregated fleet endpoint (`disaggregation:` in endpoints.yaml): its spec, the commands a user would type,
and a real one (a prefill and a decode twin behind the real smg router in PD mode, wall clock) started, replayed
through, scraped per role and stopped with nothing left behind."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from endpoints.fleet_commands import fleet_workers, router_command, smg_program, worker_extra_args
from endpoints.probes.probe_records import GPU_SAMPLES_FILE, SERVER_SAMPLES_FILE
from endpoints.probes.probe_session import probe_session
from endpoints.provision import provision, server_command
from endpoints.spec import EndpointSpec, EndpointSpecError, WorkerRole, load_endpoint_specs
from process_members import group_members, listener_pid
from replay.recording.requests_reader import read_requests
from replay.runner import ReplayConfig, run_replay
from replay_sglang_peer import make_workload

TWIN_ARGS = ["--tp", "8", "--sim-hardware", "h200", "--sim-warmup-s", "0"]
DECODE = {"replicas": 3, "gpus_per_worker": 8, "server_args": ["--max-running-requests", "256"]}
BASE = {"name": "v3-pd", "mode": "sim", "model": "deepseek-ai/DeepSeek-V3", "gpu_type": "H200", "gpu_count": 32,
        "usd_per_gpu_hour": 3.5, "server_args": TWIN_ARGS,
        "disaggregation": {"prefill": {"replicas": 1, "gpus_per_worker": 8}, "decode": DECODE}}  # fmt: skip


def _load(tmp_path: Path, **entry) -> EndpointSpec:
    path = tmp_path / "endpoints.yaml"
    path.write_text(json.dumps({"endpoints": [{**BASE, **entry}]}))
    return load_endpoint_specs(path)["v3-pd"]


def test_a_pd_fleet_is_prefill_and_decode_groups_with_their_own_flags(tmp_path):
    spec = _load(tmp_path)
    assert spec.fleet is not None and spec.fleet.disaggregated and spec.fleet.replicas == 4
    (prefill, decode) = spec.fleet.groups
    assert (prefill.role, prefill.count, decode.role, decode.count) == (WorkerRole.PREFILL, 1, WorkerRole.DECODE, 3)
    assert decode.server_args == ("--max-running-requests", "256")


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"gpu_count": 16}, r"gpu_count: is the fleet's total: the prefill and decode workers take 32 GPUs, not 16"),
        ({"replicas": 2}, r"replicas: a disaggregated fleet counts its workers in disaggregation"),
        (
            {"clock": "virtual", "router": {"policy": "least_load"}},
            r"router: router policy 'least_load' is not modelled on the virtual clock",
        ),
        (
            {
                "disaggregation": {
                    "prefill": {"gpus_per_worker": 8, "server_args": ["--disaggregation-mode", "decode"]},
                    "decode": {"gpus_per_worker": 8},
                },
                "gpu_count": 16,
            },
            r"disaggregation.prefill.server_args\[0\]: --disaggregation-mode is set by costbench for each role",
        ),
        ({"disaggregation": {"prefill": {"gpus_per_worker": 8}}}, r"disaggregation.decode"),
        ({"mode": "attach", "url": "http://r:1"}, r"disaggregation: attach lists a PD fleet's prefill and decode"),
    ],
)
def test_bad_pd_fleets_are_refused_naming_the_file_and_the_key(tmp_path, entry, message):
    with pytest.raises(EndpointSpecError, match=message) as caught:
        _load(tmp_path, **entry)
    assert str(tmp_path / "endpoints.yaml") in str(caught.value)


def test_launch_builds_the_pd_commands_a_user_would_type(tmp_path):
    spec = _load(tmp_path, mode="launch", server_args=["--tp", "8"])
    assert spec.fleet is not None
    workers = fleet_workers(spec.fleet)
    prefill = [*server_command(spec, 31001, "127.0.0.1"), *worker_extra_args(spec, workers[0], 8998)]
    decode = [*server_command(spec, 31002, "127.0.0.1"), *worker_extra_args(spec, workers[1])]
    assert prefill[-6:] == ["--disaggregation-mode", "prefill", "--disaggregation-bootstrap-port", "8998",
                            "--base-gpu-id", "0"]  # fmt: skip
    assert decode[-6:] == ["--max-running-requests", "256", "--disaggregation-mode", "decode", "--base-gpu-id", "8"]
    urls = [f"http://127.0.0.1:{31001 + i}" for i in range(4)]
    router = router_command("smg", spec.fleet, urls, "0.0.0.0", 30000, 29000, {urls[0]: 8998})
    assert " ".join(router) == (
        "smg launch --pd-disaggregation --prefill http://127.0.0.1:31001 8998 --decode http://127.0.0.1:31002 "
        "--decode http://127.0.0.1:31003 --decode http://127.0.0.1:31004 --host 0.0.0.0 --port 30000 "
        "--prometheus-host 0.0.0.0 --prometheus-port 29000 --policy cache_aware"
    )


@pytest.mark.skipif(smg_program() is None, reason="smg (SGLang's router) is pinned in pyproject.toml")
def test_a_pd_fleet_replays_through_the_real_router_is_scraped_per_role_and_leaves_nothing(tmp_path):
    spec = _load(tmp_path, gpu_count=16, disaggregation={"prefill": {"gpus_per_worker": 8},
                                                          "decode": {"gpus_per_worker": 8}})  # fmt: skip
    workload = make_workload([0.0, 0.2, 0.4, 0.6], input_tokens=24)
    with provision(spec, tmp_path) as endpoint:
        facts = json.loads((tmp_path / "server_facts.json").read_text())
        assert [w["server_info"]["disaggregation_mode"] for w in facts["workers"]] == ["prefill", "decode"]
        assert facts["router"]["pd_disaggregation"] and "--pd-disaggregation" in facts["router"]["command"]
        group = os.getpgid(listener_pid(endpoint.url))  # the router's, the fleet's one group
        probes = probe_session(endpoint, tmp_path, "run-1")
        probes.tick()
        run = run_replay(workload, ReplayConfig(url=endpoint.url, run_id="run-1", request_timeout_s=30), tmp_path)
        probes.stop(final_tick=True)
    assert group_members(group) == []  # both twins and the router stopped
    requests = read_requests(tmp_path).to_pylist()
    assert run.requests_ok == 4, [r["error_message"] for r in requests]
    # smg 1.13.0 in PD mode names the decode worker in x-smg-routed-worker-id (tried: /generate and chat, streamed
    # or not); the replay keeps it.
    assert {r["worker"] for r in requests} == {facts["workers"][1]["url"]}
    rows = pq.read_table(tmp_path / SERVER_SAMPLES_FILE).to_pylist()
    roles = {r["worker"]: r["role"] for r in rows if r["metric"].startswith("sglang:")}
    assert sorted(roles.values()) == ["decode", "prefill"]
    last = max(r["sample_wall_s"] for r in rows)
    generated = {roles[r["worker"]]: r["value"] for r in rows
                 if r["metric"] == "sglang:generation_tokens_total" and r["sample_wall_s"] == last}  # fmt: skip
    # The prefill samples each request's first token; the decode produces them all for the client.
    assert generated == {"prefill": 4.0, "decode": float(sum(r["output_tokens"] for r in requests))}


def test_a_pd_fleet_on_the_virtual_clock_replays_through_the_routers_pd_model_and_is_scraped_per_role(tmp_path):
    from endpoints.virtual_twin import replay_on_virtual_twin
    from replay.runner import run_replay_async

    spec = _load(tmp_path, gpu_count=24, clock="virtual", disaggregation={"prefill": {"gpus_per_worker": 8},
                 "decode": {"replicas": 2, "gpus_per_worker": 8}})  # fmt: skip
    workload = make_workload([0.0, 0.1, 0.2, 0.3, 0.4, 0.5], input_tokens=2048)

    def replay(endpoint, clock):
        config = ReplayConfig(url=endpoint.url, run_id="run-v", request_timeout_s=60)
        return run_replay_async(workload, config, tmp_path / "shard-0", clock)

    info = replay_on_virtual_twin(spec, tmp_path, "run-v", cold_start=True, replay=replay)
    requests = read_requests(tmp_path / "shard-0").to_pylist()
    assert info.requests_ok == 6, [r["error_message"] for r in requests]
    facts = json.loads((tmp_path / "server_facts.json").read_text())
    decodes = {w["url"] for w in facts["workers"][1:]}
    assert {r["worker"] for r in requests} <= decodes  # the model names the decode worker, as smg does
    assert [w["server_info"]["disaggregation_mode"] for w in facts["workers"]] == ["prefill", "decode", "decode"]
    assert facts["router"]["pd_disaggregation"] and facts["router"]["modelled"]
    rows = pq.read_table(tmp_path / SERVER_SAMPLES_FILE).to_pylist()
    last = max(r["sample_wall_s"] for r in rows)
    at_end = [r for r in rows if r["sample_wall_s"] == last]
    generated = {
        r["worker"]: (r["role"], r["value"]) for r in at_end if r["metric"] == "sglang:generation_tokens_total"
    }
    assert sorted(role for role, _ in generated.values()) == ["decode", "decode", "prefill"]
    assert sum(v for role, v in generated.values() if role == "prefill") == 6  # a first token each
    assert sum(v for role, v in generated.values() if role == "decode") == sum(r["output_tokens"] for r in requests)
    routed = {r["worker"]: r["value"] for r in at_end if r["metric"] == "smg_worker_requests_total"}
    prefill_url = facts["workers"][0]["url"]
    assert routed[prefill_url] == 6 and sum(routed.values()) == 12  # every request to one of each role
    transfers = [r for r in at_end if r["metric"] == "sglang:kv_transfer_total_mb_count"]
    assert [r["role"] for r in transfers] == ["prefill"] and transfers[0]["value"] == 6
    gpus = pq.read_table(tmp_path / GPU_SAMPLES_FILE).to_pylist()  # each worker's modelled GPUs, prefill and decode
    busiest = {}
    for r in gpus:
        busiest[r["host"]] = max(busiest.get(r["host"], 0.0), r["utilisation_pct"])
    assert set(busiest) == {w["url"].removeprefix("http://") for w in facts["workers"]}
    assert busiest[prefill_url.removeprefix("http://")] > 0 and {r["source"] for r in gpus} == {"twin"}
