"""The command lines of a fleet costbench starts (sim, launch): N SGLang workers and SGLang's router (smg) in
front of them, as a user would type them.

Each worker is the endpoint's one server (`python -m sglang.launch_server ...`, or the twin) on a loopback port
of its own; on a launch host, worker i gets the GPUs from `--base-gpu-id i x gpus_per_worker` on (SGLang's
flag), so two 4-GPU replicas share one 8-GPU host. The router is

    smg launch --worker-urls URL_1 ... URL_N --host H --port P --prometheus-host H --prometheus-port M \\
        --policy POLICY [router.args]

(smg 1.13.0; `--prometheus-port` is where its own Prometheus metrics are served, default 29000, which two
fleets on one host would share, so costbench always gives a free one).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from endpoints.spec import EndpointMode, EndpointSpec, FleetSpec

SMG = "smg"
_BASE_GPU_FLAG = "--base-gpu-id"


def smg_program() -> str | None:
    """smg beside this interpreter (the project's virtual environment), else on PATH; None when neither."""
    beside = Path(sys.executable).parent / SMG
    return str(beside) if beside.is_file() else shutil.which(SMG)


def worker_extra_args(spec: EndpointSpec, fleet: FleetSpec, index: int) -> list[str]:
    """Flags worker `index` gets after the endpoint's own: its share of a launch host's GPUs."""
    if spec.mode is not EndpointMode.LAUNCH or any(a.split("=", 1)[0] == _BASE_GPU_FLAG for a in spec.server_args):
        return []  # the twin has no GPUs to share; a base GPU the user set is theirs to place
    return [_BASE_GPU_FLAG, str(index * fleet.groups[0].gpus_per_worker)]


def router_command(
    smg: str, fleet: FleetSpec, worker_urls: list[str], host: str, port: int, metrics_port: int
) -> list[str]:
    """`smg launch` in front of `worker_urls`, serving on host:port and its Prometheus metrics on host:metrics_port."""
    return [
        smg, "launch",
        "--worker-urls", *worker_urls,
        "--host", host,
        "--port", str(port),
        "--prometheus-host", host,
        "--prometheus-port", str(metrics_port),
        *fleet.router.launch_args(),
    ]  # fmt: skip
