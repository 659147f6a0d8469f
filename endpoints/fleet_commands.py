"""The command lines of a fleet costbench starts (sim, launch): N SGLang workers and SGLang's router (smg) in
front of them, as a user would type them.

Each worker is the endpoint's one server (`python -m sglang.launch_server ...`, or the twin) on a loopback port
of its own; on a launch host, worker i gets the GPUs from `--base-gpu-id i x gpus_per_worker` on (SGLang's
flag), so two 4-GPU replicas share one 8-GPU host. The router is

    smg launch --worker-urls URL_1 ... URL_N --host H --port P --prometheus-host H --prometheus-port M \\
        --policy POLICY [router.args]

(smg 1.13.0; `--prometheus-port` is where its own Prometheus metrics are served, default 29000, which two
fleets on one host would share, so costbench always gives a free one). A disaggregated fleet's workers add their
role's flags (`--disaggregation-mode prefill --disaggregation-bootstrap-port B`, `--disaggregation-mode decode`)
and the router runs in PD mode:

    smg launch --pd-disaggregation --prefill URL_1 B_1 ... --decode URL_D ... --host H --port P ...
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from endpoints.spec import EndpointMode, EndpointSpec, FleetSpec, WorkerGroup, WorkerRole

SMG = "smg"
_BASE_GPU_FLAG = "--base-gpu-id"


def smg_program() -> str | None:
    """smg beside this interpreter (the project's virtual environment), else on PATH; None when neither."""
    beside = Path(sys.executable).parent / SMG
    return str(beside) if beside.is_file() else shutil.which(SMG)


@dataclass(frozen=True, slots=True)
class FleetWorker:
    """One worker of a fleet: its role's group and where its share of a launch host's GPUs starts."""

    group: WorkerGroup
    index: int  # across the whole fleet, prefill workers first
    base_gpu: int


def fleet_workers(fleet: FleetSpec) -> list[FleetWorker]:
    workers: list[FleetWorker] = []
    base = 0
    for group in fleet.groups:
        for _ in range(group.count):
            workers.append(FleetWorker(group, len(workers), base))
            base += group.gpus_per_worker
    return workers


def worker_extra_args(spec: EndpointSpec, worker: FleetWorker, bootstrap_port: int | None = None) -> list[str]:
    """Flags a worker gets after the endpoint's own: its role's, and its share of a launch host's GPUs.
    `bootstrap_port`: a prefill worker's, where its decode workers meet it."""
    group = worker.group
    extra = list(group.server_args)
    if group.role is WorkerRole.PREFILL:
        assert bootstrap_port is not None
        extra += ["--disaggregation-mode", "prefill", "--disaggregation-bootstrap-port", str(bootstrap_port)]
    elif group.role is WorkerRole.DECODE:
        extra += ["--disaggregation-mode", "decode"]
    placed = any(a.split("=", 1)[0] == _BASE_GPU_FLAG for a in (*spec.server_args, *group.server_args))
    if spec.mode is not EndpointMode.LAUNCH or placed:
        return extra  # the twin has no GPUs to share; a base GPU the user set is theirs to place
    return [*extra, _BASE_GPU_FLAG, str(worker.base_gpu)]


def router_command(
    smg: str,
    fleet: FleetSpec,
    worker_urls: list[str],
    host: str,
    port: int,
    metrics_port: int,
    bootstrap_ports: dict[str, int] | None = None,
) -> list[str]:
    """`smg launch` in front of `worker_urls`, serving on host:port and its Prometheus metrics on host:metrics_port.
    A disaggregated fleet's: `worker_urls` in fleet_workers' order, and each prefill worker's bootstrap port."""
    if fleet.disaggregated:
        ports = bootstrap_ports or {}
        workers = []
        for worker, url in zip(fleet_workers(fleet), worker_urls, strict=True):
            if worker.group.role is WorkerRole.PREFILL:
                workers += ["--prefill", url, str(ports[url])]
            else:
                workers += ["--decode", url]
        routed = ["--pd-disaggregation", *workers]
    else:
        routed = ["--worker-urls", *worker_urls]
    return [
        smg, "launch",
        *routed,
        "--host", host,
        "--port", str(port),
        "--prometheus-host", host,
        "--prometheus-port", str(metrics_port),
        *fleet.router.launch_args(),
    ]  # fmt: skip
