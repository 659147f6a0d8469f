"""No secret on disk: a server that answers as SGLang does, but echoes its `api_key` and
`admin_api_key` in /server_info (as SGLang releases have), plus secrets under names and in shapes no
name rule knows (`auth`, `private_key_pem`, a `*_b64` blob, a bare `sk-...`, a name/value pair), is
attached, probed, replayed and ingested into the warehouse; then every byte the run wrote is searched
for the secrets.

A fact costbench reads from the same answer (a random `version`) must be found where server facts are
kept, so the search is shown to see what is stored, not merely to miss it; a field nothing reads (a
random `served_model_name`) must be found nowhere.
"""

from __future__ import annotations

import logging
import secrets
from datetime import date

import orjson
import pyarrow.parquet as pq

from endpoints.probes.probe_records import (
    GPU_SAMPLE_SCHEMA,
    GPU_SAMPLES_FILE,
    SERVER_SAMPLE_SCHEMA,
    SERVER_SAMPLES_FILE,
)
from endpoints.probes.probe_session import probing
from endpoints.provision import provision
from endpoints.spec import EndpointMode, EndpointSpec
from replay.recording.requests_reader import read_requests
from replay.recording.run_json import read_run_json
from replay.recording.shard_merge import merge_shard_runs
from replay.runner import ReplayConfig, run_replay
from replay_sglang_peer import PeerBehaviour, make_workload, peer_in_thread
from stored_text import decoded_text
from warehouse.backends.store import Warehouse
from warehouse.marts.run_rows import build_run_row
from warehouse.parquet.lake import write_partition
from warehouse.report.weekly_report import write_weekly_report

MONDAY = date(2026, 11, 16)
KEY_ENV = "COSTBENCH_TEST_SECRET_KEY"


def _sglang_server_info(api_key: str, admin_api_key: str, hf_token: str, marker: str, unread: str) -> dict:
    """/server_info as SGLang serves it: the ServerArgs fields, then scheduler_info, internal_states, version."""
    return {
        "model_path": "deepseek-ai/DeepSeek-V3",
        "tokenizer_path": "deepseek-ai/DeepSeek-V3",
        "served_model_name": unread,
        "host": "0.0.0.0",
        "port": 30000,
        "api_key": api_key,
        "admin_api_key": admin_api_key,
        "tp_size": 8,
        "dp_size": 1,
        "schedule_policy": "lpm",
        "max_running_requests": 64,
        "max_total_tokens": None,
        "max_prefill_tokens": 16384,
        "chunked_prefill_size": 8192,
        "enable_cache_report": True,
        "enable_metrics": True,
        "ssl_keyfile": None,
        "ssl_keyfile_password": None,
        "scheduler_info": {"max_total_num_tokens": 400000, "max_req_input_len": 163835},
        "internal_states": [{"last_gen_throughput": 0.0, "memory_usage": {"kvcache": 0.5}}],
        "version": marker,
        # Not sent by SGLang today; a proxy or another build might: still kept off disk.
        "env": {"HF_TOKEN": hf_token, "SGLANG_ENABLE_JIT_DEEPGEMM": "1"},
        "launch_command": f"python -m sglang.launch_server --api-key {api_key} --tp 8",
        **_secrets_by_other_names(api_key, hf_token),
    }


def _secrets_by_other_names(api_key: str, hf_token: str) -> dict:
    """The shapes of issue item 7: secret names no `*_key`/`*_token` rule knew, and secrets with no name."""
    return {
        "auth": api_key,
        "api_key_value": api_key,
        "private_key_pem": f"-----BEGIN PRIVATE KEY-----\n{hf_token}\n-----END PRIVATE KEY-----",
        "client_cert_b64": hf_token,
        "note": api_key,  # a bare sk-... under a harmless name
        "extra_settings": [{"name": "HF_TOKEN", "value": hf_token}],
        "proxy": {"auth": api_key, "timeout_s": 30},  # an object nothing reads: dropped whole
    }


def test_no_secret_of_the_server_reaches_any_file_of_the_run(tmp_path, monkeypatch, caplog, capfd):
    api_key = "sk-" + secrets.token_hex(16)
    admin_api_key = "sk-admin-" + secrets.token_hex(16)
    hf_token = "hf_" + secrets.token_hex(16)
    marker = "0.5.4+" + secrets.token_hex(8)
    unread = "served-" + secrets.token_hex(8)
    leaked = (api_key, admin_api_key, hf_token, unread)
    # The client sends the same key the server was started with, only ever in a header.
    monkeypatch.setenv(KEY_ENV, api_key)
    caplog.set_level(logging.DEBUG)
    root = tmp_path / "warehouse"
    run_id = "20261116-secrets-0001"
    run_dir = root / "runs" / "week=2026-11-16" / "scenario=secrets" / run_id
    behaviour = PeerBehaviour(
        server_info=_sglang_server_info(api_key, admin_api_key, hf_token, marker, unread),
        # /model_info is kept whole (nothing is cut from it), so a bare secret there goes by its shape.
        model_info={
            "model_path": "deepseek-ai/DeepSeek-V3",
            "is_generation": True,
            "hf_token": hf_token,
            "note": api_key,
        },  # fmt: skip
    )
    with peer_in_thread(behaviour) as peer:
        spec = EndpointSpec(
            name="peer-attach", mode=EndpointMode.ATTACH, model="deepseek-ai/DeepSeek-V3", server_args=(),
            gpu_type="H200", gpu_count=8, usd_per_gpu_hour=3.5, url=peer.url, api_key_env=KEY_ENV,
            scrape_interval_s=0.1,
        )  # fmt: skip
        with provision(spec, run_dir) as endpoint, probing(endpoint, run_dir, run_id):
            config = ReplayConfig(url=endpoint.url, api_key_env=KEY_ENV, run_id=run_id)
            info = run_replay(make_workload([0.0, 0.05, 0.1, 0.15]), config, run_dir / "shard-0")
        assert info.requests_ok == 4
        assert all(h.get("Authorization") == f"Bearer {api_key}" for h in peer.headers)  # the key did travel

    merged = merge_shard_runs([run_dir / "shard-0"], run_dir)
    # The lake assets' path: run.json and the probe files into the lake, then a refresh and a report.
    lake = root / "lake"
    write_partition(lake, "runs", MONDAY, "secrets", build_run_row(read_run_json(run_dir), spec, "secrets", MONDAY))
    write_partition(lake, "requests", MONDAY, "secrets", read_requests(run_dir))
    write_partition(
        lake,
        "server_samples",
        MONDAY,
        "secrets",
        pq.read_table(run_dir / SERVER_SAMPLES_FILE, schema=SERVER_SAMPLE_SCHEMA),
    )
    write_partition(
        lake, "gpu_samples", MONDAY, "secrets", pq.read_table(run_dir / GPU_SAMPLES_FILE, schema=GPU_SAMPLE_SCHEMA)
    )
    store = Warehouse(root)
    store.refresh()
    write_weekly_report(store, MONDAY)

    files = sorted(p for p in root.rglob("*") if p.is_file())
    names = {p.name for p in files}
    assert {"run.json", "server_facts.json", "requests.parquet", "server_samples.parquet", "probes.json",
            "costbench.duckdb"} <= names  # fmt: skip
    for path in files:
        raw = path.read_bytes()
        seen = decoded_text(path)
        for secret in leaked:
            assert secret.encode() not in raw, f"{secret[:6]}… in {path}"
            assert secret not in seen, f"{secret[:6]}… in {path} (decoded)"
    logs = caplog.text + "".join(capfd.readouterr())
    for secret in leaked:
        assert secret not in logs

    # The search sees stored server facts: the ones costbench reads are all there, the rest is not.
    facts = orjson.loads((run_dir / "server_facts.json").read_bytes())
    kept = {"model_path": "deepseek-ai/DeepSeek-V3", "tp_size": 8, "dp_size": 1, "schedule_policy": "lpm",
            "max_running_requests": 64, "max_prefill_tokens": 16384, "chunked_prefill_size": 8192,
            "enable_cache_report": True, "version": marker, "internal_states": [{}]}  # fmt: skip
    for info in (facts["server_info"], merged.server_info, read_run_json(run_dir / "shard-0").server_info):
        assert info == kept
    assert facts["version"] == marker and facts["model_info"]["hf_token"] == facts["model_info"]["note"] == "<redacted>"
    assert marker.encode() in (run_dir / "shard-0" / "run.json").read_bytes()
    assert marker in decoded_text(next(p for p in files if p.suffix == ".duckdb"))
    runs_part = next(p for p in files if "runs" in p.parts and p.suffix == ".parquet" and "_schema" not in p.parts)
    assert marker in decoded_text(runs_part)
    with store.connect() as con:
        stored = orjson.loads(con.execute("SELECT server_info_json FROM runs").fetchone()[0])
    assert stored == kept


def test_the_replay_alone_redacts_what_it_fetches(tmp_path):
    """Without provisioning (the `costbench replay` CLI): run.json carries the redacted answer."""
    api_key = "sk-" + secrets.token_hex(16)
    with peer_in_thread(
        PeerBehaviour(server_info={"tp_size": 8, "api_key": api_key, "max_running_requests": 8})
    ) as peer:
        run_replay(make_workload([0.0]), ReplayConfig(url=peer.url, run_id="cli"), tmp_path)
    raw = (tmp_path / "run.json").read_bytes()
    assert api_key.encode() not in raw
    info = read_run_json(tmp_path).server_info
    assert info == {"tp_size": 8, "max_running_requests": 8}  # api_key: read by nothing, so not kept
