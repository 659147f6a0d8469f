"""The twin as a real server for the conformance checks: `python -m endpoints.sim` on 127.0.0.1, port 0.

It runs with the project's own interpreter (COSTBENCH_TWIN_PYTHON, set by `make conformance` to .venv's),
not the conformance environment's, so what is checked is the twin as users run it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import requests

REPO_ROOT = Path(__file__).resolve().parent.parent
LISTENING_PREFIX = "costbench-sim listening on "
START_TIMEOUT_S = 60.0


@dataclass
class TwinServer:
    base_url: str
    flags: tuple[str, ...]
    process: subprocess.Popen
    log_path: Path

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        self.log_path.unlink(missing_ok=True)

    def log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-2000:]


def twin_python() -> str:
    return os.environ.get("COSTBENCH_TWIN_PYTHON") or sys.executable


def start_twin(flags: list[str]) -> TwinServer:
    """Start the twin with SGLang flags and wait until /health answers 200."""
    log = tempfile.NamedTemporaryFile(prefix="conformance-twin-", suffix=".log", delete=False)
    process = subprocess.Popen(
        [twin_python(), "-m", "endpoints.sim", "--host", "127.0.0.1", "--port", "0", *flags],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=log, text=True,
    )  # fmt: skip
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if not line.startswith(LISTENING_PREFIX):
        process.kill()
        process.wait(10)
        tail = Path(log.name).read_text()[-2000:]
        Path(log.name).unlink()
        raise RuntimeError(f"the twin did not start ({line!r}): {tail}")
    server = TwinServer(line[len(LISTENING_PREFIX) :], tuple(flags), process, Path(log.name))
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if requests.get(server.base_url + "/health", timeout=30).status_code == 200:
            return server
        time.sleep(0.1)
    server.stop()
    raise RuntimeError(f"the twin at {server.base_url} never became healthy")
