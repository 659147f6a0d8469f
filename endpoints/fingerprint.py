"""The configuration fingerprint of a run: model, version and the server flags that change cost.

Trends compare like with like by this hash, and a change of it marks the week a configuration changed.
The facts come from /server_info (every ServerArgs field), so launch, attach and sim agree.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import orjson

# ServerArgs field names (sglang server_args.py) that change what a request costs.
COST_FIELDS = (
    "tp_size",
    "dp_size",
    "ep_size",
    "enable_dp_attention",
    "disable_radix_cache",
    "schedule_policy",
    "chunked_prefill_size",
    "max_running_requests",
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_num_draft_tokens",
    "quantization",
    "kv_cache_dtype",
    "mem_fraction_static",
)


@dataclass(frozen=True, slots=True)
class ConfigFingerprint:
    digest: str  # 12 hex digits of sha256 over `facts`
    facts: dict  # model, version and COST_FIELDS, as the server reported them (None when absent)

    def facts_json(self) -> str:
        return orjson.dumps(self.facts, option=orjson.OPT_SORT_KEYS).decode()


def config_fingerprint(server_info: dict, model: str) -> ConfigFingerprint:
    facts = {
        "model": server_info.get("model_path") or model,
        "version": server_info.get("version"),
        **{name: server_info.get(name) for name in COST_FIELDS},
    }
    digest = hashlib.sha256(orjson.dumps(facts, option=orjson.OPT_SORT_KEYS)).hexdigest()[:12]
    return ConfigFingerprint(digest=digest, facts=facts)
