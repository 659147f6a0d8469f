"""DP attention and disaggregated fleets under load, as SGLang runs them (docs/twin.md, "Whole fleets under load"):
the flags each attention rank resolves to, the rank a request runs on, the busiest rank setting a step, the ranks'
tokens gathered for the MLP, a PD decode server's request slots and running cap, and the closed-loop fleet bench."""

from __future__ import annotations

import random
from collections import deque

import pytest
from test_sim_engine import run

from endpoints.capacity.shadow_canary import server_info_flags
from endpoints.clock import VirtualClock
from endpoints.sim.cost.cost_model import RooflineCostModel
from endpoints.sim.cost.profiles import hardware_profile_for, model_profile_for
from endpoints.sim.cost.step_batch import BatchItem, ForwardMode, StepBatch
from endpoints.sim.engine.disaggregation import Bootstrap
from endpoints.sim.engine.kv_pool import KvPool
from endpoints.sim.engine.sim_request import GenerateInput, SimRequest, planned_output
from endpoints.sim.engine_builder import build_engine
from endpoints.sim.pd_fleet_bench import PdFleet, run_pd_fleet
from endpoints.sim.server_args import parse_server_args
from endpoints.sim.virtual_bench import BenchRequest, random_ids, random_requests

B200 = ("--model-path", "deepseek-ai/DeepSeek-R1-0528", "--sim-hardware", "b200", "--disable-radix-cache")
DP8 = (*B200, "--tp", "8", "--dp", "8", "--enable-dp-attention")


def _engine(*flags: str):
    return build_engine(parse_server_args(list(flags)), VirtualClock())


def _extend(cost_model, ranks: list[int], tokens: int = 4096) -> float:
    return cost_model.step_time_s(StepBatch(ForwardMode.EXTEND, tuple(BatchItem(tokens, 0, rank=r) for r in ranks)))


def test_each_rank_resolves_its_own_chunk_conservativeness_and_running_cap_as_sglang_does():
    args = parse_server_args([*DP8, "--chunked-prefill-size", "65536", "--max-running-requests", "12"])
    # SGLang's _handle_data_parallelism: the chunk split over the ranks, conservativeness x 0.3; /server_info says so.
    assert args.rank_chunked_prefill_size == 8192 and args.resolved_schedule_conservativeness == pytest.approx(0.3)
    info = args.as_server_info()
    assert info["chunked_prefill_size"] == 8192 and info["schedule_conservativeness"] == pytest.approx(0.3)
    # A shadow twin built from that /server_info launches with the chunk the server was launched with.
    flags = server_info_flags(info)
    assert flags[flags.index("--chunked-prefill-size") + 1] == "65536"
    scheduler = _engine(*DP8, "--chunked-prefill-size", "65536", "--max-running-requests", "12").scheduler
    # max(1, 12 // 8) a rank: 8 in all, not 12.
    assert scheduler.init_new_token_ratio == pytest.approx(0.7 * 0.3)
    assert scheduler._config.max_running_requests == 8 and scheduler._config.chunked_prefill_size == 8192
    plain = parse_server_args([*B200, "--tp", "8", "--chunked-prefill-size", "65536"])
    assert plain.rank_chunked_prefill_size == 65536 and plain.resolved_schedule_conservativeness == 1.0


def test_a_pd_prefill_runs_a_request_on_its_rooms_rank_and_each_rank_one_at_a_time():
    engine = _engine(*DP8, "--max-running-requests", "8", "--disaggregation-mode", "prefill")
    scheduler = engine.scheduler
    requests = random_requests(3, 4000, 8, 1.0, seed=2)
    # Rooms 3, 11 and 12: the first two land on rank 3 (room % 8), the third on rank 4.
    for i, (room, request) in enumerate(zip((3, 11, 12), requests, strict=True)):
        spec = GenerateInput(f"r{i}", request.input_ids, 8, ignore_eos=True, bootstrap=Bootstrap("p", 0, room))
        scheduler.add(_sim_request(engine, spec))
    assert [r.dp_rank for r in scheduler.waiting] == [3, 3, 4]
    plan = scheduler.plan_step(0.0)
    assert plan is not None
    # One running request a rank: rank 3's second request waits although rank 4 had room and the budget allows.
    assert sorted(r.rid for r, _ in plan.work) == ["r0", "r2"] and [r.rid for r in scheduler.waiting] == ["r1"]


def _sim_request(engine, spec: GenerateInput) -> SimRequest:
    """The request as the engine makes it, handed to the scheduler directly (no bootstrap wait)."""
    model = engine.model
    plan = planned_output(spec.input_ids, spec.max_new_tokens, True, model.vocab_size, model.eos_token_id)
    return SimRequest(spec, plan, arrival_s=0.0)


def _roofline(*flags: str) -> RooflineCostModel:
    args = parse_server_args(list(flags))
    hardware = hardware_profile_for(args.sim_hardware.value)
    return RooflineCostModel(model_profile_for(args.model_path), hardware, args.parallel, args.kv_dtype_bytes)


def test_the_busiest_rank_sets_an_extend_step_and_the_ranks_tokens_meet_for_the_mlp():
    cost_model = _roofline(*DP8)
    spread, piled = _extend(cost_model, list(range(4))), _extend(cost_model, [0, 0, 0, 0])
    # Four 4k prompts on one rank: its attention alone, on its one GPU, against a quarter of it each on four.
    assert piled > 1.2 * spread
    assert _extend(cost_model, list(range(8))) == pytest.approx(_extend(cost_model, [i % 8 for i in range(8)]))
    batch = StepBatch(ForwardMode.EXTEND, tuple(BatchItem(8192, 0, rank=r) for r in range(8)))
    # Two ring all-reduces a layer of 65,536 x 7,168 BF16 values over NVLink (900 GB/s one way a B200).
    expected_s = 2 * (2 * 7 / 8 * 65536 * 7168 * 2) * 61 / 900e9
    assert cost_model.dp_gather_s(batch) == pytest.approx(expected_s, rel=1e-6)
    decode = StepBatch(ForwardMode.DECODE, tuple(BatchItem(1, 8192, rank=r) for r in range(8)))
    assert cost_model.dp_gather_s(decode) == 0.0
    tp8 = _roofline(*B200, "--tp", "8")
    assert tp8.dp_gather_s(batch) == 0.0


PD = (*B200, "--tp", "8", "--disaggregation-transfer-backend", "nixl")
PREFILL = (*PD, "--disaggregation-mode", "prefill")


def test_a_pd_decode_runs_at_most_its_max_running_and_the_rest_get_their_first_token_when_they_join():
    fleet = PdFleet(PREFILL, 1, (*PD, "--disaggregation-mode", "decode", "--max-running-requests", "4"), 1)
    requests = random_requests(12, 1024, 200, 1.0, seed=5)
    result = run_pd_fleet(fleet, requests).bench
    decode = result.engine
    assert decode.scheduler._config.decode_request_slots == 4 + 8  # SGLang's extra slots: twice a batch of <= 32
    spans = [(r.sent_s + r.ttft_s, r.sent_s + r.e2e_s) for r in result.requests]
    # Only four decode at once: each first token comes when fewer than four others are between theirs and their end.
    assert max(sum(1 for first, end in spans if first <= t < end) for t, _ in spans) == 4
    first_tokens, ends = sorted(first for first, _ in spans), sorted(end for _, end in spans)
    assert first_tokens[4] >= ends[0]  # the fifth joined when the first had finished


def test_the_fleet_bench_drives_closed_loop_after_unmeasured_warmups():
    fleet = PdFleet(PREFILL, 1, (*PD, "--disaggregation-mode", "decode"), 1)
    requests = random_requests(24, 2048, 64, 0.8, seed=7)
    result = run_pd_fleet(fleet, requests, max_concurrency=4, warmups=8).bench
    assert len(result.requests) == 24  # the warm-ups are not measured
    starts = sorted(r.sent_s for r in result.requests)
    assert starts[:4] == [starts[0]] * 4 and starts[4] > starts[0]  # C at once, then one as each ends
    in_flight = max(sum(1 for r in result.requests if r.sent_s <= t < r.sent_s + r.e2e_s) for t in starts)
    assert in_flight == 4
    with pytest.raises(ValueError, match="at least one prefill and one decode"):
        run_pd_fleet(PdFleet(PREFILL, 0, PREFILL, 1), [BenchRequest((1, 2, 3), 4)])


def test_a_pd_prefill_keeps_a_request_slot_until_its_kv_has_been_sent():
    """One slot: the second prompt's prefill starts only once the first one's KV has left, so a slower link delays
    the second request by its own transfer and by the first one's."""
    decode = (*PD, "--disaggregation-mode", "decode")
    requests = random_requests(2, 2048, 4, 1.0, seed=9)

    def gap_s(*link: str) -> float:
        fleet = PdFleet((*PREFILL, "--max-running-requests", "1", *link), 1, decode, 1)
        first, second = sorted(r.ttft_s for r in run_pd_fleet(fleet, requests).bench.requests)
        return second - first

    kv_bytes = 2048 * (512 + 64) * 61 * 2  # the prompt's BF16 latent KV
    extra_s = kv_bytes * (1 / 1e9 - 1 / 50e9)
    assert gap_s("--sim-kv-link-gb-s", "1") - gap_s() == pytest.approx(extra_s, rel=0.1)


def _conversation(engine, turns: int):
    """A chat whose every turn sends the whole history again (a shared prefix growing by ~1,500 tokens a turn), one
    turn after another; returns each turn's cached prompt tokens."""

    async def chat():
        history, cached = random_ids(2000, random.Random(11)), []
        for turn in range(turns):
            prompt = history + random_ids(500, random.Random(turn))
            done = await engine.generate(GenerateInput(f"t{turn}", prompt, 1000, ignore_eos=True))
            cached.append(done.cached_tokens)
            history = prompt + random_ids(1000, random.Random(100 + turn))  # the answer, as the client keeps it
        return cached

    return chat()


def test_each_rank_has_its_own_radix_tree_so_round_robin_scatters_a_conversations_prefix():
    radix_on = ("--model-path", "deepseek-ai/DeepSeek-R1-0528", "--sim-hardware", "b200", "--tp", "8")
    one_tree = run([*radix_on], lambda engine, _clock: _conversation(engine, 9))
    per_rank = run([*radix_on, "--dp", "8", "--enable-dp-attention"], lambda engine, _clock: _conversation(engine, 9))
    # One tree: every turn after the first finds the prompt the turn before it sent.
    assert one_tree[0] == 0 and all(c >= 2000 + 1500 * (t - 1) for t, c in enumerate(one_tree) if t)
    # Eight trees and round robin: turn t runs on rank t % 8, where nothing of this chat was cached until turn 8,
    # which finds turn 0's prompt and what the rank cached with it (SGLang's DataParallelController, per-rank trees).
    assert per_rank[:8] == [0] * 8
    assert 2000 <= per_rank[8] < one_tree[8] / 4


def test_each_rank_admits_from_its_own_kv_pool():
    flags = (*B200, "--tp", "8", "--dp", "2", "--enable-dp-attention")

    async def scenario(engine, clock):
        engine.scheduler.pools[:] = [KvPool(12_000), KvPool(12_000)]
        # Round robin: the long prompts (5,000 tokens) on rank 0, the short ones (500) on rank 1.
        specs = [GenerateInput(f"r{i}", random_ids(5000 if i % 2 == 0 else 500, random.Random(i)), 400, ignore_eos=True)
                 for i in range(12)]  # fmt: skip
        requests = [engine.submit(spec) for spec in specs]
        await clock.sleep_until(clock.now_s() + 0.5)
        running = engine.scheduler.running
        on_rank = [sum(1 for r in running if r.dp_rank == k) for k in (0, 1)]
        assert all(not r.finished for r in requests)
        return on_rank

    on_rank = run([*flags], scenario)
    # Rank 0's pool holds two long requests to their end (2 x 5,401 of 12,000), rank 1's all six short ones: one
    # pool of 24,000 for both would have let rank 0 run four.
    assert on_rank == [2, 6]


def test_a_pd_decodes_ranks_each_have_a_prealloc_queue_and_a_pool():
    engine = _engine(*PD, "--dp", "2", "--enable-dp-attention", "--disaggregation-mode", "decode")
    scheduler = engine.scheduler
    scheduler.pools[:] = [KvPool(12_000), KvPool(12_000)]
    queue = deque()
    for i in range(8):  # round robin on arrival: the long prompts (5,000 tokens) on rank 0, the short (500) on rank 1
        prompt = random_ids(5000 if i % 2 == 0 else 500, random.Random(i))
        spec = GenerateInput(f"r{i}", prompt, 100, ignore_eos=True, bootstrap=Bootstrap("p", 0, i))
        request = _sim_request(engine, spec)
        scheduler.dispatch_transfer(request)
        queue.append(request)
    assert [r.dp_rank for r in queue] == [0, 1] * 4
    taken = scheduler.preallocate(queue, 256)
    # Rank 0's pool takes two 5,000-token prompts (each keeping 256 slots for its decode); its third waits, at the
    # head of rank 0's queue, without holding up rank 1, whose pool takes all four short ones.
    assert [r.rid for r in taken] == ["r0", "r1", "r2", "r3", "r5", "r7"]
    assert [r.rid for r in queue] == ["r4", "r6"]
    assert [p.reserved_tokens for p in scheduler.pools] == [10_000, 2_000]


def test_each_rank_decays_its_own_new_token_ratio():
    flags = (*B200, "--tp", "8", "--dp", "2", "--enable-dp-attention")

    async def scenario(engine, clock):
        scheduler = engine.scheduler
        # One request: round robin puts it on rank 0; rank 1 runs no decode step of its own.
        engine.submit(GenerateInput("r0", random_ids(1000, random.Random(1)), 400, ignore_eos=True))
        await clock.sleep_until(clock.now_s() + 2.0)
        return list(scheduler.ratios), scheduler.new_token_ratio, scheduler.init_new_token_ratio

    (busy, idle), gauge, init = run([*flags], scenario)
    assert idle == init and busy < init  # SGLang's NewTokenRatioTracker is a rank's scheduler's
    assert gauge == pytest.approx((busy + idle) / 2)  # the gauge as the probe averages the ranks' series
