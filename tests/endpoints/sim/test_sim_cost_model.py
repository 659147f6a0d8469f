"""The twin's step-time roofline, its profiles and KV sizing."""

import re
from pathlib import Path

import pytest

from endpoints.clock import VirtualClock
from endpoints.sim.cost.cost_model import ParallelConfig, RooflineCostModel
from endpoints.sim.cost.profiles import (
    HARDWARE_PROFILES,
    HardwareName,
    UnknownProfileError,
    Vendor,
    cost_constants_for,
    hardware_profile_for,
    model_profile_for,
)
from endpoints.sim.cost.step_batch import BatchItem, ForwardMode, StepBatch
from endpoints.sim.engine.kv_pool import RUNTIME_RESERVE_BYTES, KvSizingError, kv_capacity_tokens
from endpoints.sim.engine.speculative import mtp_draft_profile
from endpoints.sim.engine_builder import build_engine
from endpoints.sim.server_args import parse_server_args

V3 = model_profile_for("deepseek-ai/DeepSeek-V3")
TP8 = ParallelConfig(tp_size=8)


def decode(batch_size: int, context: int = 1000, ranks: int = 1) -> StepBatch:
    """`ranks`: the requests spread evenly over that many DP-attention ranks, as the scheduler dispatches them."""
    return StepBatch(ForwardMode.DECODE, tuple(BatchItem(1, context, rank=i % ranks) for i in range(batch_size)))


def model_on(gpu: HardwareName, parallel: ParallelConfig = TP8) -> RooflineCostModel:
    return RooflineCostModel(V3, HARDWARE_PROFILES[gpu], parallel)


def test_profiles_carry_the_deepseek_config_numbers():
    assert V3.kv_bytes_per_token(2) == 70_272 and V3.kv_bytes_per_token(1) == 35_136
    assert V3.routed_expert_params == pytest.approx(653.9e9, rel=1e-3)
    assert model_profile_for("/models/DeepSeek-R1-0528").name == "DeepSeek-R1"
    with pytest.raises(UnknownProfileError, match="llama"):
        model_profile_for("meta/llama-3-70b")
    with pytest.raises(UnknownProfileError, match="--sim-hardware"):
        hardware_profile_for("a100")


def test_distinct_experts_follow_the_coverage_formula():
    cost = model_on(HardwareName.H200)
    assert cost.distinct_experts_per_layer(1) == pytest.approx(8)
    assert cost.distinct_experts_per_layer(16) == pytest.approx(256 * (1 - (1 - 8 / 256) ** 16))
    assert 250 < cost.distinct_experts_per_layer(256) < 256


def test_b200_batch_one_decodes_near_the_published_rate():
    tok_s = 1.0 / model_on(HardwareName.B200).step_time_s(decode(1, context=500))
    assert 60 <= tok_s <= 160  # calibration row 1: ~105 tok/s


def test_decode_step_grows_sublinearly_so_throughput_rises_with_batch():
    cost = model_on(HardwareName.H200)
    sizes = [1, 4, 16, 64, 256]
    times = [cost.step_time_s(decode(b)) for b in sizes]
    throughputs = [b / t for b, t in zip(sizes, times)]
    assert times == sorted(times)  # a bigger batch never steps faster
    assert throughputs == sorted(throughputs) and throughputs[-1] > 20 * throughputs[0]


def test_longer_contexts_make_decode_slower():
    cost = model_on(HardwareName.H200)
    assert cost.step_time_s(decode(64, context=32_000)) > 1.5 * cost.step_time_s(decode(64, context=1_000))


def test_cached_prefix_tokens_cost_no_prefill():
    cost = model_on(HardwareName.H200)
    cold = cost.step_cost(StepBatch(ForwardMode.EXTEND, (BatchItem(new_tokens=16_000, context_tokens=0),)))
    warm = cost.step_cost(StepBatch(ForwardMode.EXTEND, (BatchItem(new_tokens=1_000, context_tokens=15_000),)))
    assert warm.compute_s < cold.compute_s / 5
    assert warm.total_s < cold.total_s


def test_faster_gpus_step_faster():
    batch = decode(64)
    assert model_on(HardwareName.B200).step_time_s(batch) < model_on(HardwareName.H200).step_time_s(batch)
    assert model_on(HardwareName.H200).step_time_s(batch) < model_on(HardwareName.H100).step_time_s(batch)


def test_dp_attention_splits_kv_reads():
    long_batch = decode(128, context=30_000, ranks=8)
    tp_only = model_on(HardwareName.H200).step_cost(long_batch)
    dp_attn = model_on(HardwareName.H200, ParallelConfig(8, 8, True)).step_cost(long_batch)
    # All 128 on one rank: that rank reads all of their KV, as one TP server's GPUs do.
    piled = model_on(HardwareName.H200, ParallelConfig(8, 8, True)).step_cost(decode(128, context=30_000))
    assert piled.memory_s == pytest.approx(tp_only.memory_s)
    assert dp_attn.memory_s < tp_only.memory_s


def test_kv_capacity_is_sized_from_memory_left_after_weights():
    h200 = HARDWARE_PROFILES[HardwareName.H200]
    bf16 = kv_capacity_tokens(V3, h200, TP8, 0.88, kv_dtype_bytes=2)
    assert 300_000 < bf16 < 800_000  # ~38 GB per GPU of 70 KB tokens, not sharded by TP
    assert kv_capacity_tokens(V3, h200, TP8, 0.88, kv_dtype_bytes=1) == pytest.approx(2 * bf16, abs=2)
    assert kv_capacity_tokens(V3, h200, ParallelConfig(8, 8, True), 0.88, 2) == 8 * bf16
    with pytest.raises(KvSizingError, match="--tp-size 8"):
        kv_capacity_tokens(V3, HARDWARE_PROFILES[HardwareName.H100], TP8, 0.88, 2)


def _docs_gpu_table() -> dict[str, tuple[float, float, float, float]]:
    """docs/twin.md's GPU table: name -> (HBM GB, TB/s, dense BF16 TFLOP/s, dense FP8 TFLOP/s)."""
    text = (Path(__file__).resolve().parents[3] / "docs" / "twin.md").read_text()
    number = r"([\d,.]+)"
    row = rf"^\| ([\w ]+?) \| {number} GB \| {number} TB/s \| {number} TFLOP/s \| {number} TFLOP/s \|"
    return {
        m.group(1): tuple(float(g.replace(",", "")) for g in m.groups()[1:])
        for m in re.finditer(row, text, flags=re.MULTILINE)
    }


def test_every_gpu_profile_has_the_datasheet_figures_docs_twin_md_gives():
    table = _docs_gpu_table()
    assert {"MI300X", "MI325X", "MI355X", "H200 SXM"} <= set(table)
    for profile in HARDWARE_PROFILES.values():
        hbm_gb, tb_s, bf16, fp8 = table[profile.name]
        assert profile.hbm_bytes == hbm_gb * 2**30  # datasheet GB are binary (nvidia-smi, rocm-smi)
        assert profile.hbm_bytes_per_s == pytest.approx(tb_s * 1e12)
        assert profile.bf16_flops_per_s == pytest.approx(bf16 * 1e12)
        assert profile.fp8_flops_per_s == pytest.approx(fp8 * 1e12)


def test_amd_gpus_use_the_amd_constants_and_mi325x_holds_r1_at_tp8():
    mi325x = hardware_profile_for("mi325x")
    assert mi325x.vendor is Vendor.AMD and hardware_profile_for("h200").vendor is Vendor.NVIDIA
    assert model_on(HardwareName.MI325X).constants == cost_constants_for(Vendor.AMD)
    assert cost_constants_for(Vendor.AMD) != cost_constants_for(Vendor.NVIDIA)
    # Row 9's server: 256 GB per GPU, --mem-fraction-static 0.8, FP8 KV: millions of tokens of pool.
    assert kv_capacity_tokens(V3, mi325x, TP8, 0.8, kv_dtype_bytes=1) > 3_000_000


def test_weights_per_gpu_follow_sglangs_tp_layout_and_mtp_pays_for_its_draft_out_of_the_pool():
    # DeepSeek under TP8 in SGLang: MLA's down-projections and the router replicated, embedding and head BF16
    # split by vocabulary, the rest FP8 split 8 ways: 85.1 GB a GPU, more than 671 GB / 8 = 83.9 GB.
    assert V3.weight_bytes_per_gpu(8) == pytest.approx(85.11e9, rel=1e-3)
    assert V3.weight_bytes_per_gpu(16) < V3.weight_bytes_per_gpu(8) / 1.9  # replicated parts do not halve
    h200 = HARDWARE_PROFILES[HardwareName.H200]
    # (141 GiB - the runtime reserve) x 0.82 - 85.1 GB, over 70,272 B a token (row 7's and 8's servers).
    budget = (141 * 2**30 - RUNTIME_RESERVE_BYTES) * 0.82
    expected = int((budget - V3.weight_bytes_per_gpu(8)) // 70_272)
    assert kv_capacity_tokens(V3, h200, TP8, 0.82, kv_dtype_bytes=2) == expected
    r1 = "--model-path deepseek-ai/DeepSeek-R1 --tp 8 --sim-hardware h200 --mem-fraction-static 0.82".split()
    plain = build_engine(parse_server_args(r1), VirtualClock())
    mtp = build_engine(parse_server_args([*r1, "--speculative-algorithm", "EAGLE"]), VirtualClock())
    assert plain.scheduler.pool.capacity_tokens == expected
    # SGLang 0.5.19+ loads the NextN layer before it sizes the pool, and a slot holds the draft layer's KV too
    # (62 layers of 576 BF16 values, not 61); the draft's embedding and head are the target's.
    draft = mtp_draft_profile(V3)
    draft_bytes = draft.weight_bytes_per_gpu(8) - draft.embedding_and_head_bytes_per_gpu(8)
    assert 1.2e9 < draft_bytes < 1.7e9  # the 11.5B-parameter layer, FP8, split 8 ways (its router replicated)
    with_draft = int((budget - V3.weight_bytes_per_gpu(8) - draft_bytes) // (70_272 + 1_152))
    assert mtp.scheduler.pool.capacity_tokens == with_draft
    assert 0.94 < with_draft / expected < 0.96


@pytest.mark.parametrize("parallel", [TP8, ParallelConfig(tp_size=16)], ids=["tp8", "tp16 (two nodes)"])
def test_the_one_rank_shortcut_costs_a_step_as_the_general_path_does(parallel):
    """RooflineCostModel._step_cost's one-rank path (every step of a server without DP attention or EP) must give
    the general path's costs to the last bit: decodes, prefills and mixed batches of every size seen."""
    fast, general = model_on("h200", parallel), model_on("h200", parallel)
    assert fast._one_rank
    general._one_rank = False  # the general path, for the same batches
    batches = [decode(n, context) for n in (1, 7, 64, 300) for context in (0, 900, 30_000)]
    batches += [
        StepBatch(ForwardMode.EXTEND, (BatchItem(chunk, done), *(BatchItem(1, 2_000) for _ in range(decodes))))
        for chunk in (1, 512, 8_192) for done in (0, 4_000) for decodes in (0, 5)
    ]  # fmt: skip
    for batch in batches:
        assert fast._step_cost(batch) == general._step_cost(batch), batch
