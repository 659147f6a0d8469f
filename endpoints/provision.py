"""Provision an endpoint for one replay: start it (sim, launch) or check it (attach), then tear it down.

`sim` is the launch path with the twin as the launched program, so the code that starts a real
`sglang.launch_server` on a GPU host is the code every test exercises.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from endpoints.spec import EndpointMode, EndpointSpec

LOOPBACK = "127.0.0.1"


class EndpointStartError(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class RunningEndpoint:
    spec: EndpointSpec
    url: str
    server_info: dict
    model_info: dict
    log_path: Path | None  # the server's log, kept with the run (launch and sim)


def free_port(host: str = LOOPBACK) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def server_command(spec: EndpointSpec, port: int) -> list[str]:
    """The exact command line: SGLang's flags for the real server and the twin alike."""
    if spec.command:
        program = list(spec.command)
    elif spec.mode is EndpointMode.SIM:
        program = [sys.executable, "-m", "endpoints.sim"]
    else:
        program = [sys.executable, "-m", "sglang.launch_server"]
    return [
        *program,
        "--model-path", spec.model,
        "--host", LOOPBACK,
        "--port", str(port),
        "--enable-metrics",
        "--enable-cache-report",
        *spec.server_args,
    ]


def _auth_headers(spec: EndpointSpec) -> dict[str, str]:
    if spec.api_key_env and os.environ.get(spec.api_key_env):
        return {"Authorization": f"Bearer {os.environ[spec.api_key_env]}"}
    return {}


def _get_json(url: str, headers: dict[str, str], timeout_s: float = 10.0) -> dict:
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        return json.loads(response.read())


def _healthy(url: str, headers: dict[str, str]) -> bool:
    try:
        request = urllib.request.Request(f"{url}/health_generate", headers=headers)
        with urllib.request.urlopen(request, timeout=5.0) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False


def _log_tail(log_path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(log_path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _server_facts(url: str, spec: EndpointSpec) -> tuple[dict, dict]:
    headers = _auth_headers(spec)
    try:
        server_info = _get_json(f"{url}/server_info", headers)
        model_info = _get_json(f"{url}/model_info", headers)
    except (urllib.error.URLError, ValueError, OSError) as exc:
        raise EndpointStartError(f"endpoint {spec.name!r} at {url} does not answer like an SGLang server: {exc}") from exc
    # A server launched with --api-key echoes it in server_info: never keep it.
    server_info.pop("api_key", None)
    return server_info, model_info


def _stop_group(process: subprocess.Popen, grace_s: float = 10.0) -> None:
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=grace_s)
    except ProcessLookupError:
        pass


@contextmanager
def _launched(spec: EndpointSpec, log_dir: Path) -> Iterator[RunningEndpoint]:
    log_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    url = f"http://{LOOPBACK}:{port}"
    log_path = log_dir / f"{spec.name}.server.log"
    command = server_command(spec, port)
    with open(log_path, "wb") as log:
        # Own process group, so teardown reaches every child (a router's workers, a container shim).
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
    try:
        deadline = time.monotonic() + spec.ready_timeout_s
        headers = _auth_headers(spec)
        while not _healthy(url, headers):
            if process.poll() is not None:
                raise EndpointStartError(
                    f"endpoint {spec.name!r} exited with code {process.returncode} before it was healthy; "
                    f"log {log_path}:\n{_log_tail(log_path)}"
                )
            if time.monotonic() > deadline:
                raise EndpointStartError(
                    f"endpoint {spec.name!r} not healthy at {url}/health_generate after "
                    f"{spec.ready_timeout_s:g} s; log {log_path}:\n{_log_tail(log_path)}"
                )
            time.sleep(0.1)
        server_info, model_info = _server_facts(url, spec)
        yield RunningEndpoint(spec, url, server_info, model_info, log_path)
    finally:
        _stop_group(process)


@contextmanager
def _attached(spec: EndpointSpec, log_dir: Path) -> Iterator[RunningEndpoint]:
    url = str(spec.url).rstrip("/")
    if not _healthy(url, _auth_headers(spec)):
        raise EndpointStartError(f"endpoint {spec.name!r}: {url}/health_generate does not answer 200")
    server_info, model_info = _server_facts(url, spec)
    yield RunningEndpoint(spec, url, server_info, model_info, None)


_PROVISIONERS = {
    EndpointMode.SIM: _launched,
    EndpointMode.LAUNCH: _launched,
    EndpointMode.ATTACH: _attached,
}


@contextmanager
def provision(spec: EndpointSpec, log_dir: Path) -> Iterator[RunningEndpoint]:
    """A healthy endpoint for the duration of the block; started ones are always torn down."""
    with _PROVISIONERS[spec.mode](spec, Path(log_dir)) as endpoint:
        yield endpoint
