"""Speculative decoding (EAGLE over DeepSeek's MTP head) in the twin: SGLang's flags, exact output lengths,
the configured acceptance, TPOT as the roofline says, and what /server_info, meta_info and /metrics report
(over real HTTP on 127.0.0.1); timings on the virtual clock."""

import asyncio
import random

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from endpoints.clock import VirtualClock
from endpoints.sim.cost.cost_model import ParallelConfig, RooflineCostModel
from endpoints.sim.cost.profiles import HARDWARE_PROFILES, HardwareName, model_profile_for
from endpoints.sim.cost.step_batch import BatchItem, ForwardMode, StepBatch
from endpoints.sim.engine.sim_request import GenerateInput
from endpoints.sim.engine.speculative import AcceptanceSampler, AcceptShape, SpeculativeCostModel, mtp_draft_profile
from endpoints.sim.engine_builder import build_engine
from endpoints.sim.http.server import create_app
from endpoints.sim.server_args import ServerArgsError, parse_server_args
from endpoints.sim.virtual_bench import BenchRequest, random_ids, run_bench
from replay.clients.sglang_client import parse_event

BASE = ["--tp", "8", "--sim-hardware", "b200"]
# Calibration row 8's MTP flags, as InferenceX passes them to SGLang.
ROW8_MTP = ["--speculative-algorithm", "EAGLE", "--speculative-num-steps", "2", "--speculative-num-draft-tokens", "3",
            "--speculative-eagle-topk", "1"]  # fmt: skip
SPEC_KEYS = {
    "spec_accept_rate", "spec_accept_length", "spec_num_correct_drafts", "spec_num_proposed_drafts", "spec_verify_ct",
    "spec_accepted_drafts", "spec_proposed_drafts", "spec_correct_drafts_histogram", "spec_accept_histogram",
}  # fmt: skip


# -- flags ----------------------------------------------------------------------------------------------


def test_the_twin_takes_sglangs_speculative_flags_and_resolves_them_as_sglang_does():
    row8 = parse_server_args(BASE + ROW8_MTP + ["--max-running-requests", "256"])
    spec = row8.speculative
    assert (spec.algorithm, spec.num_steps, spec.eagle_topk, spec.num_draft_tokens) == ("EAGLE", 2, 1, 3)
    assert row8.max_running_requests == 256
    info = row8.as_server_info()
    assert info["speculative_algorithm"] == "EAGLE" and info["speculative_num_draft_tokens"] == 3
    assert info["speculative_draft_model_path"] == info["model_path"]  # DeepSeek drafts with its own MTP head

    nextn = parse_server_args(BASE + ["--speculative-algo", "NEXTN"])  # the docs' spelling; NEXTN runs as EAGLE
    assert nextn.speculative.algorithm == "EAGLE"
    assert (nextn.speculative.num_steps, nextn.speculative.eagle_topk, nextn.speculative.num_draft_tokens) == (3, 1, 4)
    assert nextn.max_running_requests == 48  # "Max running requests is reset to 48 for speculative decoding."
    # With topk 1 the draft tokens are steps + 1, whatever was asked.
    adjusted = parse_server_args(BASE + ["--speculative-algorithm", "EAGLE", "--speculative-num-steps", "4",
                                         "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "8"])  # fmt: skip
    assert adjusted.speculative.num_draft_tokens == 5
    off = parse_server_args(BASE)
    assert off.speculative is None and off.as_server_info()["speculative_algorithm"] is None


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--speculative-algorithm", "EAGLE3"], "EAGLE3"),  # needs a separate draft model: not modelled
        (["--speculative-algorithm", "NGRAM"], "NGRAM"),
        (["--speculative-algorithm", "EAGLE", "--speculative-accept-threshold-single", "0.5"], "threshold-single"),
        (["--speculative-num-steps", "2"], "--speculative-algorithm"),
        (["--speculative-algorithm", "EAGLE", "--speculative-eagle-topk", "1"], "--speculative-num-steps"),
        (["--speculative-algorithm", "EAGLE", "--sim-spec-accept-length", "3.5"] + ROW8_MTP[2:], "accept-length"),
    ],
)
def test_what_the_twin_does_not_model_or_sglang_refuses_is_refused_by_name(flags, named):
    with pytest.raises(ServerArgsError, match=named):
        parse_server_args(BASE + flags)


# -- the acceptance draws -------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", list(AcceptShape))
@pytest.mark.parametrize(("max_drafts", "length"), [(2, 2.19), (3, 1.4), (3, 3.6), (1, 1.5)])
def test_the_acceptance_draws_have_the_configured_mean(shape, max_drafts, length):
    sampler = AcceptanceSampler(max_drafts, length, shape, random.Random(7))
    assert sampler.mean_drafts == pytest.approx(length - 1, abs=1e-9)
    draws = [sampler.draw() for _ in range(100_000)]
    assert set(draws) <= set(range(max_drafts + 1))
    assert sum(draws) / len(draws) == pytest.approx(length - 1, abs=0.01)
    if shape is AcceptShape.POINT:  # the two whole numbers either side of the mean, nothing else
        assert set(draws) <= {int(length - 1), int(length - 1) + 1}
    else:  # each further draft is accepted with the same chance given the one before was
        p = sampler.probabilities
        survive = [sum(p[k:]) for k in range(max_drafts + 1)]
        ratios = [survive[k + 1] / survive[k] for k in range(max_drafts)]
        assert ratios == pytest.approx([ratios[0]] * max_drafts)


def test_the_served_acceptance_length_is_the_configured_one():
    requests = [BenchRequest(random_ids(256, random.Random(i)), 600) for i in range(64)]
    flags = BASE + ROW8_MTP + ["--sim-spec-accept-length", "2.4", "--sim-spec-seed", "3"]
    result = run_bench(flags, requests, 64)
    assert result.engine.scheduler.speculative.avg_accept_length() == pytest.approx(2.4, abs=0.03)


# -- exact lengths ----------------------------------------------------------------------------------------


def test_mtp_decode_emits_exactly_the_requested_output_length():
    lengths = [1, 2, 3, 4, 5, 6, 7, 17, 100, 257]
    requests = [BenchRequest(random_ids(64, random.Random(n)), n) for n in lengths]
    for flags in (ROW8_MTP, ["--speculative-algorithm", "NEXTN", "--sim-spec-accept-length", "4"]):
        result = run_bench(BASE + flags, requests, 4)
        assert [t.output_tokens for t in result.requests] == lengths


def test_without_ignore_eos_mtp_stops_where_plain_decoding_stops():
    """Speculation is lossless: the same prompt ends at the same token with the same reason."""

    def finals(flags):
        clock = VirtualClock()

        async def main():
            engine = build_engine(parse_server_args(BASE + flags), clock)
            engine.start()
            try:
                asks = [GenerateInput(f"r{i}", random_ids(40, random.Random(i)), 200) for i in range(12)]
                return await asyncio.gather(*(engine.generate(a) for a in asks))
            finally:
                await engine.stop()

        return [(u.output_tokens, u.finish_reason) for u in clock.run(main())]

    plain = finals([])
    assert finals(ROW8_MTP + ["--sim-spec-accept-length", "2.9"]) == plain
    assert any(reason["type"] == "stop" for _, reason in plain)


# -- timing, on the virtual clock -----------------------------------------------------------------------

# Every prompt prefilled in one step, so every request decodes from the same moment and TPOT is decode only.
ONE_PREFILL = BASE + ["--disable-radix-cache", "--kv-cache-dtype", "fp8_e4m3", "--max-running-requests", "2048",
                      "--chunked-prefill-size", "-1", "--max-prefill-tokens", "1000000"]  # fmt: skip
POINT_MTP = ROW8_MTP + ["--sim-spec-accept-shape", "point"]


def _tpot_s(batch: int, extra: list[str], prompt: int = 1024, output: int = 64) -> float:
    requests = [BenchRequest(random_ids(prompt, random.Random(i)), output) for i in range(batch)]
    return run_bench(ONE_PREFILL + extra, requests, batch).mean_tpot_s


def test_a_lone_request_decodes_as_the_roofline_says():
    """TPOT of one request = verify + MTP draft steps per iteration over the tokens each iteration gains."""
    model = model_profile_for("deepseek-ai/DeepSeek-V3")
    hardware, parallel = HARDWARE_PROFILES[HardwareName.B200], ParallelConfig(tp_size=8)
    spec = parse_server_args(ONE_PREFILL + POINT_MTP + ["--sim-spec-accept-length", "3"]).speculative
    target = RooflineCostModel(model, hardware, parallel, 1)
    iteration = SpeculativeCostModel(spec, target, RooflineCostModel(mtp_draft_profile(model), hardware, parallel, 1))
    prompt, output = 1024, 64  # the first token comes from prefill, then 21 verifies of 3 tokens each

    def decode(mode_tokens: int, gained: int, cost) -> float:
        steps = range(0, output - 1, gained)
        return sum(
            cost.step_time_s(StepBatch(ForwardMode.DECODE, (BatchItem(mode_tokens, prompt + k),))) for k in steps
        )

    expected_spec_s = decode(3, 3, iteration) / (output - 1)
    expected_plain_s = decode(1, 1, target) / (output - 1)
    assert _tpot_s(1, POINT_MTP + ["--sim-spec-accept-length", "3"]) == pytest.approx(expected_spec_s, rel=1e-6)
    assert _tpot_s(1, []) == pytest.approx(expected_plain_s, rel=1e-6)


def test_tpot_falls_with_acceptance_at_small_batch_and_the_gain_shrinks_at_large_batch():
    plain_1 = _tpot_s(1, [], prompt=256)
    spec_1 = [_tpot_s(1, POINT_MTP + ["--sim-spec-accept-length", str(n)], prompt=256) for n in (1, 2, 3)]
    # Nothing accepted: each token pays a verify (wider than a decode) plus the draft steps, so it is slower.
    assert spec_1[0] > plain_1
    assert spec_1[0] > spec_1[1] > spec_1[2]  # every accepted draft is a token without a target step
    # At batch 1 a verify costs about a decode step (launch overheads dominate): the gain nears 1 + accepted.
    assert plain_1 / spec_1[2] > 2.4

    def gain(batch: int) -> float:  # two drafts accepted per verify
        accepted = POINT_MTP + ["--sim-spec-accept-length", "3"]
        return _tpot_s(batch, [], prompt=256) / _tpot_s(batch, accepted, prompt=256)

    # At batch 32 the verify's 96 tokens touch far more experts than the decode's 32 (the cookbook: MTP is
    # 1.8x at batch 1 and 1.5x at batch 32 on 8xH200); at 256 every expert is read either way; at 2048 the
    # verify's 6144 tokens make the GEMMs compute-bound and a verify costs nearly three decode steps.
    gains = {batch: gain(batch) for batch in (1, 32, 256, 2048)}
    assert gains[32] < gains[1] - 0.2
    assert gains[2048] < 0.6 * gains[256]


# -- what the server reports, over real HTTP ---------------------------------------------------------------


def serve(flags: list[str], scenario):
    async def main():
        app = create_app(parse_server_args(BASE + flags))
        async with TestServer(app, host="127.0.0.1", port=0) as server, TestClient(server) as client:
            return await scenario(client)

    return asyncio.run(main())


def _events(body: str) -> list[bytes]:
    return [e[len("data: ") :].encode() for e in body.split("\n\n") if e and e != "data: [DONE]"]


def _payload(seed: int, n: int, stream: bool) -> bytes:
    ids = list(random_ids(48, random.Random(seed)))
    params = {"max_new_tokens": n, "ignore_eos": True}
    return orjson.dumps({"input_ids": ids, "sampling_params": params, "stream": stream})


def test_meta_info_carries_sglangs_spec_fields_on_the_final_chunk():
    async def scenario(client):
        streamed = await (await client.post("/generate", data=_payload(1, 40, True))).text()
        whole = await (await client.post("/generate", data=_payload(2, 33, False))).json()
        return streamed, whole

    streamed, whole = serve(ROW8_MTP + ["--stream-interval", "4"], scenario)
    events = _events(streamed)
    assert all(not SPEC_KEYS & orjson.loads(e)["meta_info"].keys() for e in events[:-1])  # final chunk only
    final = parse_event(events[-1])["meta_info"]  # the replay client's fast meta_info path reads it whole
    for meta, n in ((final, 40), (whole["meta_info"], 33)):
        assert SPEC_KEYS <= meta.keys() and meta["completion_tokens"] == n
        verifies, correct = meta["spec_verify_ct"], meta["spec_num_correct_drafts"]
        assert n == 1 + verifies + correct  # the prefill's token, then 1 + accepted per verify
        assert meta["spec_accept_length"] == pytest.approx(n / verifies)  # SGLang: completion_tokens / verify_ct
        assert meta["spec_num_proposed_drafts"] == 2 * verifies  # num_draft_tokens - 1 per verify
        assert meta["spec_accept_rate"] == pytest.approx(correct / (2 * verifies))
        histogram = meta["spec_correct_drafts_histogram"]
        assert sum(histogram) == verifies and sum(k * h for k, h in enumerate(histogram)) == correct
        assert len(histogram) <= 3 and meta["spec_accept_histogram"] == histogram  # SGLang's alias
        assert (meta["spec_accepted_drafts"], meta["spec_proposed_drafts"]) == (correct, 2 * verifies)


def test_a_twin_without_speculation_reports_no_spec_fields_and_zero_spec_gauges():
    async def scenario(client):
        body = await (await client.post("/generate", data=_payload(2, 33, False))).json()
        info = await (await client.get("/server_info")).json()
        metrics = await (await client.get("/metrics")).text()
        return body, info, metrics

    body, info, metrics = serve(["--enable-metrics"], scenario)
    assert not SPEC_KEYS & body["meta_info"].keys()
    assert info["internal_states"][0]["avg_spec_accept_length"] is None and info["speculative_algorithm"] is None
    # SGLang exports its speculative gauges whatever the server runs, at its stats' default 0.
    assert _metric(metrics, "sglang:spec_accept_length") == 0.0 == _metric(metrics, "sglang:spec_accept_rate")


def test_server_info_and_metrics_report_the_acceptance():
    async def scenario(client):
        before = await (await client.get("/server_info")).json()
        bodies = await asyncio.gather(
            *(client.post("/generate", data=_payload(i, 30 + 7 * i, False)) for i in range(6))
        )
        metas = [(await b.json())["meta_info"] for b in bodies]
        after = await (await client.get("/server_info")).json()
        metrics = await (await client.get("/metrics")).text()
        return before, metas, after, metrics

    flags = ROW8_MTP + ["--enable-metrics", "--sim-spec-accept-length", "2.5"]
    before, metas, after, metrics = serve(flags, scenario)
    assert before["internal_states"][0]["avg_spec_accept_length"] is None  # no verify yet
    assert after["speculative_algorithm"] == "EAGLE" and after["sim_spec_accept_length"] == 2.5
    verifies = sum(m["spec_verify_ct"] for m in metas)
    gained = sum(m["completion_tokens"] - 1 for m in metas)  # every token but the prefill's came from a verify
    assert after["internal_states"][0]["avg_spec_accept_length"] == pytest.approx(gained / verifies)
    assert _metric(metrics, "sglang:spec_verify_calls_total") == verifies
    assert 1.0 <= _metric(metrics, "sglang:spec_accept_length") <= 3.0
    assert 0.0 <= _metric(metrics, "sglang:spec_accept_rate") <= 1.0


def _metric(exposition: str, name: str) -> float:
    """The one series of `name` (whatever its labels), from Prometheus text."""
    [value] = [
        float(line.rsplit(" ", 1)[1])
        for line in exposition.splitlines()
        if line.startswith(name) and line[len(name)] in "{ "
    ]
    return value


@pytest.mark.timeout(60)
def test_a_replay_against_an_mtp_twin_records_exact_lengths_and_the_spec_configuration(tmp_path):
    from endpoints.fingerprint import config_fingerprint
    from endpoints_loopback import serve_in_thread
    from replay.recording.requests_reader import read_requests
    from replay.runner import ReplayConfig, run_replay
    from replay_sglang_peer import make_workload

    workload = make_workload([0.0, 0.05, 0.1, 0.15], input_tokens=24, output_tokens=13)
    with serve_in_thread(create_app(parse_server_args(BASE + ROW8_MTP))) as url:
        run = run_replay(workload, ReplayConfig(url=url, request_timeout_s=30), tmp_path)
    rows = read_requests(tmp_path).to_pylist()
    assert run.requests_ok == len(rows) == 4, [(r["error_kind"], r["error_message"]) for r in rows]
    assert all(r["completion_tokens"] == 13 and r["finish_reason"] == "length" for r in rows)
    facts = config_fingerprint(run.server_info, "m").facts
    assert (facts["speculative_algorithm"], facts["speculative_num_draft_tokens"]) == ("EAGLE", 3)


def test_a_verify_step_is_priced_alike_whatever_was_priced_before():
    """The cost models remember the last batches they priced (a step's time, then its work, read the same batch):
    a verify step's time and work equal a fresh model's to the last bit, whatever order batches come in, repeats
    included."""
    model = model_profile_for("deepseek-ai/DeepSeek-V3")
    hardware, parallel = HARDWARE_PROFILES[HardwareName.H200], ParallelConfig(tp_size=8)
    spec = parse_server_args(ONE_PREFILL + POINT_MTP + ["--sim-spec-accept-length", "3"]).speculative

    def fresh() -> SpeculativeCostModel:
        draft = RooflineCostModel(mtp_draft_profile(model), hardware, parallel, 1)
        return SpeculativeCostModel(spec, RooflineCostModel(model, hardware, parallel, 1), draft)

    batches = [StepBatch(ForwardMode.DECODE, tuple(BatchItem(4, 900 + 50 * k) for k in range(n))) for n in (1, 9, 64)]
    batches.append(StepBatch(ForwardMode.EXTEND, (BatchItem(512, 0),)))
    remembering = fresh()
    for batch in [*batches, batches[1], *reversed(batches), batches[0], batches[0]]:
        alone = fresh()
        assert (remembering.step_time_s(batch), remembering.step_work(batch)) == (
            alone.step_time_s(batch), alone.step_work(batch)), batch  # fmt: skip
        assert remembering.step_work(batch) == alone.step_work(batch)
