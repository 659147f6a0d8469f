"""The /server_info fields costbench reads; every other field is dropped before anything stores it.

An allow list, not a deny list: a field no code reads is not kept at all, so a secret under a name no
rule knows (a router's `auth`, a `*_b64` blob, a build's own settings) never reaches run.json,
server_facts.json or the `runs` table. What is kept is still redacted (common/secret_redaction.py).
It lives in `common` because both places that fetch /server_info cut it here, and neither may import
the other: replay/clients/server_info_fetch.py and endpoints/probes/server_facts.py.
tests/common/test_common_server_info_fields.py checks that the list is exactly what the code reads.
"""

from __future__ import annotations

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
