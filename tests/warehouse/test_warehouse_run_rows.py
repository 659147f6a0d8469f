"""The `runs` lake row: the facts of a replay, and no secret anywhere in what is stored."""

from __future__ import annotations

import json
from datetime import date

import pytest

from endpoints.spec import EndpointMode, EndpointRevision
from warehouse.marts.run_rows import REDACTED, RUNS_SCHEMA, build_run_row
from warehouse.parquet.lake import LakeError, write_partition
from warehouse_builders import endpoint, run_info

MONDAY = date(2025, 3, 3)


def test_run_row_carries_the_run_endpoint_and_server_facts():
    spec = endpoint(server_args=("--tp", "8", "--schedule-policy", "lpm"), api_key_env="SGLANG_API_KEY")
    row = build_run_row(run_info("run-1", 90.0), spec, "chat-v3-h200", MONDAY).to_pylist()
    assert len(row) == 1
    row = row[0]
    assert row["run_id"] == "run-1" and row["scenario"] == "chat-v3-h200" and row["week_start"] == MONDAY
    assert (row["endpoint"], row["mode"], row["backend"]) == ("v3-8xh200", "sim", "sim")
    assert (row["gpu_type"], row["gpu_count"], row["usd_per_gpu_hour"]) == ("H200", 8, 2.0)
    assert row["sglang_version"] == "0.5.4"
    assert json.loads(row["server_args_json"]) == ["--tp", "8", "--schedule-policy", "lpm"]
    assert row["api_key_env"] == "SGLANG_API_KEY"
    assert (row["window_s"], row["t0_wall_s"], row["schedule_lag_p99_ms"]) == (90.0, 1_741_000_000.0, 2.5)
    assert (row["requests_total"], row["requests_ok"], row["client_degraded"], row["partial"]) == (6, 5, False, False)
    # No revision in force, and the fleet held around the clock unless the endpoint says otherwise.
    assert (row["revision_note"], row["hours_per_week"]) == (None, 168.0)
    office_hours = build_run_row(run_info("run-1", 90.0), endpoint(hours_per_week=40.0), "c", MONDAY)
    assert office_hours.column("hours_per_week").to_pylist() == [40.0]


def test_backend_is_sglang_for_a_real_server_and_sim_when_server_info_says_so():
    attach = endpoint(mode=EndpointMode.ATTACH, url="http://10.0.0.5:30000")
    real = run_info("r", 90.0, server_info={"version": "0.5.4"})
    twin = run_info("r", 90.0, server_info={"version": "0.5.4", "backend": "sim"})
    assert build_run_row(real, attach, "a", MONDAY).column("backend").to_pylist() == ["sglang"]
    assert build_run_row(twin, attach, "a", MONDAY).column("backend").to_pylist() == ["sim"]


def test_no_secret_reaches_the_lake(tmp_path, monkeypatch):
    monkeypatch.setenv("COSTBENCH_TEST_KEY", "sk-from-the-environment")
    spec = endpoint(
        mode=EndpointMode.ATTACH,
        url="http://10.0.0.5:30000",
        api_key_env="COSTBENCH_TEST_KEY",
        server_args=(
            "--tp",
            "8",
            "--api-key",
            "sk-flag-value",
            "--hf-token=hf-flag-value",
            "--max-prefill-tokens",
            "16384",
        ),
        # Free text someone typed: a note may quote what it should not.
        revision=EndpointRevision(MONDAY, ("--tp", "8"), "rotated the key: HF_TOKEN=hf-in-note while debugging a leak"),
    )
    info = run_info(
        "run-1",
        90.0,
        url="http://alice:pw-in-url@10.0.0.5:30000/v1?api_key=sk-in-query&x=1",
        server_info={
            "version": "0.5.4",
            "api_key": "sk-server-info",
            "nested": {"admin_api_key": "sk-nested"},
            "max_total_num_tokens": 123456,
            "tokenizer_path": "deepseek-ai/DeepSeek-V3",
        },
    )
    path = write_partition(tmp_path, "runs", MONDAY, "a", build_run_row(info, spec, "a", MONDAY))
    stored = path.read_bytes()
    for secret in (
        "sk-from-the-environment",
        "sk-flag-value",
        "hf-flag-value",
        "pw-in-url",
        "sk-in-query",
        "sk-server-info",
        "sk-nested",
        "hf-in-note",
    ):
        assert secret.encode() not in stored, secret
    row = build_run_row(info, spec, "a", MONDAY).to_pylist()[0]
    assert row["api_key_env"] == "COSTBENCH_TEST_KEY"
    assert json.loads(row["server_args_json"]) == [
        "--tp",
        "8",
        "--api-key",
        REDACTED,
        f"--hf-token={REDACTED}",
        "--max-prefill-tokens",
        "16384",
    ]
    server_info = json.loads(row["server_info_json"])
    # Redaction keeps the facts that only look like secrets by substring.
    assert server_info["max_total_num_tokens"] == 123456
    assert server_info["tokenizer_path"] == "deepseek-ai/DeepSeek-V3"
    assert server_info["api_key"] == REDACTED and server_info["nested"]["admin_api_key"] == REDACTED
    assert row["url"].startswith("http://10.0.0.5:30000/v1?")
    assert row["revision_note"] == f"rotated the key: {REDACTED} while debugging a leak"  # the rest of it kept


def test_run_row_matches_the_schema_and_refuses_bad_partition_keys():
    table = build_run_row(run_info("run-1", None, duration_s=None), endpoint(), "a", MONDAY)
    assert table.schema == RUNS_SCHEMA
    assert table.column("window_s").to_pylist() == [None]
    with pytest.raises(LakeError, match="scenario name"):
        build_run_row(run_info("run-1", 90.0), endpoint(), "a/b", MONDAY)
    with pytest.raises(LakeError, match="Monday"):
        build_run_row(run_info("run-1", 90.0), endpoint(), "a", date(2025, 3, 5))


def test_run_row_carries_the_v2_facts_the_marts_need():
    from warehouse.marts.run_rows import RunContext

    info = run_info(
        "run-1",
        90.0,
        warmup_s=5.0,
        max_concurrency=64,
        shard_index=1,
        shard_count=2,
        arrival_process="poisson",
        server_info={"version": "0.5.4", "tp_size": 8, "max_running_requests": 128, "api_key": "sk-x"},
    )
    context = RunContext(
        slo_ttft_ms=2000.0, slo_tpot_ms=100.0, target_rps=12.5, budget_usd_per_request=0.01, prefix_reuse_share=0.42
    )
    row = build_run_row(info, endpoint(), "a", MONDAY, context).to_pylist()[0]
    assert (row["warmup_s"], row["max_concurrency"], row["shard_index"], row["shard_count"]) == (5.0, 64, 1, 2)
    assert row["arrival_process"] == "poisson" and row["max_running_requests"] == 128
    assert (row["slo_ttft_ms"], row["slo_tpot_ms"], row["target_rps"]) == (2000.0, 100.0, 12.5)
    assert (row["budget_usd_per_request"], row["prefix_reuse_share"]) == (0.01, 0.42)
    facts = json.loads(row["config_facts_json"])
    assert facts["tp_size"] == 8 and facts["model"] == "deepseek-ai/DeepSeek-V3"
    assert len(row["config_fingerprint"]) == 12
    other = build_run_row(
        run_info("run-2", 90.0, server_info={"version": "0.5.4", "tp_size": 4}), endpoint(), "a", MONDAY
    )
    assert other.column("config_fingerprint").to_pylist()[0] != row["config_fingerprint"]
    assert other.column("max_running_requests").to_pylist() == [None]  # SGLang derived it: unknown here
    # The replay's own digest, when it computed one, is kept.
    kept = build_run_row(run_info("run-3", 90.0, config_fingerprint="abcdef012345"), endpoint(), "a", MONDAY)
    assert kept.column("config_fingerprint").to_pylist() == ["abcdef012345"]
