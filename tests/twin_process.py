"""The twin as a real process (`python -m endpoints.sim`) on a free loopback port, for tests in any folder."""

from __future__ import annotations

import re
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BASE_ARGS = ("--host", "127.0.0.1", "--port", "0", "--tp-size", "8", "--sim-hardware", "h200", "--sim-warmup-s", "0")


@contextmanager
def running_sim(*extra_args: str):
    """The twin as a real process on a free loopback port; yields its base URL and the process. The twin
    always has its entry point (`python -m endpoints.sim`): if it cannot start, the test fails with its output."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "endpoints.sim", *BASE_ARGS, *extra_args],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        seen = []
        for line in proc.stdout:
            seen.append(line)
            match = re.search(r"costbench-sim listening on (http://127\.0\.0\.1:\d+)", line)
            if match:
                yield match.group(1), proc
                break
        else:
            pytest.fail("the sim exited before listening:\n" + "".join(seen))
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


SMG = REPO / ".venv" / "bin" / "smg"


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def running_smg(
    worker_urls: list[str], *router_args: str, ready_timeout_s: float = 30.0, routing: list[str] | None = None
):
    """Real smg (SGLang's router, `smg launch`) on loopback in front of `worker_urls`; yields its base URL once
    every worker is registered and healthy. Its Prometheus listener is on loopback too. `routing`: how smg is told
    its workers, if not `--worker-urls` (PD mode: `--pd-disaggregation --prefill URL PORT --decode URL`)."""
    import json
    import time
    import urllib.request

    port = _free_port()
    workers = routing if routing is not None else ["--worker-urls", *worker_urls]
    command = [str(SMG), "launch", *workers, "--host", "127.0.0.1", "--port", str(port),
               "--prometheus-host", "127.0.0.1", "--prometheus-port", str(_free_port()), *router_args]  # fmt: skip
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_timeout_s
        while True:
            if proc.poll() is not None:
                pytest.fail(f"smg exited ({proc.returncode}) before its workers were ready: {command}")
            try:
                with urllib.request.urlopen(f"{base}/workers", timeout=2) as resp:
                    workers = json.loads(resp.read()).get("workers", [])
                if sum(1 for w in workers if w.get("is_healthy")) == len(worker_urls):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"smg's workers were not healthy within {ready_timeout_s} s")
            time.sleep(0.05)
        yield base
    finally:
        proc.terminate()  # smg then keeps its listener open 5 s for load balancers; a test needs no drain
        try:
            proc.wait(1)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
