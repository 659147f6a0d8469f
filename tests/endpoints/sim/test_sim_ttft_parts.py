"""Where the time to first token goes (endpoints/sim/engine/ttft_parts.py): the parts of every request's TTFT add up
to the TTFT the client sees, on one server and across a prefill and a decode server; a request the decode's full pool
holds back shows it in its prealloc part; and the twin's meta_info carries them beside SGLang's own timings."""

from __future__ import annotations

import asyncio
import random
import socket

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from endpoints.clock import VirtualClock
from endpoints.sim.engine.disaggregation import Bootstrap, LocalPrefillPeer
from endpoints.sim.engine.kv_pool import KvPool
from endpoints.sim.engine_builder import build_engine
from endpoints.sim.http.server import create_app
from endpoints.sim.server_args import parse_server_args
from endpoints.sim.virtual_bench import (
    BenchRequest,
    RequestTiming,
    mean_ttft_parts_ms,
    random_ids,
    run_bench,
    timed_request,
)
from twin_virtual import serve

V3_H200 = ["--tp", "8", "--sim-hardware", "h200"]


def _requests(count: int, prompt_tokens: int, output_tokens: int, every_s: float) -> list[BenchRequest]:
    rng = random.Random(11)
    return [BenchRequest(random_ids(prompt_tokens, rng), output_tokens, arrival_s=i * every_s) for i in range(count)]


def _pd_bench(requests: list[BenchRequest], decode_pool_tokens: int | None = None) -> list[RequestTiming]:
    """1P+1D in virtual time, engine to engine: each request sent to both, its TTFT timed on the decode's stream."""
    clock = VirtualClock()

    async def main() -> list[RequestTiming]:
        prefill = build_engine(parse_server_args([*V3_H200, "--disaggregation-mode", "prefill"]), clock)
        decode = build_engine(parse_server_args([*V3_H200, "--disaggregation-mode", "decode"]), clock)
        if decode_pool_tokens is not None:
            decode.scheduler.pool = KvPool(decode_pool_tokens)
        assert prefill.rooms is not None
        decode.peer = LocalPrefillPeer({0: prefill.rooms})
        for engine in (prefill, decode):
            engine.start()
        start_s = clock.now_s()

        async def client(i: int, request: BenchRequest) -> RequestTiming:
            await clock.sleep_until(start_s + request.arrival_s)
            return await timed_request(decode, i, request, prefill, Bootstrap("prefill-0", 0, i))

        try:
            return list(await asyncio.gather(*(client(i, r) for i, r in enumerate(requests))))
        finally:
            for engine in (prefill, decode):
                await engine.stop()

    return clock.run(main())


def test_a_unified_servers_parts_are_its_queue_and_prefill_and_add_up_to_each_ttft():
    result = run_bench(V3_H200, _requests(40, 3000, 32, every_s=0.05))
    for r in result.requests:
        parts = r.ttft_parts
        assert parts is not None and set(parts.named()) == {"queue", "prefill"}
        assert parts.total_ms == pytest.approx(r.ttft_s * 1e3, abs=1e-9)
        assert parts.queue_ms >= 0 and parts.prefill_ms > 0
    assert max(r.ttft_parts.queue_ms for r in result.requests if r.ttft_parts) > 0  # arrivals every 50 ms queue
    means = mean_ttft_parts_ms(result.requests)
    assert list(means) == ["queue", "prefill"]
    assert sum(means.values()) == pytest.approx(result.mean_ttft_s * 1e3)


def test_a_disaggregated_requests_parts_add_up_to_the_ttft_its_decode_server_streams():
    timings = _pd_bench(_requests(20, 3000, 16, every_s=0.1))
    link_ms = 3000 * (512 + 64) * 61 * 2 / 50e9 * 1e3 + 1.0  # the KV over H200's 50 GB/s NIC, + 1 ms a transfer
    for r in timings:
        parts = r.ttft_parts
        assert parts is not None
        assert list(parts.named()) == ["prealloc", "bootstrap", "queue", "prefill", "kv_transfer", "decode_wait"]
        assert parts.total_ms == pytest.approx(r.ttft_s * 1e3, abs=1e-9)
        assert parts.kv_transfer_ms == pytest.approx(link_ms)
        assert parts.prefill_ms > 0 and parts.decode_wait_ms >= 0 and parts.prealloc_ms >= 0
        assert parts.bootstrap_ms == pytest.approx(0, abs=1e-9)  # engine to engine: the notices take no time
    means = mean_ttft_parts_ms(timings)
    assert sum(means.values()) == pytest.approx(sum(r.ttft_s for r in timings) / len(timings) * 1e3)


def test_a_request_the_decode_pool_cannot_hold_yet_waits_in_its_prealloc_part():
    """Four 3,000-token prompts at once, a decode pool of 8,000 slots: two fit beside their decode reserve, the other
    two wait in the prealloc queue until the first two finish, and that wait is their prealloc part."""
    requests = [BenchRequest(tuple(range(3 + i, 3003 + i)), 64) for i in range(4)]
    timings = _pd_bench(requests, decode_pool_tokens=8000)
    first_two, last_two = timings[:2], timings[2:]
    assert all(r.ttft_parts is not None for r in timings)
    assert max(r.ttft_parts.prealloc_ms for r in first_two) == pytest.approx(0, abs=1e-9)  # type: ignore[union-attr]
    first_done_s = min(r.sent_s + r.e2e_s for r in first_two)
    for r in last_two:
        parts = r.ttft_parts
        assert parts is not None
        assert parts.prealloc_ms >= (first_done_s - r.sent_s) * 1e3  # held until a slot-holder ended
        assert parts.prealloc_ms == max(parts.named().values())  # and that is where most of its TTFT went
        assert parts.total_ms == pytest.approx(r.ttft_s * 1e3, abs=1e-9)


def _final_meta(text: str) -> dict:
    events = [e[len("data: ") :] for e in text.split("\n\n") if e and e != "data: [DONE]"]
    return orjson.loads(events[-1])["meta_info"]


def test_meta_info_carries_the_parts_beside_sglangs_own_timings():
    body = {"input_ids": list(range(1000, 3000)), "sampling_params": {"max_new_tokens": 8, "ignore_eos": True},
            "stream": True}  # fmt: skip

    async def scenario(client):
        first = await client.post("/generate", data=orjson.dumps(body))
        second = await client.post("/generate", data=orjson.dumps({**body, "input_ids": list(range(5000, 7000))}))
        return await first.text(), await second.text()

    first, second = serve([*V3_H200, "--enable-metrics", "--max-running-requests", "1"], scenario)
    for text in (first, second):
        meta = _final_meta(text)
        parts = meta["sim_ttft_parts_ms"]
        assert list(parts) == ["queue", "prefill"]
        # SGLang's own keys stay as SGLang sends them; the twin's parts restate them in ms.
        assert parts["queue"] == pytest.approx(meta["queue_time"] * 1e3, abs=1e-3)
        assert parts["prefill"] == pytest.approx(
            (meta["prefill_finished_time"] - meta["forward_entry_time"]) * 1e3, abs=1e-3
        )
    assert _final_meta(second)["sim_ttft_parts_ms"]["queue"] > 0  # it waited for the first one's 8 tokens

    # Without --enable-metrics the twin says nothing of its timings, as SGLang.
    plain = serve(V3_H200, lambda client: _text(client.post("/generate", data=orjson.dumps(body))))
    assert not {"sim_ttft_parts_ms", "queue_time", "prefill_finished_time"} & set(_final_meta(plain))


async def _text(response) -> str:
    return await (await response).text()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_pd_decode_servers_meta_info_carries_every_part_the_prefill_sent_over_its_bootstrap_port():
    """A prefill and a decode twin over loopback HTTP on one virtual clock, the body sent to both as the router sends
    it: the decode's final meta_info has all six parts, the prefill's own answer its bootstrap, queue and prefill,
    and the decode reports no prefill_finished_time (it prefilled nothing), as a real SGLang decode server."""
    clock = VirtualClock(allow_real_io=True)
    port = _free_port()
    prompt = list(range(100, 2148))
    body = {"input_ids": prompt, "sampling_params": {"max_new_tokens": 8, "ignore_eos": True}, "stream": True,
            "bootstrap_host": "127.0.0.1", "bootstrap_port": port, "bootstrap_room": 7}  # fmt: skip

    async def main():
        prefill = create_app(parse_server_args([*V3_H200, "--enable-metrics", "--disaggregation-mode", "prefill",
                                                "--disaggregation-bootstrap-port", str(port)]), clock)  # fmt: skip
        decode = create_app(parse_server_args([*V3_H200, "--enable-metrics", "--disaggregation-mode", "decode"]), clock)
        async with (
            TestServer(prefill, host="127.0.0.1", port=0) as p_server,
            TestClient(p_server) as p_client,
            TestServer(decode, host="127.0.0.1", port=0) as d_server,
            TestClient(d_server) as d_client,
        ):
            return await asyncio.gather(
                _text(p_client.post("/generate", data=orjson.dumps(body))),
                _text(d_client.post("/generate", data=orjson.dumps(body))),
            )

    prefill_text, decode_text = clock.run(main())
    decoded = _final_meta(decode_text)
    parts = decoded["sim_ttft_parts_ms"]
    assert list(parts) == ["prealloc", "bootstrap", "queue", "prefill", "kv_transfer", "decode_wait"]
    assert parts["kv_transfer"] == pytest.approx(2048 * (512 + 64) * 61 * 2 / 50e9 * 1e3 + 1.0, abs=1e-3)
    assert parts["prefill"] > 0 and min(parts.values()) >= -1e-3
    assert "prefill_finished_time" not in decoded and decoded["completion_tokens"] == 8
    prefilled = _final_meta(prefill_text)
    assert list(prefilled["sim_ttft_parts_ms"]) == ["bootstrap", "queue", "prefill"]
    assert prefilled["sim_ttft_parts_ms"]["prefill"] == pytest.approx(parts["prefill"], abs=1e-3)
    assert "prefill_finished_time" in prefilled
