"""The shadow canary: beside every replay against a real endpoint (attach or launch), the same window replayed on
the twin configured with the same SGLang flags, on a virtual clock, and the twin / real ratio of what the run
measured: sustained output tokens/s, median TTFT and median TPOT, each as run_summary defines it. The measured
error of the twin on this week's own traffic and server, where the calibration tables (published/
calibration_tables.py) have only the published points.

This module holds what the twin needs to stand in (shadow_twin_spec: the endpoint's flags with `--sim-hardware`
from its gpu_type where the twin has that GPU's profile, on a virtual clock, the fleet's router modelled), the
record and its shadow_canary.json beside each run.json. The replay itself, the replay client on the twin, is
assets/shadow_replay.py's (endpoints do not import the replayer). An endpoint the twin cannot model (a model or
flag it refuses, an unmodelled router policy, workers behind no router) gets a shadow_canary.json saying why, and
no ratios.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from common.atomic_file import write_bytes_atomically
from common.run_folder import SHADOW_CANARY_FILE
from endpoints.clock import VirtualClock
from endpoints.provision import server_flags
from endpoints.router.policy_params import UnmodelledRouting, parse_router_spec
from endpoints.sim.cost.profiles import HardwareName, UnknownProfileError, model_profile_for
from endpoints.sim.engine.kv_pool import KvSizingError
from endpoints.sim.engine_builder import build_engine
from endpoints.sim.server_args import ServerArgsError, parse_server_args
from endpoints.spec import EndpointClock, EndpointMode, EndpointSpec

# As the bundled virtual-clock endpoints: a /metrics scrape every 10 virtual seconds (the shadow's own server samples
# are kept for whoever looks; nothing reads them).
SCRAPE_INTERVAL_S = 10.0


class ShadowNotModelled(ValueError):
    """The twin cannot stand in for this endpoint; the message says why."""


@dataclass(frozen=True, slots=True)
class ServedFigures:
    """What one run measured, as run_summary defines it (completed requests of the measured window)."""

    completed_requests: int  # status ok, not warm-up (count)
    output_tokens_per_s: float | None  # run_summary.sustained_output_tokens_per_s (tokens/s)
    p50_ttft_ms: float | None  # run_summary.p50_ttft_ms (ms)
    p50_tpot_ms: float | None  # run_summary.p50_tpot_ms (ms per token)


@dataclass(frozen=True, slots=True)
class ShadowCanary:
    run_id: str  # the real run it shadows
    shadow_run_id: str  # the twin's replay (assets/shadow_replay.py: its folder in the week's first run)
    twin_flags: tuple[str, ...]  # the twin's server_args (the endpoint's, plus --sim-hardware)
    real: ServedFigures | None  # None: not modelled
    twin: ServedFigures | None
    output_tokens_per_s_ratio: float | None  # twin / real
    p50_ttft_ratio: float | None  # twin / real
    p50_tpot_ratio: float | None  # twin / real
    not_modelled: str | None  # why the twin could not stand in (None: it did)
    cpu_s: float  # process CPU time of the twin's replay (s)


# The /server_info fields a shadow twin takes as flags when the endpoint's entry names none (an attached server):
# SGLang's ServerArgs field names, each the flag `--<name with dashes>`; what is absent, null, false or "auto" is
# left at the twin's default, which is SGLang's.
SERVER_INFO_FLAGS = (
    "tp_size", "dp_size", "pp_size", "ep_size", "enable_dp_attention", "moe_a2a_backend", "deepep_mode",
    "enable_eplb", "ep_num_redundant_experts", "enable_two_batch_overlap", "nnodes", "disaggregation_mode",
    "disable_radix_cache", "enable_hierarchical_cache", "schedule_policy", "chunked_prefill_size",
    "max_running_requests", "max_prefill_tokens", "mem_fraction_static", "speculative_algorithm",
    "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens", "quantization",
    "kv_cache_dtype",
)  # fmt: skip


def _launch_value(server_info: Mapping[str, Any], name: str) -> Any:
    """The flag's value as launched. Under DP attention SGLang reports chunked_prefill_size as one rank's share
    (arg_groups/parallel_hook.py divides it by the ranks), and the twin divides the flag again as SGLang does."""
    value = server_info.get(name)
    dp = server_info.get("dp_size")
    if name == "chunked_prefill_size" and server_info.get("enable_dp_attention") is True and isinstance(dp, int):
        if isinstance(value, int) and value > 0 and dp > 1:
            return value * dp
    return value


def server_info_flags(server_info: Mapping[str, Any]) -> tuple[str, ...]:
    """The launch flags a server's /server_info says it runs with (SERVER_INFO_FLAGS), e.g. tp_size 8 gives
    `--tp-size 8` and disable_radix_cache true gives `--disable-radix-cache`."""
    flags: list[str] = []
    for name in SERVER_INFO_FLAGS:
        value = _launch_value(server_info, name)
        if value is None or value is False or value in ("auto", "null", ""):
            continue
        flag = "--" + name.replace("_", "-")
        flags += [flag] if value is True else [flag, str(value)]
    return tuple(flags)


def shadow_twin_spec(spec: EndpointSpec, server_info: Mapping[str, Any] | None = None) -> EndpointSpec:
    """The twin on a virtual clock with the endpoint's flags, GPUs and fleet; raises ShadowNotModelled. An entry
    with no server_args (an attached server, as docs/endpoints.md's example) takes them from the server's own
    `server_info` (what its run stored) where one is given."""
    if spec.fleet is None and len(spec.worker_urls) > 1:
        raise ShadowNotModelled(
            f"{len(spec.worker_urls)} workers behind a router with no router block: the twin cannot tell how they "
            "share the traffic (add router: {policy: ...} to the endpoint)"
        )
    args = list(spec.server_args or (server_info_flags(server_info) if server_info else ()))
    if "--sim-hardware" not in args and spec.gpu_type.lower() in {h.value for h in HardwareName}:
        args += ["--sim-hardware", spec.gpu_type.lower()]  # else the twin's default GPU, as its flags say
    twin = replace(
        spec,
        name=f"{spec.name}-shadow",
        mode=EndpointMode.SIM,
        clock=EndpointClock.VIRTUAL,
        server_args=tuple(args),
        url=None,
        api_key_env=None,
        command=None,
        worker_urls=(),
        env=(),
        dcgm_url=None,
        router_metrics_url=None,
        advertise_url=None,
        host="127.0.0.1",
        port=None,
        revisions=(),
        scrape_interval_s=SCRAPE_INTERVAL_S,
    )
    try:
        model_profile_for(spec.model)
        build_engine(parse_server_args(server_flags(twin, 0)), VirtualClock())  # the weights must fit, say
        if twin.fleet is not None:
            parse_router_spec(twin.fleet.router)
    except (ServerArgsError, UnknownProfileError, UnmodelledRouting, KvSizingError) as exc:
        raise ShadowNotModelled(str(exc)) from None
    return twin


def not_modelled(run_id: str, shadow_run_id: str, flags: tuple[str, ...], why: str) -> ShadowCanary:
    return ShadowCanary(run_id, shadow_run_id, flags, None, None, None, None, None, why, 0.0)


def _ratio(twin: float | None, real: float | None) -> float | None:
    return twin / real if twin is not None and real else None


def compare(run_id: str, shadow_run_id: str, flags: tuple[str, ...], real: ServedFigures, twin: ServedFigures,
            cpu_s: float) -> ShadowCanary:  # fmt: skip
    """The shadow canary of one real run: the twin's figures over the run's."""
    return ShadowCanary(
        run_id=run_id,
        shadow_run_id=shadow_run_id,
        twin_flags=flags,
        real=real,
        twin=twin,
        output_tokens_per_s_ratio=_ratio(twin.output_tokens_per_s, real.output_tokens_per_s),
        p50_ttft_ratio=_ratio(twin.p50_ttft_ms, real.p50_ttft_ms),
        p50_tpot_ratio=_ratio(twin.p50_tpot_ms, real.p50_tpot_ms),
        not_modelled=None,
        cpu_s=cpu_s,
    )


def write_shadow_canary_json(run_dir: Path, canary: ShadowCanary) -> Path:
    body = json.dumps(asdict(canary), indent=2).encode() + b"\n"
    return write_bytes_atomically(Path(run_dir) / SHADOW_CANARY_FILE, body)


def read_shadow_canary_json(run_dir: Path) -> ShadowCanary | None:
    """The shadow canary of a run, or None when none ran beside it (a twin endpoint, or recorded before them)."""
    path = Path(run_dir) / SHADOW_CANARY_FILE
    if not path.exists():
        return None
    try:
        raw = json.loads(path.read_bytes())
        figures = {k: None if raw[k] is None else ServedFigures(**raw[k]) for k in ("real", "twin")}
        return ShadowCanary(**{**raw, **figures, "twin_flags": tuple(raw["twin_flags"])})
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a costbench shadow_canary.json ({exc})") from None
