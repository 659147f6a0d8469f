"""A real endpoint's capacity at the SLO, modelled: the shadow twin's capacity sweep, scaled by how fast the real
endpoint served the run against the twin.

A real endpoint (attach, launch) gets no twin sweep of its own (slo_capacity.measure_capacity measures only a
twin). Its shadow canary (shadow_canary.py) is the twin with the endpoint's flags and GPU; this sweeps that twin on
the run's window, as a twin endpoint's run is swept, and multiplies the capacity by the run's real / twin sustained
output tokens/s (1 / the canary's output_tokens_per_s_ratio, which is twin / real): a server that streamed half the
twin's tokens a second is taken to hold half its rate inside the SLO. One ratio for the whole curve is the model's
assumption (source shadow_twin, modelled); the opt-in rate ramp (replay/capacity_ramp.py, source rate_ramp)
measures instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from endpoints.capacity.shadow_canary import ShadowCanary, ShadowNotModelled, shadow_twin_spec
from endpoints.capacity.slo_capacity import SloCapacity, measure_capacity
from endpoints.spec import EndpointMode, EndpointSpec
from workloads.workload import Workload

SHADOW_TWIN_SOURCE = "shadow_twin"


def shadow_twin_capacity(
    spec: EndpointSpec,
    window: Workload,
    slo: tuple[float, float],
    cache_dir: Path | None,
    server_info: Mapping[str, Any] | None = None,
) -> SloCapacity | None:
    """The sweep of the shadow twin of real endpoint `spec` on `window` (cached as any sweep; its flags from the
    server's `server_info` where the entry names none); None for a twin endpoint, one the twin cannot model, or a
    window the sweep cannot use."""
    if spec.mode is EndpointMode.SIM:
        return None
    try:
        twin = shadow_twin_spec(spec, server_info)
    except ShadowNotModelled:
        return None
    return measure_capacity(twin, window, *slo, cache_dir)


def scaled_to_real(twin: SloCapacity, canary: ShadowCanary) -> SloCapacity | None:
    """The twin's capacity x real / twin output tokens/s of one run (its shadow canary), labelled shadow_twin; the
    probes' rates are scaled alike, so the capacity probe (and its running batch) stays the twin's. None without a
    ratio (the canary could not model the endpoint, or the run served nothing)."""
    ratio = canary.output_tokens_per_s_ratio  # twin / real
    if not ratio or twin.capacity_rps_at_slo is None:
        return None
    real_over_twin = 1.0 / ratio
    return replace(
        twin,
        capacity_rps_at_slo=twin.capacity_rps_at_slo * real_over_twin,
        probes=tuple(replace(p, rate_rps=p.rate_rps * real_over_twin) for p in twin.probes),
        source=SHADOW_TWIN_SOURCE,
    )
