"""The /server_info allow list (common/server_info_fields.py): exactly the fields the code reads, and the
readers see the same facts after the cut, for an SGLang-like answer and for the twin's own."""

from __future__ import annotations

import ast
import json
import urllib.request
from pathlib import Path

import pytest

from common.server_info_fields import READ_FIELDS, keep_read_fields
from endpoints.fingerprint import COST_FIELDS, COST_FIELDS_AWAY_FROM_DEFAULT, config_fingerprint
from endpoints.running_cap import max_running_requests
from replay.recording.run_json import read_run_json
from replay.runner import SIM_MARKER_KEY, ReplayConfig, run_replay
from replay_sglang_peer import make_workload
from twin_process import running_sim

REPO = Path(__file__).resolve().parents[2]
# Where stored server facts are read; the twin (endpoints/sim) writes /server_info and reads none of it.
READER_PACKAGES = ("endpoints", "replay", "warehouse", "assets", "pipelines")
CAP_READER = REPO / "endpoints" / "running_cap.py"  # reads internal_states entries under other names


def _mentions_server_info(node: ast.AST) -> bool:
    return any(
        (isinstance(n, ast.Name) and n.id == "server_info")
        or (isinstance(n, ast.Attribute) and n.attr == "server_info")
        for n in ast.walk(node)
    )


def _literal(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _keys_read(tree: ast.AST, receiver_ok) -> set[str]:
    """String keys read by `x.get("k")`, `x["k"]` and `"k" in x`, where receiver_ok(x)."""
    keys = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            if node.args and receiver_ok(node.func.value):
                keys.add(_literal(node.args[0]))
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and receiver_ok(node.value):
            keys.add(_literal(node.slice))
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            if receiver_ok(node.comparators[0]):
                keys.add(_literal(node.left))
    return keys - {None}


def _fields_the_code_reads() -> set[str]:
    read = set(COST_FIELDS) | set(COST_FIELDS_AWAY_FROM_DEFAULT) | {SIM_MARKER_KEY}  # looked up by loops and a constant
    for package in READER_PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if "sim" in path.relative_to(REPO).parts:
                continue
            read |= _keys_read(ast.parse(path.read_text()), _mentions_server_info)
    return read | _keys_read(ast.parse(CAP_READER.read_text()), lambda node: True)


def test_every_field_read_is_on_the_list_and_nothing_else():
    read = _fields_the_code_reads()
    assert not read - READ_FIELDS, f"read but dropped before storing: {sorted(read - READ_FIELDS)}"
    assert not READ_FIELDS - read, f"kept but read by nothing: {sorted(READ_FIELDS - read)}"


def _what_readers_see(info: dict) -> dict:
    return {
        "fingerprint": config_fingerprint(info, "fallback-model").facts,
        "cap": max_running_requests(info),
        "backend": info.get("backend"),  # warehouse/marts/run_rows.py
        "version": info.get("version"),
        "cache_report": info.get("enable_cache_report") is True,  # replay/runner.py
        "twin": SIM_MARKER_KEY in info,
    }


SGLANG_LIKE = {
    "model_path": "deepseek-ai/DeepSeek-V3", "served_model_name": "v3", "tp_size": 8, "dp_size": 2,
    "enable_dp_attention": True, "max_running_requests": 64, "schedule_policy": "lpm", "kv_cache_dtype": "fp8_e4m3",
    "speculative_algorithm": "EAGLE", "speculative_num_steps": 3, "enable_cache_report": True, "version": "0.5.4",
    "auth": "x", "log_level": "info", "env": {"A": "1"},
    "scheduler_info": {"max_total_num_tokens": 400000, "max_running_requests": 64},
    "internal_states": [{"effective_max_running_requests_per_dp": 30, "last_gen_throughput": 1.0},
                        {"effective_max_running_requests_per_dp": 31, "memory_usage": {"kv": 0.5}}],
}  # fmt: skip
# Newer SGLang groups ServerArgs into namespaces (endpoints/fingerprint.py reads one level down).
NAMESPACED = {
    "model_path": "m", "version": "0.6.0", "parallelism": {"tp_size": 4, "ep_size": 4, "nnodes": 1},
    "cache": {"chunked_prefill_size": 4096, "disable_radix_cache": True, "hicache_storage_backend_extra_config": "x"},
    "scheduler_info": {"max_running_requests": 128},
}  # fmt: skip


@pytest.mark.parametrize("info", [SGLANG_LIKE, NAMESPACED], ids=["sglang", "namespaced"])
def test_the_readers_see_the_same_facts_after_the_cut(info):
    kept = keep_read_fields(info)
    assert _what_readers_see(kept) == _what_readers_see(info)
    assert kept != info and keep_read_fields(kept) == kept  # something was cut; a second cut cuts nothing


def test_unread_fields_are_dropped_at_every_level():
    kept = keep_read_fields(SGLANG_LIKE)
    assert {"served_model_name", "auth", "log_level", "env"}.isdisjoint(kept)
    assert kept["scheduler_info"] == {"max_running_requests": 64}
    assert kept["internal_states"] == [
        {"effective_max_running_requests_per_dp": 30},
        {"effective_max_running_requests_per_dp": 31},
    ]
    assert keep_read_fields(NAMESPACED)["cache"] == {"chunked_prefill_size": 4096, "disable_radix_cache": True}


@pytest.mark.timeout(60)
def test_the_twins_server_info_round_trips_through_run_json(tmp_path):
    """The twin's /server_info, as a replay stores it, still says what every reader needs (it is the twin,
    its cap, its fingerprint), and keeps none of the twin's other fields."""
    with running_sim("--max-running-requests", "24") as (url, _):
        with urllib.request.urlopen(f"{url}/server_info", timeout=30) as response:
            live = json.loads(response.read())
        run_replay(make_workload([0.0]), ReplayConfig(url=url, request_timeout_s=30), tmp_path)
    stored = read_run_json(tmp_path).server_info
    seen = _what_readers_see(stored)
    assert seen == _what_readers_see(live)
    assert seen["backend"] == "sim" and seen["twin"] and seen["cap"] == 24
    assert set(stored) <= READ_FIELDS and "twin_fitted_sglang_version" in live
