"""bench/worked_example.py on a small slice of its traffic: the worked example's costs move the way its page says
(docs/warehouse.md, "The runtime's cost band: a worked example"). 30 requests are too few for a queue to settle under
the scenarios' 100 ms TPOT SLO (every rate up to the sweep's ceiling would look sustainable), so the slice is judged
against a 12 ms one, which a batch of a few requests already breaks: the order of the figures is held, not their size.
About 18 s of CPU."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench" / "worked_example.py"
SLICE_REQUESTS = 30
SLO_TTFT_MS, SLO_TPOT_MS = 1000.0, 12.0
USD_PER_GPU_HOUR = 3.5


def load_bench():
    spec = importlib.util.spec_from_file_location("worked_example", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["worked_example"] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


worked_example = load_bench()


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list]:
    spool = tmp_path_factory.mktemp("spool")
    out = {}
    for comparison in worked_example.comparisons():
        requests = worked_example.scenario_requests(comparison.scenario, spool, SLICE_REQUESTS)
        out[comparison.title] = worked_example.measure_ways(
            comparison.ways, requests, SLO_TTFT_MS, SLO_TPOT_MS, comparison.endpoint.gpu_count, USD_PER_GPU_HOUR
        )
    return out


def test_no_prefix_reuse_costs_more_per_request_than_radix_attention(measured):
    no_reuse, warm, dense = measured["DeepSeek-V3"]
    assert no_reuse.efficiency_cost_per_request_usd > warm.efficiency_cost_per_request_usd
    assert warm.efficiency_cost_per_request_usd == dense.efficiency_cost_per_request_usd  # one endpoint, one sweep


def test_the_radix_cache_off_hits_nothing_and_on_hits_the_system_prompt(measured):
    no_reuse, warm, dense = measured["DeepSeek-V3"]
    assert no_reuse.hit_rate == 0
    # 2,048 of ~2,350 prompt tokens are the shared system prompt; only the first request misses it.
    assert warm.hit_rate > 0.8 and dense.hit_rate > 0.8


def test_realised_cost_falls_as_occupancy_rises_and_idle_is_the_gap(measured):
    _, warm, dense = measured["DeepSeek-V3"]
    assert dense.realised_cost_per_request_usd < warm.realised_cost_per_request_usd
    assert dense.mean_running_requests > warm.mean_running_requests
    assert warm.idle_cost_per_request_usd == pytest.approx(
        warm.realised_cost_per_request_usd - warm.efficiency_cost_per_request_usd
    )
    assert warm.idle_cost_per_request_usd > 0  # 15% occupancy: most of the bill is idle GPUs


def test_mtp_changes_the_r1_efficiency_cost(measured):
    mtp_on, mtp_off = measured["DeepSeek-R1"]
    assert mtp_on.efficiency_cost_per_request_usd < mtp_off.efficiency_cost_per_request_usd


def test_mtp_off_drops_only_the_speculative_flags():
    flags = ["--tp", "8", "--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3",
             "--speculative-eagle-topk=1", "--max-running-requests", "128"]  # fmt: skip
    assert worked_example.without_speculative(flags) == ("--tp", "8", "--max-running-requests", "128")


def test_the_table_names_the_reference_and_prints_the_band(measured, capsys):
    v3 = worked_example.comparisons()[0]
    worked_example.print_comparison(v3, measured["DeepSeek-V3"], USD_PER_GPU_HOUR, "h200-reserved")
    out = capsys.readouterr().out
    assert "| 3. RadixAttention, dense continuous batching (ref) |" in out
    assert out.count("| 1.00x | 1.00x |") == 1  # the reference against itself, in both costs
    assert "band: USD " in out
