"""The config fingerprint moves when a cost flag moves, and only then."""

from __future__ import annotations

import pytest

from endpoints.fingerprint import config_fingerprint

BASE_INFO = {
    "model_path": "deepseek-ai/DeepSeek-R1", "version": "0.5.6", "host": "127.0.0.1", "port": 30000,
    "log_level": "info", "tp_size": 8, "dp_size": 1, "ep_size": 1, "enable_dp_attention": False,
    "disable_radix_cache": False, "schedule_policy": "fcfs", "chunked_prefill_size": 8192,
    "max_running_requests": None, "speculative_algorithm": None, "quantization": None,
    "kv_cache_dtype": "auto", "served_model_name": "deepseek-ai/DeepSeek-R1", "random_seed": 1,
}  # fmt: skip


def _digest(**changes) -> str:
    return config_fingerprint({**BASE_INFO, **changes}, "deepseek-ai/DeepSeek-R1").digest


@pytest.mark.parametrize(
    "change",
    [
        {"tp_size": 4},
        {"dp_size": 8},
        {"ep_size": 8},
        {"enable_eplb": True},
        {"ep_num_redundant_experts": 32},
        {"deepep_mode": "low_latency"},
        {"nnodes": 2},
        {"enable_dp_attention": True},
        {"disable_radix_cache": True},
        {"schedule_policy": "lpm"},
        {"chunked_prefill_size": 4096},
        {"max_running_requests": 256},
        {"speculative_algorithm": "EAGLE"},
        {"speculative_num_steps": 3},
        {"quantization": "fp8"},
        {"kv_cache_dtype": "fp8_e4m3"},
        {"version": "0.5.7"},
        {"model_path": "deepseek-ai/DeepSeek-V3"},
    ],
    ids=lambda change: next(iter(change)),
)
def test_a_cost_flag_changes_the_digest(change):
    assert _digest(**change) != _digest()


@pytest.mark.parametrize(
    "change",
    [
        {"port": 31234},
        {"host": "0.0.0.0"},
        {"log_level": "debug"},
        {"random_seed": 7},
        {"served_model_name": "r1"},
        {"api_key": "<redacted>"},
    ],  # fmt: skip
    ids=lambda change: next(iter(change)),
)
def test_an_irrelevant_flag_does_not(change):
    assert _digest(**change) == _digest()


def test_hardware_from_the_spec_is_part_of_the_configuration():
    info = dict(BASE_INFO)
    h200 = config_fingerprint(info, "m", "H200", 8)
    assert h200.digest != config_fingerprint(info, "m", "B200", 8).digest
    assert h200.digest != config_fingerprint(info, "m", "H200", 16).digest
    assert h200.facts["gpu_type"] == "H200"


def test_a_number_recorded_as_text_is_the_same_setting_and_nested_fields_are_found():
    assert _digest(ep_size="8") == _digest(ep_size=8)
    nested = {k: v for k, v in BASE_INFO.items() if k != "speculative_algorithm"}
    nested["spec"] = {"speculative_algorithm": "EAGLE"}
    assert config_fingerprint(nested, "m").facts["speculative_algorithm"] == "EAGLE"


def test_facts_json_is_stable():
    a = config_fingerprint(BASE_INFO, "m")
    b = config_fingerprint(dict(reversed(list(BASE_INFO.items()))), "m")
    assert a.facts_json() == b.facts_json() and a.digest == b.digest and len(a.digest) == 12


def test_the_expert_parallel_fields_added_later_leave_a_default_configurations_digest_as_it_was():
    # The digest BASE_INFO had before enable_eplb, ep_num_redundant_experts, deepep_mode and nnodes were read.
    assert _digest(enable_eplb=False, ep_num_redundant_experts=0, deepep_mode="auto", nnodes=1) == _digest()
    assert _digest() == "1c1979dc71e4"
