"""The code as a gRPC server of its own, as a user-code deployment serves it on Kubernetes, named by the workspace
file the instance's processes are given: the daemon, the run launcher and each submitting `dagster` command use it,
instead of each starting a server that loads the code again (about 3.5 s of CPU per command on 2 cores)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import yaml

from endpoints.process_group import start_in_own_group, stop_group
from pipelines.instance.instance_runs import InstancePaths


@contextmanager
def served_code(paths: InstancePaths, target: Sequence[str], location: str, start_timeout_s: float) -> Iterator[None]:
    """Serve `target` (`dagster api grpc`'s options naming the code: --python-file F or --module-name M, with
    --attribute) and write paths.workspace to name the server; stopped with any run worker it still has."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    workspace = {"load_from": [{"grpc_server": {"host": "127.0.0.1", "port": port, "location_name": location}}]}
    Path(paths.workspace).write_text(yaml.safe_dump(workspace))
    log = Path(paths.dagster_home) / "code_server.log"
    argv = [paths.command("dagster"), "api", "grpc", *target, "--host", "127.0.0.1", "--port", str(port)]
    server = start_in_own_group(argv, log, {**(paths.env or {}), "DAGSTER_HOME": str(paths.dagster_home)})
    try:
        deadline = time.monotonic() + start_timeout_s
        while "Started Dagster code server" not in log.read_text(errors="replace"):
            assert server.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")[-3000:]
            time.sleep(0.2)
        yield
    finally:
        stop_group(server, grace_s=30.0)
