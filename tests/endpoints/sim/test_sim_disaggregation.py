"""Prefill/decode disaggregation on the twin: a prefill and a decode server joined by a KV transfer.

End to end through SGLang's real router in PD mode (smg, real time, real HTTP between the twins' bootstrap port and
the decode), and in-process on the virtual clock where a decode server's KV pool runs short."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from endpoints.clock import VirtualClock
from endpoints.sim.engine.disaggregation import Bootstrap, LocalPrefillPeer
from endpoints.sim.engine.engine import RequestRejected
from endpoints.sim.engine.kv_pool import KvPool
from endpoints.sim.engine.sim_request import GenerateInput
from endpoints.sim.engine_builder import build_engine
from endpoints.sim.server_args import ServerArgsError, parse_server_args
from twin_process import _free_port, running_sim, running_smg

BASE_FLAGS = ["--tp", "8", "--sim-hardware", "h200"]
V3_KV_BYTES_PER_TOKEN = (512 + 64) * 61 * 2  # MLA's latent + rope key, 61 layers, bf16: what one GPU sends a token


def _post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def _samples(url: str) -> dict[str, list]:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def _value(samples: dict, family: str, sample: str | None = None) -> float:
    return sum(s.value for s in samples[family] if s.name == (sample or family))


@pytest.fixture
def pd_router():
    """1P1D behind the real router: a prefill twin (bootstrap port), a decode twin, `smg launch --pd-disaggregation`."""
    bootstrap_port = _free_port()
    prefill_flags = ("--disaggregation-mode", "prefill", "--disaggregation-bootstrap-port", str(bootstrap_port),
                     "--enable-metrics", "--sim-kv-link-gb-s", "2")  # fmt: skip
    with (
        running_sim(*prefill_flags) as (prefill, _),
        running_sim("--disaggregation-mode", "decode", "--enable-metrics") as (decode, _),
    ):
        routing = ["--pd-disaggregation", "--prefill", prefill, str(bootstrap_port), "--decode", decode]
        with running_smg([prefill, decode], routing=routing) as base:
            yield base, prefill, decode


def test_a_request_through_the_pd_router_prefills_on_one_twin_and_decodes_on_the_other(pd_router):
    base, prefill, decode = pd_router
    shared = list(range(10, 2058))  # 2,048 tokens both prompts start with
    first = _post(
        base + "/generate", {"input_ids": [*shared, 7], "sampling_params": {"max_new_tokens": 16, "ignore_eos": True}}
    )
    second = _post(
        base + "/generate", {"input_ids": [*shared, 8], "sampling_params": {"max_new_tokens": 16, "ignore_eos": True}}
    )
    assert first["meta_info"]["completion_tokens"] == second["meta_info"]["completion_tokens"] == 16
    # The prefill's radix cache is the one that hits, and the decode reports what it held.
    assert first["meta_info"]["cached_tokens"] == 0 and second["meta_info"]["cached_tokens"] == 2048
    chat = _post(base + "/v1/chat/completions", {"model": "deepseek-ai/DeepSeek-V3", "max_tokens": 8,
                                                 "messages": [{"role": "user", "content": "hello there"}]})  # fmt: skip
    assert chat["choices"][0]["message"]["content"] and chat["usage"]["completion_tokens"] <= 8

    p, d = _samples(prefill), _samples(decode)
    assert {s.labels["engine_type"] for s in p["sglang:num_requests"]} == {"prefill"}
    assert {s.labels["engine_type"] for s in d["sglang:num_requests"]} == {"decode"}
    # Each request: the first token sampled on the prefill, the rest decoded on the decode server.
    assert _value(p, "sglang:num_requests", "sglang:num_requests_total") == 3
    assert _value(p, "sglang:generation_tokens", "sglang:generation_tokens_total") == 3
    assert (
        _value(d, "sglang:generation_tokens", "sglang:generation_tokens_total")
        == 32 + chat["usage"]["completion_tokens"]
    )
    assert _value(d, "sglang:cached_tokens", "sglang:cached_tokens_total") == 2048
    # The KV's bytes crossed a 2 GB/s link: 2,049 tokens x MLA's bytes per token each for the two /generate.
    assert _value(p, "sglang:kv_transfer_total_mb", "sglang:kv_transfer_total_mb_count") == 3
    sent_mb = 2 * 2049 * V3_KV_BYTES_PER_TOKEN / 1e6
    assert _value(p, "sglang:kv_transfer_total_mb", "sglang:kv_transfer_total_mb_sum") == pytest.approx(
        sent_mb + chat["usage"]["prompt_tokens"] * V3_KV_BYTES_PER_TOKEN / 1e6
    )
    transfer_ms = 2049 * V3_KV_BYTES_PER_TOKEN / 2e9 * 1000 + 1.0  # bytes / 2 GB/s + the 1 ms per transfer
    latencies = _value(p, "sglang:kv_transfer_latency_ms", "sglang:kv_transfer_latency_ms_sum")
    assert latencies > 2 * transfer_ms
    assert first["meta_info"]["e2e_latency"] > transfer_ms / 1000  # the decode waited for it
    for gauge in ("sglang:num_prefill_bootstrap_queue_reqs", "sglang:num_prefill_inflight_queue_reqs"):
        assert _value(p, gauge) == 0
    for gauge in ("sglang:num_decode_prealloc_queue_reqs", "sglang:num_decode_transfer_queue_reqs"):
        assert _value(d, gauge) == 0


def test_a_pd_server_refuses_a_request_the_router_did_not_send_saying_why():
    with running_sim("--disaggregation-mode", "decode") as (decode, _):
        with pytest.raises(urllib.error.HTTPError) as refused:
            _post(decode + "/generate", {"input_ids": [5, 6, 7]})
        assert refused.value.code == 400
        assert "decode server (--disaggregation-mode decode)" in json.loads(refused.value.read())["error"]["message"]
        with pytest.raises(urllib.error.HTTPError) as bad_room:
            _post(decode + "/generate", {"input_ids": [5], "bootstrap_host": "127.0.0.1", "bootstrap_port": 1,
                                         "bootstrap_room": "seven"})  # fmt: skip
        assert "bootstrap_room must be a non-negative integer, got 'seven'" in bad_room.value.read().decode()
        with urllib.request.urlopen(decode + "/health", timeout=30) as health:  # SGLang's fake-bootstrap probe
            assert health.status == 200


def test_the_pd_flags_are_sglangs_and_the_others_are_refused_by_name():
    args = parse_server_args([*BASE_FLAGS, "--disaggregation-mode", "prefill", "--disaggregation-transfer-backend",
                              "nixl", "--disaggregation-bootstrap-port", "9001", "--disaggregation-ib-device", "mlx5_0"])  # fmt: skip
    info = args.as_server_info()
    assert (info["disaggregation_mode"], info["disaggregation_transfer_backend"]) == ("prefill", "nixl")
    assert info["disaggregation_bootstrap_port"] == 9001 and info["sim_kv_link_gb_s"] == 50.0  # the H200's NIC
    with pytest.raises(ServerArgsError, match="--disaggregation-decode-enable-radix-cache is a real SGLang flag"):
        parse_server_args(["--disaggregation-decode-enable-radix-cache"])
    with pytest.raises(ServerArgsError, match="--disaggregation-mode"):
        parse_server_args(["--disaggregation-mode", "both"])


def _generate(rid: str, prompt: int, room: int, max_new: int = 64) -> GenerateInput:
    return GenerateInput(rid, tuple(range(3, 3 + prompt)), max_new, ignore_eos=True,
                         bootstrap=Bootstrap("127.0.0.1", 9000, room))  # fmt: skip


def test_a_decode_server_short_of_kv_queues_the_transfer_until_slots_free():
    """Four 3,000-token prompts, a decode pool of 8,000 slots: two fit with their decode reserve, two wait in the
    prealloc queue (their KV is not sent) until the first two finish, as SGLang's decode prealloc queue does."""
    clock = VirtualClock()

    async def main():
        prefill = build_engine(parse_server_args([*BASE_FLAGS, "--disaggregation-mode", "prefill"]), clock)
        decode = build_engine(parse_server_args([*BASE_FLAGS, "--disaggregation-mode", "decode"]), clock)
        decode.scheduler.pool = KvPool(8000)
        assert prefill.rooms is not None
        decode.peer = LocalPrefillPeer({9000: prefill.rooms})
        for engine in (prefill, decode):
            engine.start()
        try:
            specs = [_generate(f"r{i}", 3000, room=i) for i in range(4)]
            for spec in specs:
                prefill.submit(spec)
            decoding = [decode.submit(spec) for spec in specs]
            await clock.sleep_until(clock.now_s() + 0.05)
            queued = (len(decode.prealloc), len(decode.scheduler.transferring) + len(decode.scheduler.running))
            waiting_prefills = prefill.bootstrapping
            finals = [None] * 4
            for i, request in enumerate(decoding):
                async for update in decode.updates(request):
                    finals[i] = update
            return queued, waiting_prefills, finals
        finally:
            for engine in (prefill, decode):
                await engine.stop()

    (prealloc, admitted), waiting_prefills, finals = clock.run(main())
    assert (prealloc, admitted) == (2, 2)
    assert waiting_prefills == 2  # their prefills wait in the bootstrap queue for the decode's slots
    assert all(f.finished and f.output_tokens == 64 for f in finals)
    first_done = min(f.now_s for f in finals[:2])
    assert min(f.admitted_s for f in finals[2:]) >= first_done  # the queued two start after a slot-holder ends


def test_a_request_without_bootstrap_on_a_prefill_engine_is_rejected():
    clock = VirtualClock()

    async def main():
        prefill = build_engine(parse_server_args([*BASE_FLAGS, "--disaggregation-mode", "prefill"]), clock)
        with pytest.raises(RequestRejected, match="send requests through a PD router"):
            prefill.submit(GenerateInput("x", (5, 6), 4))

    clock.run(main())
