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
