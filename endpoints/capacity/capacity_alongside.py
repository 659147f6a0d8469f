"""A run's capacity measurements (run_capacity.py) in a child process while its replay on a virtual clock runs.

The sweep and the plan read only the window and the endpoint's flags, never the replay's records, and on a virtual
clock neither side keeps a schedule: with a second core free the two overlap instead of following each other (on
the demo's live chat runs, 8-13 s of CPU that waited for a 20-30 s replay). The child writes only the cache
(run_capacity's `cache_dir`); the measure_capacity step after the replay then reads every answer from it, or
measures again whatever the child did not finish. Never beside a replay in real time: it would take CPU from
the twins and the client whose timings are the measurement.

The child is stopped on every way out: the block raising (a failure, SIGTERM turned into an exception, Dagster's
interrupt) terminates it; the parent dying without a word (SIGKILL) reaches it as SIGTERM (Linux's
PR_SET_PDEATHSIG, set as its first act, then a check that its parent is still the one that started it). When the
block ends normally the child is waited for: what it measures is what the next step needs.

    with measuring_alongside(inputs, run_dir) as child:
        replay()
    if child.returncode: ...  # the step measures it itself; the child's log says why
"""

from __future__ import annotations

import ctypes
import os
import pickle
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from common.run_folder import CAPACITY_INPUTS_FILE as INPUTS_FILE
from common.run_folder import CAPACITY_LOG_FILE as LOG_FILE
from endpoints.capacity.run_capacity import CapacityInputs, measure_run_capacity

STOP_GRACE_S = 5.0
_PR_SET_PDEATHSIG = 1
_REPO = Path(__file__).resolve().parents[2]


@contextmanager
def measuring_alongside(inputs: CapacityInputs, run_dir: Path) -> Iterator[subprocess.Popen]:
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    inputs_path = run_dir / INPUTS_FILE
    inputs_path.write_bytes(pickle.dumps(inputs))
    command = [sys.executable, "-m", __name__, str(inputs_path), str(os.getpid())]
    with open(run_dir / LOG_FILE, "ab") as log:
        child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=_REPO)
    try:
        yield child
        child.wait()  # the block ended normally: what the child measures is what the next step reads
    finally:
        _stop(child)  # the block raised (or was interrupted): the child goes with it
        inputs_path.unlink(missing_ok=True)


def _stop(child: subprocess.Popen) -> None:
    if child.poll() is not None:
        return
    child.terminate()
    try:
        child.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def _die_with(parent_pid: int) -> None:
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent_pid:  # the parent died before the line above took effect
        sys.exit(0)


def main(argv: list[str]) -> int:
    inputs_path, parent_pid = Path(argv[0]), int(argv[1])
    _die_with(parent_pid)
    inputs: CapacityInputs = pickle.loads(inputs_path.read_bytes())
    started_s = time.monotonic()
    measured = measure_run_capacity(inputs)
    capacity = None if measured.capacity is None else measured.capacity.capacity_rps_at_slo
    made = f"routing reference {measured.reference is not None}, plan {measured.plan is not None}"
    print(f"measured alongside the replay in {time.monotonic() - started_s:.1f} s: capacity at SLO {capacity}, {made}",
          flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
