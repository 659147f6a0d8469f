"""The worked example's bundled traffic (workloads/examples/): the trace is what its generator writes, and the
scenarios load with the same checks as workloads/scenarios.yaml and describe the example docs/warehouse.md states."""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc

from endpoints.spec import load_endpoint_specs
from workloads.examples.worked_example_trace import REQUESTS, TRACE_PATH, worked_example_csv
from workloads.readers.reader_registry import read_trace
from workloads.scenarios import load_scenarios

ROOT = Path(__file__).resolve().parents[2]


def test_the_bundled_trace_is_what_its_generator_writes():
    assert TRACE_PATH.read_text() == worked_example_csv()


def test_the_trace_has_about_300_input_and_400_output_tokens_a_request():
    workload = read_trace(TRACE_PATH, "azure")
    assert workload.num_requests == REQUESTS
    assert 280 <= pc.mean(workload.table.column("input_tokens")).as_py() <= 320
    assert 380 <= pc.mean(workload.table.column("output_tokens")).as_py() <= 420
    assert pc.min(workload.table.column("input_tokens")).as_py() < pc.max(workload.table.column("input_tokens")).as_py()


def test_the_scenarios_load_against_the_bundled_endpoints_and_stay_out_of_the_weekly_ones():
    endpoints = load_endpoint_specs(ROOT / "workloads/endpoints.yaml")
    examples = load_scenarios(ROOT / "workloads/examples/worked_example.yaml", ROOT, endpoints)
    v3, r1 = examples["worked-example-v3"], examples["worked-example-r1"]
    assert v3.trace == r1.trace == TRACE_PATH
    assert v3.shared_prefix_tokens == r1.shared_prefix_tokens == 2048
    assert (endpoints[v3.endpoint].model, endpoints[r1.endpoint].model) == (
        "deepseek-ai/DeepSeek-V3",
        "deepseek-ai/DeepSeek-R1",
    )
    assert r1.reasoning_ratio > 0 and v3.reasoning_ratio == 0
    weekly = load_scenarios(ROOT / "workloads/scenarios.yaml", ROOT, endpoints)
    assert not set(examples) & set(weekly)
    assert all(s.trace != TRACE_PATH for s in weekly.values())  # the schedule and the demo never replay it
