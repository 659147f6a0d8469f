"""The /server_info fields costbench reads; every other field is dropped before anything stores it.

An allow list, not a deny list: a field no code reads is not kept at all, so a secret under a name no
rule knows (a router's `auth`, a `*_b64` blob, a build's own settings) never reaches run.json,
server_facts.json or the `runs` table. What is kept is still redacted (redaction/secret_redaction.py).
It lives in `common` because both places that fetch /server_info cut it here, and neither may import
the other: replay/clients/server_info_fetch.py and endpoints/probes/server_facts.py.
tests/common/test_common_server_info_fields.py checks that the list is exactly what the code reads.

Both read the answers with `load_shallow_json`, which refuses JSON nested past MAX_JSON_DEPTH with a clear
error: redaction, the fingerprint and json.dumps all recurse, and a 100,000-deep answer gave a RecursionError.
"""

from __future__ import annotations

import orjson

# SGLang's /server_info and /model_info nest 4 levels at most; orjson itself stops at 1,024.
MAX_JSON_DEPTH = 32

READ_FIELDS = frozenset(
    {
        # endpoints/fingerprint.py: the model, the version and COST_FIELDS
        "model_path",
        "version",
        "tp_size",
        "dp_size",
        "ep_size",
        "pp_size",
        "enable_dp_attention",
        "moe_a2a_backend",
        "enable_two_batch_overlap",
        "disaggregation_mode",
        "disable_radix_cache",
        "enable_hierarchical_cache",
        "schedule_policy",
        "chunked_prefill_size",
        "max_running_requests",
        "max_prefill_tokens",
        "mem_fraction_static",
        "speculative_algorithm",
        "speculative_num_steps",
        "speculative_eagle_topk",
        "speculative_num_draft_tokens",
        "quantization",
        "kv_cache_dtype",
        "dtype",
        # endpoints/fingerprint.py's COST_FIELDS_AWAY_FROM_DEFAULT
        "enable_eplb",
        "ep_num_redundant_experts",
        "deepep_mode",
        "nnodes",
        # endpoints/running_cap.py (with max_running_requests, dp_size, enable_dp_attention above)
        "internal_states",
        "effective_max_running_requests_per_dp",  # inside each internal_states entry
        "scheduler_info",
        # replay/runner.py
        "enable_cache_report",
        "sim_hardware",  # only the twin has it
        # warehouse/marts/run_rows.py (with version above)
        "backend",
    }
)


def _only_read(obj: dict) -> dict:
    return {key: value for key, value in obj.items() if key in READ_FIELDS}


def keep_read_fields(server_info: dict) -> dict:
    """`server_info` with only the READ_FIELDS, at the top and one object down.

    One level down because the readers look there: scheduler_info.max_running_requests, each
    internal_states entry, and ServerArgs grouped into namespaces (endpoints/fingerprint.py). So an
    object under any name keeps its fields on the list and is dropped when none are."""
    out: dict = {}
    for key, value in server_info.items():
        if isinstance(value, dict):
            kept = _only_read(value)
            if kept:  # an empty object tells no reader anything
                out[key] = kept
        elif isinstance(value, list) and key in READ_FIELDS:
            # A list keeps its length: running_cap asks whether every DP rank reported its cap.
            out[key] = [_only_read(item) if isinstance(item, dict) else item for item in value]
        elif key in READ_FIELDS:
            out[key] = value
    return out


class JsonTooDeepError(ValueError):
    pass


def load_shallow_json(body: bytes, max_depth: int = MAX_JSON_DEPTH) -> object:
    """The JSON value of `body`. Raises ValueError when it is not JSON (orjson.JSONDecodeError) and
    JsonTooDeepError when arrays and objects nest more than `max_depth` levels."""
    too_deep = f"JSON nested deeper than {max_depth} levels (the bound on an endpoint's answer)"
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        if "depth limit" in str(exc):  # orjson's own limit, 1,024 levels
            raise JsonTooDeepError(too_deep) from None
        raise
    if _deeper_than(value, max_depth):
        raise JsonTooDeepError(too_deep)
    return value


def _deeper_than(value: object, max_depth: int) -> bool:
    """Whether arrays and objects nest more than `max_depth` levels; a loop, not a recursion."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, (dict, list)):
            continue
        children = item.values() if isinstance(item, dict) else item
        if depth > max_depth:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False
