"""The twin's GPU counters (endpoints/sim/engine/gpu_counters.py): scripted steps for the arithmetic, then the
engine in virtual time for the way the busy share follows the load."""

from __future__ import annotations

import asyncio

import pytest

from endpoints.clock import VirtualClock
from endpoints.sim.cost.cost_model import ParallelConfig, RooflineCostModel, StepWork
from endpoints.sim.cost.profiles import HARDWARE_PROFILES, HardwareName, model_profile_for
from endpoints.sim.cost.step_batch import BatchItem, ForwardMode, StepBatch
from endpoints.sim.engine.gpu_counters import GpuCounters, GpuReading
from endpoints.sim.engine.sim_request import GenerateInput
from endpoints.sim.engine.speculative import SpeculativeCostModel, mtp_draft_profile
from endpoints.sim.engine_builder import build_engine
from endpoints.sim.server_args import parse_server_args

PEAK_BYTES_PER_S = 1e12
H200 = HARDWARE_PROFILES[HardwareName.H200]
V3 = model_profile_for("deepseek-ai/DeepSeek-V3")


def test_a_step_counts_busy_compute_and_bytes_in_proportion_to_how_much_of_it_ran():
    counters = GpuCounters(PEAK_BYTES_PER_S, started_s=0.0)
    counters.add_step(10.0, 12.0, StepWork(compute_s=0.5, hbm_bytes=1e12))  # 1 s of bytes at peak
    assert counters.reading(11.0) == GpuReading(11.0, 1.0, 0.25, 0.5)  # half the step has run
    assert counters.reading(20.0) == GpuReading(20.0, 2.0, 0.5, 1.0)
    activity = counters.reading(20.0).activity_since(counters.reading(10.0))
    assert activity is not None
    assert (activity.busy, activity.sm_active, activity.dram_active) == (0.2, 0.05, 0.1)
    assert counters.reading(20.0).activity_since(counters.reading(20.0)) is None  # no time: no share


def test_a_step_cannot_be_more_than_busy():
    counters = GpuCounters(PEAK_BYTES_PER_S, started_s=0.0)
    counters.add_step(0.0, 1.0, StepWork(compute_s=3.0, hbm_bytes=5e12))  # a jittered step shorter than its work
    assert counters.reading(1.0) == GpuReading(1.0, 1.0, 1.0, 1.0)


def test_the_roofline_gives_back_the_bytes_it_timed():
    cost = RooflineCostModel(V3, H200, ParallelConfig(8))
    one = StepBatch(ForwardMode.DECODE, (BatchItem(1, 4000),))
    longer = StepBatch(ForwardMode.DECODE, (BatchItem(1, 8000),))
    # 4000 more tokens of latent KV, (512 + 64) x 61 layers x 2 bytes each, every GPU reading all of it (MLA).
    kv_bytes = 4000 * V3.kv_bytes_per_token(2)
    assert cost.step_work(longer).hbm_bytes - cost.step_work(one).hbm_bytes == pytest.approx(kv_bytes)
    work = cost.step_work(one)
    assert work.compute_s == cost.step_cost(one).compute_s
    assert work.hbm_bytes / H200.hbm_bytes_per_s < cost.step_time_s(one)  # a step moves less than peak allows


def _busy_share(gap_s: float, requests: int = 8, flags: tuple[str, ...] = ()) -> float:
    """Busy share over a gap, then `requests` arrivals `gap_s` apart and the gap after the last."""
    clock = VirtualClock()

    async def main() -> float:
        engine = build_engine(parse_server_args(["--tp", "8", "--sim-hardware", "h200", *flags]), clock)
        engine.start()
        assert engine.gpu is not None
        try:
            start = engine.gpu.reading(clock.now_s())
            await asyncio.sleep(gap_s)
            tasks = []
            for i in range(requests):
                prompt = tuple(range(1000 * i + 3, 1000 * i + 1003))  # no shared prefix
                spec = GenerateInput(f"r{i}", prompt, 32, True, False)
                tasks.append(asyncio.ensure_future(engine.generate(spec)))
                await asyncio.sleep(gap_s)
            await asyncio.gather(*tasks)
            activity = engine.gpu.reading(clock.now_s()).activity_since(start)
            assert activity is not None
            return activity.busy
        finally:
            await engine.stop()

    return clock.run(main())


def test_an_idle_twin_is_not_busy():
    assert _busy_share(gap_s=5.0, requests=0) == 0.0


def test_the_busy_share_follows_the_load():
    light = _busy_share(gap_s=1.0)  # one request at a time (~0.3 s of steps each), then idle
    lighter = _busy_share(gap_s=2.0)
    assert 0.2 < light < 0.5
    assert lighter == pytest.approx(light / 2, rel=0.05)  # half the load, half the busy time


def test_a_saturated_twin_is_busy_nearly_all_the_time():
    assert _busy_share(gap_s=0.01, requests=64) > 0.95  # arrivals faster than it serves: steps back to back


def test_a_speculative_step_counts_the_drafts_work_too():
    args = parse_server_args(["--tp", "8", "--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3",
                              "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"])  # fmt: skip
    assert args.speculative is not None
    target, draft = (
        RooflineCostModel(V3, H200, ParallelConfig(8)),
        RooflineCostModel(mtp_draft_profile(V3), H200, ParallelConfig(8)),
    )
    verify = StepBatch(ForwardMode.DECODE, (BatchItem(4, 2000),))
    later_draft = StepBatch(ForwardMode.DECODE, (BatchItem(1, 2004),))  # each of the draft's 2 later steps: top-1
    expected = (
        target.step_work(verify) + draft.step_work(verify) + draft.step_work(later_draft) + draft.step_work(later_draft)
    )
    work = SpeculativeCostModel(args.speculative, target, draft).step_work(verify)
    assert work.compute_s == pytest.approx(expected.compute_s) and work.hbm_bytes == pytest.approx(expected.hbm_bytes)
