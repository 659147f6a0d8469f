"""A replay on a virtual clock reaches its twin in-process (common/exchange.py, endpoints/sim/http/in_process.py):
what it records must be what the same replay records over loopback HTTP, row for row and column for column, for
every kind of answer (streamed tokens, reasoning, structured output, a 400, an outage's 503, an injected error,
a client timeout mid-stream) and through the router's model. A twin whose faults act on the connection itself
has no in-process exchange."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa
import pytest

from endpoints.router.router_spec import RouterSpec
from endpoints.spec import EndpointClock, EndpointMode, EndpointSpec, FleetSpec, WorkerGroup, WorkerRole
from endpoints.virtual_twin import replay_on_virtual_twin
from replay.recording.requests_reader import read_requests
from replay.runner import ReplayConfig, run_replay_async
from replay_sglang_peer import make_workload
from workloads.prompts.response_format import parse_response_format
from workloads.workload import Workload

V3 = ("--tp", "8", "--sim-hardware", "h200", "--stream-interval", "4")
R1 = (*V3, "--reasoning-parser", "deepseek-r1")
N = 40
ARRIVALS = [i * 0.2 for i in range(N)]


def _spec(model: str, flags: tuple[str, ...], replicas: int = 1) -> EndpointSpec:
    fleet = (
        None if replicas == 1 else FleetSpec(RouterSpec("cache_aware"), (WorkerGroup(WorkerRole.REGULAR, replicas, 8),))
    )
    return EndpointSpec("twin", EndpointMode.SIM, model, flags, "H200", 8 * replicas, 2.0, scrape_interval_s=2.0,
                        clock=EndpointClock.VIRTUAL, fleet=fleet)  # fmt: skip


def _with_column(workload: Workload, name: str, values: list) -> Workload:
    table = workload.table
    index = table.schema.get_field_index(name)
    table = table.set_column(index, table.schema.field(index), pa.array(values, table.schema.field(index).type))
    return dataclasses.replace(workload, table=table)


def _native_with_a_refusal() -> Workload:
    """Native requests, one with a prompt longer than the context (the twin's 400)."""
    workload = make_workload(ARRIVALS, input_tokens=600, output_tokens=60)
    inputs = [600] * N
    inputs[7] = 400_000
    return _with_column(workload, "input_tokens", inputs)


def _reasoning_structured() -> Workload:
    """R1 chat with reasoning budgets, every other request asking for a JSON schema (constrained or prompt-only)."""
    workload = make_workload(ARRIVALS, input_tokens=800, output_tokens=120, reasoning_tokens=[40 + i for i in range(N)])
    ticket = parse_response_format({"type": "json_schema", "json_schema": {"name": "ticket", "strict": True, "schema": {
        "type": "object", "properties": {"priority": {"enum": ["low", "high"]}, "summary": {"type": "string"}},
        "required": ["priority", "summary"]}}}).text  # fmt: skip
    workload = _with_column(workload, "response_format", [ticket if i % 2 == 0 else None for i in range(N)])
    return _with_column(workload, "constrained", [(i % 4 == 0) if i % 2 == 0 else None for i in range(N)])


CASES = {
    "native, a 400 among them": (_spec("deepseek-ai/DeepSeek-V3", V3), _native_with_a_refusal(), "sglang", {}),
    "chat, reasoning and structured output": (
        _spec("deepseek-ai/DeepSeek-R1", R1),
        _reasoning_structured(),
        "openai-chat",
        {"require_reasoning": True},
    ),
    "completions through the router's model": (
        _spec("deepseek-ai/DeepSeek-V3", V3, replicas=2),
        make_workload(
            ARRIVALS, input_tokens=700, output_tokens=50, prefix_blocks=[[i % 3] for i in range(N)], block_size=64
        ),
        "openai-completions",
        {},
    ),  # fmt: skip
    "injected errors, stalls and an outage's 503s": (
        _spec(
            "deepseek-ai/DeepSeek-V3",
            (
                *V3,
                "--fault-error-rate",
                "0.3",
                "--fault-stall-s",
                "0.5",
                "--fault-stall-rate",
                "0.3",
                "--fault-503-after-s",
                "3",
                "--fault-503-for-s",
                "1",
            ),
        ),
        make_workload(ARRIVALS, input_tokens=600, output_tokens=60),
        "sglang",
        {},
    ),  # fmt: skip
    "client timeouts mid-stream": (
        _spec("deepseek-ai/DeepSeek-V3", V3),
        make_workload(ARRIVALS, input_tokens=600, output_tokens=2000),
        "sglang",
        {"request_timeout_s": 3.0},
    ),  # fmt: skip
}


def _replayed(tmp: Path, spec: EndpointSpec, workload: Workload, backend: str, options: dict, in_process: bool):
    seen: dict = {}

    def replay(endpoint, clock):
        seen["exchange"] = endpoint.exchange
        seen["workers"] = {url: i for i, url in enumerate(endpoint.worker_urls)}
        config = ReplayConfig(url=endpoint.url, backend=backend, run_id="run", **options)
        exchange = endpoint.exchange if in_process else None
        return run_replay_async(workload, config, tmp / "shard-0", clock, exchange=exchange)

    info = replay_on_virtual_twin(spec, tmp, "run", cold_start=True, replay=replay)
    rows = read_requests(tmp / "shard-0").to_pylist()
    for row in rows:  # a worker's URL carries a free port: compare which worker, not where it listened
        row["worker"] = None if row["worker"] is None else seen["workers"][row["worker"]]
    counts = {f: getattr(info, f) for f in ("requests_total", "requests_recorded", "requests_ok", "window_s")}
    return sorted(rows, key=lambda r: r["request_id"]), counts, seen["exchange"]


@pytest.mark.parametrize("case", list(CASES))
def test_in_process_records_equal_http(tmp_path: Path, case: str) -> None:
    spec, workload, backend, options = CASES[case]
    via_http, http_counts, _ = _replayed(tmp_path / "http", spec, workload, backend, options, in_process=False)
    in_process, counts, exchange = _replayed(tmp_path / "in", spec, workload, backend, options, in_process=True)
    assert exchange is not None
    assert counts == http_counts
    assert len(in_process) == N
    for ours, theirs in zip(in_process, via_http, strict=True):
        assert ours == theirs, ours["request_id"]
    statuses = {r["status"] for r in in_process}
    kinds = {r["error_kind"] for r in in_process}
    # Each case shows the answer it is about (not only clean streams).
    expected = {
        "native, a 400 among them": lambda: "http_status" in kinds and "ok" in statuses,
        "chat, reasoning and structured output": lambda: (
            all(r["reasoning_tokens"] for r in in_process) and any(r["answer_valid"] is not None for r in in_process)
        ),
        "completions through the router's model": lambda: {r["worker"] for r in in_process} == {0, 1},
        "injected errors, stalls and an outage's 503s": lambda: {"stream_error", "http_status"} <= kinds,
        "client timeouts mid-stream": lambda: "timeout" in statuses,
    }[case]
    assert expected(), (statuses, kinds)


def test_faults_on_the_connection_keep_http(tmp_path: Path) -> None:
    """--fault-disconnect-rate drops the socket mid-answer: only HTTP can show that, so the twin offers no exchange."""
    spec = _spec("deepseek-ai/DeepSeek-V3", (*V3, "--fault-disconnect-rate", "0.5"))
    rows, counts, exchange = _replayed(
        tmp_path, spec, make_workload(ARRIVALS[:10], 600, 60), "sglang", {}, in_process=True
    )
    assert exchange is None
    assert {r["error_kind"] for r in rows} >= {"connection"}
