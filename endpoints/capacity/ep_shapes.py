"""The wide expert-parallel decode worker a fleet plan tries beside the endpoint's own kind (fleet_plan.py): one
decode server over W GPUs with DP attention and DeepEP, as SGLang's large deployments run their decode side
(`--tp W --dp W --enable-dp-attention --moe-a2a-backend deepep --deepep-mode low_latency --enable-eplb
--enable-two-batch-overlap`, over as many hosts as W GPUs take). Everything else is the endpoint's flags.
"""

from __future__ import annotations

import math

from endpoints.clock import VirtualClock
from endpoints.sim.cost.profiles import HARDWARE_PROFILES, HardwareName
from endpoints.sim.engine_builder import build_engine
from endpoints.sim.server_args import parse_server_args

# The flags a wide decode worker sets itself, with whether each takes a value (the endpoint's own are dropped).
_REPLACED = {
    "--tp": True, "--tp-size": True, "--tensor-parallel-size": True, "--dp": True, "--dp-size": True,
    "--data-parallel-size": True, "--enable-dp-attention": False, "--ep": True, "--ep-size": True,
    "--expert-parallel-size": True, "--moe-a2a-backend": True, "--deepep-mode": True, "--enable-eplb": False,
    "--ep-num-redundant-experts": True, "--enable-two-batch-overlap": False, "--nnodes": True, "--node-rank": True,
    "--dist-init-addr": True, "--disaggregation-mode": True,
}  # fmt: skip
PREFERRED_REDUNDANT_EXPERTS = 32  # SGLang's large-EP deployments' choice, where it splits evenly
DIST_INIT_ADDR = "127.0.0.1:5000"  # where a multi-host twin's hosts would meet: never dialled, a model


def _without_replaced(flags: tuple[str, ...]) -> list[str]:
    out, skip = [], False
    for flag in flags:
        if skip:
            skip = False
            continue
        name = flag.split("=", 1)[0]
        if name in _REPLACED:
            skip = _REPLACED[name] and "=" not in flag
            continue
        out.append(flag)
    return out


def redundant_experts(ep_size: int, routed_experts: int = 256) -> int:
    """Copies of hot experts EPLB keeps: 32 where 256 + 32 splits evenly over the GPUs, else the fewest that do."""
    if (routed_experts + PREFERRED_REDUNDANT_EXPERTS) % ep_size == 0:
        return PREFERRED_REDUNDANT_EXPERTS
    return (-routed_experts) % ep_size


def wide_ep_decode_flags(flags: tuple[str, ...], ep_size: int) -> tuple[str, ...]:
    """A decode worker over `ep_size` GPUs of the endpoint's kind. Raises ValueError (the twin's refusal, naming the
    flag) when the twin cannot run it: weights that do not fit, a width the expert count cannot split over."""
    base = _without_replaced(flags)
    hardware = parse_server_args(base).sim_hardware
    nodes = math.ceil(ep_size / HARDWARE_PROFILES[HardwareName(hardware)].gpus_per_node)
    wide = (
        *base, "--tp", str(ep_size), "--dp", str(ep_size), "--enable-dp-attention", "--moe-a2a-backend", "deepep",
        "--deepep-mode", "low_latency", "--enable-eplb", "--ep-num-redundant-experts", str(redundant_experts(ep_size)),
        "--enable-two-batch-overlap", "--nnodes", str(nodes), "--dist-init-addr", DIST_INIT_ADDR,
        "--disaggregation-mode", "decode",
    )  # fmt: skip
    build_engine(parse_server_args(list(wide)), VirtualClock())  # the twin's own checks, KV sizing included
    return wide
