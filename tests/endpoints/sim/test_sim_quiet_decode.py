"""Runs of quiet decode steps (SimEngine._decode_quietly) give exactly what the loop gives step by step."""

from __future__ import annotations

import pytest

from endpoints.clock import VirtualClock
from endpoints.sim.cost.cold_start import ColdStartCostModel
from endpoints.sim.cost.cost_model import GRAMMAR_COSTS, GrammarCostModel, ParallelConfig, RooflineCostModel
from endpoints.sim.cost.profiles import hardware_profile_for, model_profile_for
from endpoints.sim.cost.step_batch import ForwardMode, RankLoad, StepBatch
from endpoints.sim.engine import engine as engine_module
from endpoints.sim.virtual_bench import BenchResult, random_requests, run_bench

R1 = ["--model-path", "deepseek-ai/DeepSeek-R1-0528", "--sim-hardware", "h200"]


@pytest.mark.parametrize("tp", [8, 16])
def test_uniform_decode_is_the_step_cost_of_its_batch(tp: int) -> None:
    roofline = RooflineCostModel(
        model_profile_for("deepseek-ai/DeepSeek-R1-0528"), hardware_profile_for("h200"), ParallelConfig(tp_size=tp)
    )
    wrapped = GrammarCostModel(ColdStartCostModel(roofline, 2.0), GRAMMAR_COSTS["xgrammar"])
    for model in (roofline, wrapped):
        closed_form = model.uniform_decode()
        assert closed_form is not None
        for requests, context in [(1, 0), (1, 999), (7, 12_345), (64, 64_000), (64, 64_064), (300, 2_000_001)]:
            batch = StepBatch(ForwardMode.DECODE, (), (RankLoad.of_uniform(requests, 1, context, 0),))
            work = model.step_work(batch)
            assert closed_form(requests, context) == (model.step_time_s(batch), work.compute_s, work.hbm_bytes)


def test_no_closed_form_under_dp_attention() -> None:
    parallel = ParallelConfig(tp_size=8, dp_size=8, enable_dp_attention=True)
    roofline = RooflineCostModel(
        model_profile_for("deepseek-ai/DeepSeek-R1-0528"), hardware_profile_for("h200"), parallel
    )
    assert roofline.uniform_decode() is None


def _fingerprint(result: BenchResult) -> tuple:
    engine = result.engine
    gpu = engine.gpu
    assert gpu is not None
    return (
        result.requests, result.duration_s, engine.steps, engine.running_request_s, engine.last_step_end_s,
        engine.scheduler.new_token_ratio, engine.scheduler.pool.reserved_tokens, list(engine._decode_window),
        gpu.reading(result.duration_s + 1.0), engine.scheduler.cohort.completed,
    )  # fmt: skip


@pytest.mark.parametrize(
    "flags",
    [
        ["--tp", "8", "--disable-radix-cache"],  # ignore_eos admission, blocked by the KV estimate at times
        ["--tp", "8", "--stream-interval", "3"],
        ["--tp", "8", "--mem-fraction-static", "0.6", "--max-running-requests", "12"],  # admission stopped at the cap
    ],
)
def test_quiet_runs_change_nothing(flags: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0
    quietly = engine_module.SimEngine._decode_quietly

    def counted(self, busy_until_s, most_steps):
        nonlocal calls
        busy_until_s, ran = quietly(self, busy_until_s, most_steps)
        calls += ran
        return busy_until_s, ran

    requests = random_requests(60, 1500, 400, 0.5, seed=4)
    monkeypatch.setattr(engine_module.SimEngine, "_decode_quietly", counted)
    quiet = _fingerprint(run_bench(R1 + flags, requests, 16))
    assert calls > 0  # the runs were taken
    monkeypatch.setattr(engine_module, "uniform_decode_of", lambda model: None)
    stepwise = _fingerprint(run_bench(R1 + flags, requests, 16))
    assert quiet == stepwise


def test_sleep_skipper_moves_time_as_sleep_until() -> None:
    clock = VirtualClock(start_s=3.0)

    async def main() -> list[float]:
        skip = clock.sleep_skipper()
        assert skip is not None
        seen = []
        for t_s in (3.1, 3.1 + 1e-3, 7.25):
            assert skip(t_s)
            seen.append(clock.now_s())
        assert not skip(clock.now_s())  # no time to skip: the ordinary sleep
        return seen

    other = VirtualClock(start_s=3.0)

    async def ordinary() -> list[float]:
        seen = []
        for t_s in (3.1, 3.1 + 1e-3, 7.25):
            await other.sleep_until(t_s)
            seen.append(other.now_s())
        return seen

    assert clock.run(main()) == other.run(ordinary())
