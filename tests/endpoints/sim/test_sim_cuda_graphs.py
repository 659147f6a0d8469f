"""The decode CUDA graphs' batch cap as SGLang resolves it, and the decode steps past it counted as SGLang counts them
(endpoints/sim/engine/cuda_graphs.py; docs/twin.md, "CUDA graphs")."""

from __future__ import annotations

import pytest

from endpoints.sim.engine.sim_metrics import SimMetrics
from endpoints.sim.server_args import parse_server_args
from endpoints.sim.virtual_bench import random_requests, run_bench

R1 = ("--model-path", "deepseek-ai/DeepSeek-R1", "--disable-radix-cache")


@pytest.mark.parametrize(
    ("flags", "max_bs"),
    [
        (("--sim-hardware", "h200", "--tp", "8"), 512),  # SGLang's H200 default at TP 4 or more
        (("--sim-hardware", "h100", "--tp", "2"), 256),  # and below TP 4
        (("--sim-hardware", "b200", "--tp", "2"), 512),  # 160 GB or more: 512 at any TP
        (("--sim-hardware", "h200", "--tp", "8", "--max-running-requests", "256"), 256),  # a default is capped
        (("--sim-hardware", "h200", "--tp", "8", "--max-running-requests", "256", "--cuda-graph-max-bs", "320"), 320),
        (("--sim-hardware", "mi355x", "--tp", "8", "--cuda-graph-max-bs-decode", "160"), 160),
    ],
)
def test_the_decode_graph_cap_resolves_as_sglangs_memory_settings_do(flags, max_bs):
    args = parse_server_args([*R1, *flags])
    assert args.decode_graph_max_bs == max_bs
    # /server_info shows the flag as given (SGLang resolves the cap into its cuda_graph_config, not the field).
    assert "decode_graph_max_bs" not in args.as_server_info()


def test_a_non_positive_cap_is_refused_naming_the_flag():
    with pytest.raises(ValueError, match="--cuda-graph-max-bs must be positive, got 0"):
        parse_server_args([*R1, "--cuda-graph-max-bs", "0"])


def _bench(*flags: str):
    requests = random_requests(48, 1000, 64, 1.0, seed=3)
    return run_bench([*R1, "--sim-hardware", "h200", "--tp", "8", *flags], requests, max_concurrency=32)


def _passes_lines(engine) -> list[str]:
    text = SimMetrics(engine, "m").render().decode()
    return [line for line in text.splitlines() if line.startswith("sglang:cuda_graph_passes_total")]


def test_decode_steps_past_the_cap_count_as_eager_passes_and_are_not_priced_differently():
    capped, uncapped = _bench("--cuda-graph-max-bs", "16"), _bench()
    graphs, wide = capped.engine.scheduler.graph_passes, uncapped.engine.scheduler.graph_passes
    # 32 at once: the decode steps with more than 16 running ran eagerly, the tail's steps (16 or fewer) replayed.
    assert graphs.eager > 0 and graphs.graph > 0
    assert wide.eager == 0 and wide.graph == graphs.graph + graphs.eager
    lines = _passes_lines(capped.engine)
    assert [line.split('mode="')[1].split('"')[0] for line in lines] == ["decode_cuda_graph", "decode_none"]
    assert lines[1].endswith(f" {float(graphs.eager)}")
    assert [line for line in _passes_lines(uncapped.engine) if "decode_none" in line] == []
    # The fitted decode costs are graph replays, and nothing prices an eager step: the same timings either way.
    assert capped.requests == uncapped.requests and capped.duration_s == uncapped.duration_s


def test_under_dp_attention_the_largest_ranks_batch_is_compared_not_the_servers():
    dp8 = ("--dp", "8", "--enable-dp-attention")
    # 32 running over 8 ranks: 4 a rank, under a cap of 4 though the server runs 32 at once.
    assert _bench(*dp8, "--cuda-graph-max-bs", "4").engine.scheduler.graph_passes.eager == 0
    assert _bench(*dp8, "--cuda-graph-max-bs", "3").engine.scheduler.graph_passes.eager > 0
