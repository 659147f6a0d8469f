"""Run-to-run variation on the twin: off, every run of a window is alike; on, a seed repeats its run exactly and
different seeds give runs that differ by about the sizes docs/twin.md states, around the same centre."""

from __future__ import annotations

import statistics

import pytest

from endpoints.sim.cost.run_variation import DEFAULT_EFFICIENCY_SD, RunVariation, draw_run
from endpoints.sim.server_args import ServerArgsError, parse_server_args
from endpoints.sim.virtual_bench import random_requests, run_bench

FLAGS = ["--model-path", "deepseek-ai/DeepSeek-V3", "--tp", "8"]
REQUESTS = random_requests(64, 1000, 200, 0.5, seed=3)


def _duration(*extra: str) -> float:
    return run_bench([*FLAGS, *extra], REQUESTS, max_concurrency=16).duration_s


def test_off_by_default_every_run_is_alike_and_a_seed_repeats_its_run():
    assert parse_server_args(FLAGS).run_variation is None
    assert _duration() == _duration()
    assert _duration("--sim-run-seed", "7") == _duration("--sim-run-seed", "7")
    assert _duration("--sim-run-seed", "7") != _duration("--sim-run-seed", "8")


def test_seeded_runs_spread_about_the_stated_size_around_the_same_centre():
    durations = [_duration("--sim-run-seed", str(seed)) for seed in range(12)]
    baseline = _duration()
    ratios = [d / baseline for d in durations]
    # Node efficiency sd 2% and a one-sided clock sd 1%: the runs' spread is a few percent, never tens of percent.
    assert 0.005 < statistics.stdev(ratios) < 0.06
    assert abs(statistics.median(ratios) - 1.0) < 0.03


def test_the_draws_follow_the_seed_and_the_clock_never_runs_above_boost():
    draws = [draw_run(RunVariation(seed)) for seed in range(200)]
    assert all(d.clock_factor <= 1.0 for d in draws)
    logs = [d.efficiency_factor for d in draws]
    assert statistics.stdev(logs) == pytest.approx(DEFAULT_EFFICIENCY_SD, rel=0.25)
    assert draw_run(RunVariation(5)) == draw_run(RunVariation(5))


@pytest.mark.parametrize("flag", ["--sim-run-efficiency-sd", "--sim-run-clock-sd", "--sim-step-jitter-sd"])
def test_a_spread_out_of_range_is_refused_by_name(flag):
    with pytest.raises(ServerArgsError, match=f"{flag} must be in \\[0, 0.5\\], got -0.1"):
        parse_server_args([*FLAGS, "--sim-run-seed", "1", flag, "-0.1"])


def test_the_seed_is_in_server_info_so_a_run_can_be_replayed():
    info = parse_server_args([*FLAGS, "--sim-run-seed", "42"]).as_server_info()
    assert info["sim_run_seed"] == 42 and info["sim_run_efficiency_sd"] == DEFAULT_EFFICIENCY_SD
