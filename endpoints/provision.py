"""Provision an endpoint for one replay: start it (sim, launch) or check it (attach), then tear it down.

`sim` is the launch path with the twin as the launched program, so the code that starts a real
`sglang.launch_server` on a GPU host is the code every test exercises. Either way the run directory
gets `server_facts.json` (server_info, model_info, version, config fingerprint) and, for a server
costbench started, its log.

A started server binds the spec's `host` and `port` (127.0.0.1 and a free port by default) and is
reached by replay shards at its `advertise_url` when the spec has one (a Service name, the pod's IP).
It lives as long as the host (or pod) that started it: a server started by a step that has its own
pod ends with that step, so `start_detached` refuses sim and launch where steps do not share a host.

A fleet (`replicas`, `router` in endpoints.yaml) is N such servers on loopback ports and SGLang's router
(smg) in front of them at the spec's host and port, all in one process group (endpoints/process_group.py),
so one lease and one teardown stop every process. The router starts once every worker is healthy (smg
checks its workers at startup, then only every 30 s by default) and is ready when its `/readiness` counts
every worker healthy.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import orjson

from common.run_folder import SERVER_FACTS_FILE, SERVER_LOG_FILE, WORKER_LOG_FILE
from endpoints.fingerprint import config_fingerprint
from endpoints.fleet_commands import fleet_workers, router_command, smg_program, worker_extra_args
from endpoints.probes.server_facts import (
    NotSglangError,
    UnreachableError,
    auth_headers,
    fetch_server_facts,
    health_status,
    http_get,
    save_server_facts,
)
from endpoints.process_group import (
    start_in_group,
    start_in_own_group,
    stop_group_by_id,
    stop_members,
    terminate_on_sigterm,
)
from endpoints.running_endpoint import RunningEndpoint
from endpoints.spec import EndpointMode, EndpointSpec, FleetSpec, WorkerRole
from redaction.secret_redaction import redact_clipped

LOOPBACK = "127.0.0.1"
_ANY_ADDRESS = ("0.0.0.0", "::")  # bound to every interface: this host dials it on loopback
_ENV_REFERENCE = re.compile(r"\$\{([A-Z_][A-Z0-9_]*)\}")
_POLL_FIRST_S = 0.05
_POLL_MAX_S = 2.0  # a real server takes minutes to load DeepSeek; do not flood its access log


class EndpointStartError(RuntimeError):
    pass


class EndpointPlacementError(EndpointStartError):
    """A server costbench would start cannot serve steps that run on other hosts (pods)."""


def free_port(host: str = LOOPBACK) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _http_url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def local_url(spec: EndpointSpec, port: int) -> str:
    """Where this host reaches the server it started (its health is polled here)."""
    return _http_url(LOOPBACK if spec.host in _ANY_ADDRESS else spec.host, port)


def advertised_url(spec: EndpointSpec, port: int) -> str:
    """The URL replay shards dial: `advertise_url` with its ${VAR}s read from the environment now (e.g.
    POD_IP, set from the pod's status.podIP by the downward API), else where this host reaches it."""
    if not spec.advertise_url:
        return local_url(spec, port)

    def value(match: re.Match) -> str:
        name = match.group(1)
        if not os.environ.get(name):
            raise EndpointStartError(
                f"endpoint {spec.name!r}: advertise_url {spec.advertise_url} names ${{{name}}}, which is not set "
                "here (on Kubernetes, set it from the downward API: valueFrom.fieldRef.fieldPath: status.podIP)"
            )
        return os.environ[name]

    return _ENV_REFERENCE.sub(value, spec.advertise_url)


def server_command(spec: EndpointSpec, port: int, host: str | None = None) -> list[str]:
    """The exact command line: SGLang's flags for the real server and the twin alike."""
    if spec.command:
        program = list(spec.command)
    elif spec.mode is EndpointMode.SIM:
        program = [sys.executable, "-m", "endpoints.sim"]
    else:
        program = [sys.executable, "-m", "sglang.launch_server"]
    return [*program, *server_flags(spec, port, host)]


def server_flags(spec: EndpointSpec, port: int, host: str | None = None) -> list[str]:
    """The server's flags (after the program): what the twin parses whether launched or served in-process.
    `host`: where it binds, if not the spec's (a fleet's workers: loopback, behind the router)."""
    return [
        "--model-path", spec.model,
        "--host", host or spec.host,
        "--port", str(port),
        "--enable-metrics",
        "--enable-cache-report",
        *spec.server_args,
    ]  # fmt: skip


LOG_LINE_MAX_CHARS = 1000


def _log_tail(log_path: Path, lines: int = 20) -> str:
    """The log's last lines, for an error that Dagster's event log keeps: each redacted (SGLang logs its
    ServerArgs at start) and clipped."""
    try:
        tail = log_path.read_text(errors="replace").splitlines()[-lines:]
        return "\n".join(redact_clipped(line, LOG_LINE_MAX_CHARS) for line in tail)
    except OSError:
        return "(no log)"


def _facts(spec: EndpointSpec, url: str) -> tuple[dict, dict]:
    try:
        return fetch_server_facts(url, auth_headers(spec))
    except (NotSglangError, UnreachableError) as exc:
        raise EndpointStartError(f"endpoint {spec.name!r}: {exc}") from None


def _running(
    spec: EndpointSpec,
    url: str,
    run_dir: Path,
    log_path: Path | None,
    metrics_urls: tuple[str, ...],
    server_info: dict,
    model_info: dict,
    workers: tuple[dict, ...] = (),
    command: list[str] | list[list[str]] | None = None,  # a fleet: each worker's, then the router's
    worker_urls: tuple[str, ...] = (),
    router: dict | None = None,
) -> RunningEndpoint:
    fingerprint = config_fingerprint(server_info, spec.model, spec.gpu_type, spec.gpu_count)
    facts = {
        "endpoint": spec.name,
        "mode": spec.mode.value,
        "clock": spec.clock.value,
        "url": url,
        "metrics_urls": list(metrics_urls),
        "version": server_info.get("version"),
        "server_info": server_info,
        "model_info": model_info,
        "workers": [{"url": u, "server_info": info} for u, info in zip(worker_urls, workers)],
        "router": router,  # a fleet's router: policy, flags, command, metrics URL (None: no router of ours to name)
        "config_fingerprint": fingerprint.digest,
        "config_facts": fingerprint.facts,
        "command": command,
        "log_file": log_path.name if log_path else None,
    }
    facts_path = save_server_facts(run_dir / SERVER_FACTS_FILE, facts)
    router_metrics_url = router.get("metrics_url") if router else None
    return RunningEndpoint(
        spec, url, server_info, model_info, log_path, metrics_urls, fingerprint, facts_path, workers, worker_urls,
        router_metrics_url,
    )  # fmt: skip


def describe_served(
    spec: EndpointSpec,
    url: str,
    run_dir: Path,
    log_path: Path,
    flags: list[str],
    worker_urls: tuple[str, ...] = (),
    router: dict | None = None,
) -> RunningEndpoint:
    """A server costbench serves in its own process (the twin on a virtual clock, endpoints/virtual_twin.py),
    described and recorded exactly like a launched one; a fleet's `worker_urls` behind `router` at `url`,
    like a started fleet."""
    if not worker_urls:
        server_info, model_info = _facts(spec, url)
        return _running(spec, url, run_dir, log_path, (url,), server_info, model_info, command=flags)
    infos = tuple(_facts(spec, worker_url) for worker_url in worker_urls)
    return _running(
        spec, url, run_dir, log_path, worker_urls, infos[0][0], infos[0][1], tuple(info for info, _ in infos),
        [flags] * len(worker_urls), worker_urls, router,
    )  # fmt: skip


def _wait_healthy(
    spec: EndpointSpec,
    url: str,
    process: subprocess.Popen,
    log_path: Path,
    deadline: float | None = None,
    ready: Callable[[str, dict[str, str], float], tuple[bool, object]] | None = None,
) -> None:
    """Polls until `ready` (default: /health_generate answers 200) or the deadline; fails on the process's exit."""
    deadline = deadline if deadline is not None else time.monotonic() + spec.ready_timeout_s
    headers = auth_headers(spec)
    pause_s = _POLL_FIRST_S
    while True:
        remaining_s = deadline - time.monotonic()
        done, answer = (ready or _generates)(url, headers, max(0.5, min(25.0, remaining_s)))
        if done:
            return
        if process.poll() is not None:
            raise EndpointStartError(
                f"endpoint {spec.name!r} exited with code {process.returncode} before it was healthy; "
                f"log {log_path}:\n{_log_tail(log_path)}"
            )
        if time.monotonic() > deadline:
            raise EndpointStartError(
                f"endpoint {spec.name!r} not healthy at {url} after {spec.ready_timeout_s:g} s (last answer: "
                f"{redact_clipped(str(answer), LOG_LINE_MAX_CHARS)}); log {log_path}:\n{_log_tail(log_path)}"
            )
        time.sleep(min(pause_s, max(0.0, deadline - time.monotonic())))
        pause_s = min(pause_s * 2, _POLL_MAX_S)


def _generates(url: str, headers: dict[str, str], timeout_s: float) -> tuple[bool, object]:
    answer = health_status(url, headers, timeout_s=timeout_s)
    last = f"/health_generate: HTTP {answer.status}" if answer.status is not None else answer.problem
    return answer.status == 200, last


def _router_ready(replicas: int) -> Callable[[str, dict[str, str], float], tuple[bool, object]]:
    """smg's /readiness: 200 with {"healthy_workers": n, "total_workers": n} once its workers pass its checks."""

    def ready(url: str, headers: dict[str, str], timeout_s: float) -> tuple[bool, object]:
        answer = http_get(f"{url}/readiness", headers, timeout_s)
        if answer.status != 200:
            return False, f"/readiness: HTTP {answer.status}" if answer.status is not None else answer.problem
        try:
            body = orjson.loads(answer.body)
        except orjson.JSONDecodeError:
            return False, f"/readiness: not JSON: {redact_clipped(answer.body.decode('utf-8', 'replace'), 100)!r}"
        healthy = body.get("healthy_workers") if isinstance(body, dict) else None
        return healthy == replicas, f"/readiness: {healthy} of {replicas} workers healthy"

    return ready


def _start(
    spec: EndpointSpec, run_dir: Path, on_spawned: Callable[[int], None] | None = None
) -> tuple[RunningEndpoint, list[subprocess.Popen]]:
    """Starts the server (or the fleet) and waits until it is healthy; stops it again if it never gets there.
    `on_spawned` gets the server's process group as soon as it exists, before the (long) health wait.
    The first process returned leads the group (its pid is the group id)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    if spec.fleet is not None:
        return _start_fleet(spec, spec.fleet, run_dir, on_spawned)
    port = spec.port or free_port(spec.host)
    here = local_url(spec, port)
    url = advertised_url(spec, port)  # before the server starts: an unset ${VAR} fails with nothing to stop
    log_path = run_dir / SERVER_LOG_FILE.format(spec.name)
    command = server_command(spec, port)
    log_path.write_text(f"# costbench: {' '.join(command)}\n")  # no secret can be here: spec forbids --api-key
    # Own process group, so teardown reaches every child (a router's workers, a container shim).
    process = start_in_own_group(command, log_path, dict(spec.env))
    try:
        if on_spawned is not None:
            on_spawned(process.pid)  # start_new_session: the leader's pid is the group id
        _wait_healthy(spec, here, process, log_path)
        if url != here:
            _check_advertised(spec, url, here)
        server_info, model_info = _facts(spec, url)
        return _running(spec, url, run_dir, log_path, (url,), server_info, model_info, command=command), [process]
    except BaseException:
        stop_members([process])
        raise


def _start_fleet(
    spec: EndpointSpec, fleet: FleetSpec, run_dir: Path, on_spawned: Callable[[int], None] | None
) -> tuple[RunningEndpoint, list[subprocess.Popen]]:
    smg = smg_program()
    if smg is None:
        raise EndpointStartError(
            f"endpoint {spec.name!r} is a fleet: its router, smg, is not installed (pip install smg)"
        )
    deadline = time.monotonic() + spec.ready_timeout_s  # one budget for the whole fleet, as for one server
    port = spec.port or free_port(spec.host)
    here = local_url(spec, port)
    url = advertised_url(spec, port)
    processes: list[subprocess.Popen] = []
    try:
        workers: list[tuple[str, subprocess.Popen, Path]] = []
        commands: list[list[str]] = []
        bootstrap_ports: dict[str, int] = {}
        for worker in fleet_workers(fleet):
            worker_port = free_port(LOOPBACK)
            bootstrap = free_port(LOOPBACK) if worker.group.role is WorkerRole.PREFILL else None
            if bootstrap is not None:
                bootstrap_ports[_http_url(LOOPBACK, worker_port)] = bootstrap
            command = [*server_command(spec, worker_port, LOOPBACK), *worker_extra_args(spec, worker, bootstrap)]
            index = worker.index
            log_path = run_dir / WORKER_LOG_FILE.format(spec.name, index)
            log_path.write_text(f"# costbench: {' '.join(command)}\n")
            process = start_in_group(command, log_path, dict(spec.env), processes[0].pid if processes else None)
            if not processes and on_spawned is not None:
                on_spawned(process.pid)  # the group's leader: the lease names the whole fleet from here on
            processes.append(process)
            commands.append(command)
            workers.append((_http_url(LOOPBACK, worker_port), process, log_path))
        for worker_url, process, log_path in workers:
            _wait_healthy(spec, worker_url, process, log_path, deadline)
        worker_urls = [worker_url for worker_url, _, _ in workers]
        metrics_port = free_port(spec.host)
        command = router_command(smg, fleet, worker_urls, spec.host, port, metrics_port, bootstrap_ports)
        router_log = run_dir / SERVER_LOG_FILE.format(spec.name)  # the endpoint's entry point: its router
        router_log.write_text(f"# costbench: {' '.join(command)}\n")
        router = start_in_group(command, router_log, {}, processes[0].pid)
        processes.append(router)
        _wait_healthy(spec, here, router, router_log, deadline, _router_ready(fleet.replicas))
        if url != here:
            _check_advertised(spec, url, here)
        infos = tuple(_facts(spec, worker_url) for worker_url in worker_urls)
        router_facts = {
            "pd_disaggregation": fleet.disaggregated,
            "policy": fleet.router.policy,
            "args": list(fleet.router.args),
            "command": command,
            "metrics_url": local_url(spec, metrics_port) + "/metrics",
            "log_file": router_log.name,
        }
        endpoint = _running(
            spec, url, run_dir, router_log, tuple(worker_urls), infos[0][0], infos[0][1],
            tuple(info for info, _ in infos), [*commands, command], tuple(worker_urls), router_facts,
        )  # fmt: skip
        return endpoint, processes
    except BaseException:
        stop_members(processes)
        raise


def _check_advertised(spec: EndpointSpec, url: str, here: str) -> None:
    try:
        _check_health(spec, url)
    except EndpointStartError as exc:
        raise EndpointStartError(
            f"endpoint {spec.name!r} is healthy at {here} but not at its advertise_url {url}, which the replay "
            f"shards would dial: {exc}"
        ) from None


@contextmanager
def _launched(spec: EndpointSpec, run_dir: Path) -> Iterator[RunningEndpoint]:
    with terminate_on_sigterm():
        endpoint, processes = _start(spec, run_dir)
        try:
            yield endpoint
        finally:
            stop_members(processes)


def _check_health(spec: EndpointSpec, url: str) -> None:
    answer = health_status(url, auth_headers(spec))
    if answer.status is None:
        raise EndpointStartError(f"endpoint {spec.name!r}: nothing answers at {url}/health_generate ({answer.problem})")
    if answer.status == 404:
        raise EndpointStartError(
            f"endpoint {spec.name!r}: {url} has no /health_generate: not an SGLang server or sglang_router"
        )
    if answer.status != 200:
        raise EndpointStartError(
            f"endpoint {spec.name!r}: {url}/health_generate answered HTTP {answer.status} "
            "(warming up, overloaded or unhealthy)"
        )


@contextmanager
def _attached(spec: EndpointSpec, run_dir: Path) -> Iterator[RunningEndpoint]:
    url = str(spec.url).rstrip("/")
    _check_health(spec, url)
    if not spec.worker_urls:
        server_info, model_info = _facts(spec, url)
        yield _running(spec, url, run_dir, None, (url,), server_info, model_info)
        return
    # A fleet behind sglang_router: the router routes, the workers are the SGLang servers whose
    # flags and /metrics describe the run.
    workers = []
    for worker in spec.worker_urls:
        _check_health(spec, worker)
        workers.append(_facts(spec, worker))
    server_info, model_info = workers[0]
    infos = tuple(info for info, _ in workers)
    router = None
    if spec.fleet is not None:  # the router block says what the router runs: recorded, not checked
        router = {"policy": spec.fleet.router.policy, "args": list(spec.fleet.router.args),
                  "metrics_url": spec.router_metrics_url}  # fmt: skip
    yield _running(
        spec, url, run_dir, None, spec.worker_urls, server_info, model_info, infos, worker_urls=spec.worker_urls,
        router=router,
    )  # fmt: skip


_PROVISIONERS = {
    EndpointMode.SIM: _launched,
    EndpointMode.LAUNCH: _launched,
    EndpointMode.ATTACH: _attached,
}


@contextmanager
def provision(spec: EndpointSpec, run_dir: Path) -> Iterator[RunningEndpoint]:
    """A healthy endpoint for the duration of the block; started ones are always torn down
    (on success, on an exception, on Ctrl-C, on SIGTERM)."""
    with _PROVISIONERS[spec.mode](spec, Path(run_dir)) as endpoint:
        yield endpoint


@dataclass(frozen=True, slots=True)
class EndpointLease:
    """An endpoint that outlives the step that started it (a sharded replay: one step starts it, shard
    steps in other processes use it, a last step stops it). Whoever holds the lease must stop it."""

    endpoint: RunningEndpoint
    process_group: int | None  # the server's process group; None when attached (nothing to stop)


def start_detached(
    spec: EndpointSpec,
    run_dir: Path,
    *,
    steps_share_host: bool = True,
    on_spawned: Callable[[int], None] | None = None,
) -> EndpointLease:
    """Starts (or checks) the endpoint and leaves it running for other steps.

    `on_spawned`: called with the server's process group the moment it exists (to record a lease that
    outlives this process), before the health wait, which takes minutes for a real server.

    `steps_share_host`: whether the steps that use and stop the server run on this host (or pod), as
    under an in-process or multiprocess executor. When each step has its own pod (dagster-k8s's
    k8s_job_executor), a server this step starts ends with it: only attach can work there.
    """
    if not steps_share_host and spec.mode is not EndpointMode.ATTACH:
        raise EndpointPlacementError(
            f"endpoint {spec.name!r} is mode {spec.mode.value}: costbench would start the server in this "
            "step's own pod, where it ends with the step, before the replay_shard steps in other pods could "
            "use it. With a step-per-pod executor (k8s_job_executor), use mode attach with a long-running "
            "server and its Service (deploy/k8s/endpoint_twin.yaml); for sim or launch, run the whole run "
            "in one pod (K8sRunLauncher with the job's own multiprocess executor)."
        )
    if spec.mode is EndpointMode.ATTACH:
        with _attached(spec, Path(run_dir)) as endpoint:
            return EndpointLease(endpoint, None)
    endpoint, processes = _start(spec, Path(run_dir), on_spawned)
    return EndpointLease(endpoint, processes[0].pid)  # the leader's pid is the group id


def stop_detached(process_group: int | None, grace_s: float = 15.0, host: str | None = None) -> bool:
    """Stops a detached server's process group; False when there is nothing to stop from here.

    `host`: where the server was started (socket.gethostname() there). On another host (another pod)
    the number names some other process group, so nothing is signalled; that server ends with its pod.
    """
    if process_group is None or (host is not None and host != socket.gethostname()):
        return False
    stop_group_by_id(process_group, grace_s)
    return True
