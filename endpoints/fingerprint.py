"""The configuration fingerprint of a run: model, version and the server flags that change cost.

Trends compare like with like by this hash, and a change of it marks the week a configuration changed.
The facts come from /server_info (every ServerArgs field, after SGLang resolved its defaults), so
launch, attach and sim agree, and a flag left at its default hashes the same as one spelt out.
Flags that do not change cost (host, port, log level, API key) are not part of it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import orjson

# ServerArgs field names (sglang python/sglang/srt/server_args.py) that change what a request costs.
COST_FIELDS = (
    # parallelism
    "tp_size",
    "dp_size",
    "ep_size",
    "pp_size",
    "enable_dp_attention",
    "moe_a2a_backend",  # DeepEP & co.: how EP moves tokens
    "enable_two_batch_overlap",
    "disaggregation_mode",  # null | prefill | decode
    # cache and scheduling
    "disable_radix_cache",
    "enable_hierarchical_cache",
    "schedule_policy",
    "chunked_prefill_size",
    "max_running_requests",
    "max_prefill_tokens",
    "mem_fraction_static",  # sizes the KV pool, so the batch that fits
    # speculative decoding
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    # numerics
    "quantization",
    "kv_cache_dtype",
    "dtype",
)
# More fields that change cost, added after fingerprints were first stored: each joins the facts only where the
# server sets it away from SGLang's default, so every configuration fingerprinted before keeps its digest.
COST_FIELDS_AWAY_FROM_DEFAULT = {
    "enable_eplb": False,
    "ep_num_redundant_experts": 0,
    "deepep_mode": "auto",
    "nnodes": 1,
}


@dataclass(frozen=True, slots=True)
class ConfigFingerprint:
    digest: str  # 12 hex digits of sha256 over `facts`
    facts: dict  # model, version and COST_FIELDS, as the server reported them (None when absent)

    def facts_json(self) -> str:
        return orjson.dumps(self.facts, option=orjson.OPT_SORT_KEYS).decode()


def _lookup(server_info: dict, name: str):
    if name in server_info:
        return server_info[name]
    # Newer SGLang groups ServerArgs into namespaces; accept one level of nesting.
    for value in server_info.values():
        if isinstance(value, dict) and name in value:
            return value[name]
    return None


def _normalised(value):
    """`"8"` and `8` are the same setting (a flag the twin only records keeps its string form)."""
    if isinstance(value, str):
        text = value.strip()
        for parse in (int, float):
            try:
                return parse(text)
            except ValueError:
                pass
        return text
    return value


def config_fingerprint(
    server_info: dict,
    model: str,
    gpu_type: str | None = None,
    gpu_count: int | None = None,
) -> ConfigFingerprint:
    """`gpu_type`/`gpu_count` (from the endpoint spec) join the facts when given: the same flags on
    other hardware are another configuration."""
    facts = {
        "model": server_info.get("model_path") or model,
        "version": server_info.get("version"),
        **{name: _normalised(_lookup(server_info, name)) for name in COST_FIELDS},
    }
    for name, default in COST_FIELDS_AWAY_FROM_DEFAULT.items():
        value = _normalised(_lookup(server_info, name))
        if value is not None and value != default:
            facts[name] = value
    if gpu_type is not None:
        facts["gpu_type"] = gpu_type.upper()
    if gpu_count is not None:
        facts["gpu_count"] = int(gpu_count)
    digest = hashlib.sha256(orjson.dumps(facts, option=orjson.OPT_SORT_KEYS)).hexdigest()[:12]
    return ConfigFingerprint(digest=digest, facts=facts)
