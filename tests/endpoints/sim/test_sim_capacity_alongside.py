"""The capacity measurements beside a virtual-clock replay (endpoints/capacity/capacity_alongside.py): the
child leaves its answers in the cache for the step after the replay, and it is gone however the block ends: the
block returning, the block raising, or the process that started it killed outright."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pytest

from endpoints.capacity.capacity_alongside import INPUTS_FILE, measuring_alongside
from endpoints.capacity.run_capacity import CapacityInputs, measure_run_capacity
from endpoints.router.router_spec import RouterSpec
from endpoints.spec import EndpointClock, EndpointMode, EndpointSpec, FleetSpec, WorkerGroup, WorkerRole
from workloads.workload import WORKLOAD_SCHEMA, TraceFormat, Workload

REPO = Path(__file__).resolve().parents[3]
FLAGS = ("--tp", "8", "--sim-hardware", "h200")


def _window(requests: int = 120) -> Workload:
    """`requests` independent 1,024-token prompts behind one 512-token shared block, two a second."""
    table = pa.Table.from_pydict(
        {
            "request_id": [f"r{i}" for i in range(requests)],
            "session_id": [None] * requests,
            "turn": [None] * requests,
            "arrival_s": [i * 0.5 for i in range(requests)],
            "input_tokens": [1024] * requests,
            "output_tokens": [64] * requests,
            "prefix_blocks": [[0, 1000 + i] for i in range(requests)],
            "prompt": [None] * requests,
            "reasoning_tokens": [None] * requests,
            "response_format": [None] * requests,
            "constrained": [None] * requests,
        },
        schema=WORKLOAD_SCHEMA,
    )
    return Workload("alongside", "test.jsonl", TraceFormat.MOONCAKE, "s", 512, table)


def _inputs(cache_dir: Path, requests: int = 120) -> CapacityInputs:
    fleet = FleetSpec(RouterSpec("cache_aware"), (WorkerGroup(WorkerRole.REGULAR, 2, 8),))
    spec = EndpointSpec("v3-2x", EndpointMode.SIM, "deepseek-ai/DeepSeek-V3", FLAGS, "H200", 16, 3.5,
                        clock=EndpointClock.VIRTUAL, fleet=fleet)  # fmt: skip
    return CapacityInputs(spec, _window(requests), (1000.0, 100.0), 4.0, 1.0, cache_dir)


def test_the_child_leaves_every_measurement_in_the_cache_for_the_next_step(tmp_path):
    inputs = _inputs(tmp_path / "cache")
    with measuring_alongside(inputs, tmp_path / "run") as child:
        pass  # a replay would run here
    assert child.returncode == 0, (tmp_path / "run" / "capacity_alongside.log").read_text()
    assert not (tmp_path / "run" / INPUTS_FILE).exists()
    assert "measured alongside the replay" in (tmp_path / "run" / "capacity_alongside.log").read_text()
    cached = sorted(p.name.split("-")[0] for p in (tmp_path / "cache").iterdir())
    assert cached == ["plan", "routing", "sweep"]
    started_cpu_s = time.process_time()
    measured = measure_run_capacity(inputs)  # what measure_capacity does after the replay: reads it all back
    assert time.process_time() - started_cpu_s < 0.5
    assert measured.capacity is not None and measured.reference is not None and measured.plan is not None
    assert measured.plan.chosen is not None


def test_a_block_that_raises_stops_the_child_before_the_error_goes_on(tmp_path):
    with pytest.raises(RuntimeError, match="the replay failed"):
        with measuring_alongside(_inputs(tmp_path / "cache", requests=3000), tmp_path / "run") as child:
            raise RuntimeError("the replay failed")
    assert child.returncode is not None  # reaped: not running, not a zombie
    assert not (tmp_path / "run" / INPUTS_FILE).exists()


def _children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(p) for p in text.split()]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_child_dies_with_a_parent_killed_outright(tmp_path):
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from pathlib import Path
        from test_sim_capacity_alongside import _inputs
        from endpoints.capacity.capacity_alongside import measuring_alongside
        with measuring_alongside(_inputs(Path({str(tmp_path / "cache")!r}), requests=3000), Path({str(tmp_path)!r})):
            print("started", flush=True)
            time.sleep(60)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "started"
        [child] = _children(parent.pid)
        assert _alive(child)
        os.kill(parent.pid, signal.SIGKILL)  # no finally runs in the parent
        parent.wait()
        # SIGTERM reaches it as the parent dies; its measurement alone would take several seconds more.
        deadline = time.monotonic() + 2.5
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child), "the child outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
