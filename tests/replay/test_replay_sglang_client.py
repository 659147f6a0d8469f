"""The SGLang native client against a real SGLang-shaped server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import socket

import aiohttp
import numpy as np
import pytest

from replay.clients.client_protocol import SendOptions
from replay.clients.sglang_client import parse_event, send
from replay.clock import MonotonicClock
from replay.prepared_request import PreparedRequest
from replay.recording.records import RequestStatus
from replay_sglang_peer import PeerBehaviour, SglangPeer


def _request(output_tokens: int = 5, input_tokens: int = 7, offset_s: float = 0.25) -> PreparedRequest:
    return PreparedRequest(
        request_id="r1",
        session_id="s1",
        turn=2,
        offset_s=offset_s,
        input_ids=np.arange(100, 100 + input_tokens, dtype=np.int32),
        output_tokens=output_tokens,
    )


def _send(
    behaviour: PeerBehaviour,
    request: PreparedRequest | None = None,
    timeout_s: float = 10.0,
    url: str | None = None,
    headers: dict | None = None,
):
    async def main():
        async with SglangPeer(behaviour) as peer:
            clock = MonotonicClock()
            t0_s = clock.now_s()
            options = SendOptions(
                base_url=url or peer.url, run_id="run-1", request_timeout_s=timeout_s, headers=headers or {}
            )
            async with aiohttp.ClientSession() as session:
                record = await send(request or _request(), session, clock, t0_s, options)
            return record, peer

    return asyncio.run(main())


def test_ok_stream_records_times_usage_and_sends_the_exact_request():
    record, peer = _send(
        PeerBehaviour(cached_tokens=4, reasoning_tokens=2, token_delay_s=0.005), headers={"Authorization": "Bearer k"}
    )
    body = peer.bodies[0]
    assert body["input_ids"] == list(range(100, 107))
    assert body["sampling_params"] == {"max_new_tokens": 5, "ignore_eos": True, "temperature": 0}
    assert body["stream"] is True
    assert peer.headers[0]["Authorization"] == "Bearer k"

    assert record.status is RequestStatus.OK and record.error_kind is None
    assert (record.run_id, record.request_id, record.session_id, record.turn) == ("run-1", "r1", "s1", 2)
    assert (record.input_tokens, record.output_tokens, record.scheduled_mono_s) == (7, 5, 0.25)
    assert (record.prompt_tokens, record.completion_tokens, record.cached_tokens, record.reasoning_tokens) == (
        7,
        5,
        4,
        2,
    )
    assert record.finish_reason == "length" and record.http_status == 200
    assert record.server_e2e_latency_s is not None and record.server_e2e_latency_s > 0
    assert len(record.chunk_mono_s) == 5  # one per token-carrying event
    assert record.sent_mono_s < record.first_token_mono_s < record.first_answer_mono_s <= record.finish_mono_s
    assert record.first_token_mono_s == record.chunk_mono_s[0]
    assert record.first_answer_mono_s == record.chunk_mono_s[2]  # tokens 1-2 are reasoning


def test_latency_minus_ttft_is_the_sum_of_inter_chunk_gaps():
    record, _ = _send(PeerBehaviour(token_delay_s=0.01), _request(output_tokens=6))
    latency_s = record.finish_mono_s - record.sent_mono_s
    ttft_s = record.first_token_mono_s - record.sent_mono_s
    gaps_s = np.diff(record.chunk_mono_s)
    assert len(gaps_s) == 5
    assert latency_s - ttft_s == pytest.approx(gaps_s.sum(), abs=1e-9)
    assert (gaps_s > 0.005).all()  # each token really arrived on its own


def test_usage_the_server_did_not_report_is_none_not_zero():
    record, _ = _send(PeerBehaviour(cached_tokens=None, reasoning_tokens=None))
    assert record.status is RequestStatus.OK
    assert record.cached_tokens is None and record.reasoning_tokens is None
    assert record.first_answer_mono_s is None  # cannot tell answer from reasoning without the count
    assert record.completion_tokens == 5


def test_keepalive_comments_are_not_tokens():
    record, _ = _send(PeerBehaviour(ping=True))
    assert record.status is RequestStatus.OK and len(record.chunk_mono_s) == 5


def test_http_500_is_an_error_record_with_the_body():
    record, _ = _send(PeerBehaviour(mode="http_500"))
    assert record.status is RequestStatus.ERROR and record.error_kind == "http_status"
    assert record.http_status == 500
    assert "HTTP 500" in record.error_message and "KV cache pool exhausted" in record.error_message
    assert record.completion_tokens is None and record.chunk_mono_s == ()


def test_mid_stream_error_event_is_an_error_record_keeping_what_arrived():
    record, _ = _send(PeerBehaviour(mode="error_event"))
    assert record.status is RequestStatus.ERROR and record.error_kind == "stream_error"
    assert record.error_message == "scheduler crashed"
    assert len(record.chunk_mono_s) == 2 and record.completion_tokens == 2
    assert record.first_token_mono_s is not None


def test_dropped_connection_is_an_error_record():
    record, _ = _send(PeerBehaviour(mode="drop"))
    assert record.status is RequestStatus.ERROR
    assert record.error_kind == "connection" and "payload" in record.error_message.lower()
    assert len(record.chunk_mono_s) == 2


def test_server_abort_is_an_error_record():
    record, _ = _send(PeerBehaviour(mode="abort"))
    assert record.status is RequestStatus.ERROR and record.error_kind == "server_abort"
    assert record.finish_reason == "abort" and record.error_message == "input too long"


def test_stream_without_done_or_finish_reason_is_incomplete():
    record, _ = _send(PeerBehaviour(mode="no_finish"))
    assert record.status is RequestStatus.ERROR and record.error_kind == "incomplete_stream"


def test_per_request_timeout_is_a_timeout_record():
    record, _ = _send(PeerBehaviour(token_delay_s=0.2), _request(output_tokens=5), timeout_s=0.5)
    assert record.status is RequestStatus.TIMEOUT and record.error_kind == "timeout"
    assert record.finish_mono_s is None
    assert 1 <= len(record.chunk_mono_s) < 5  # what arrived before the deadline is kept


def test_connection_refused_is_an_error_record():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    record, _ = _send(PeerBehaviour(), url=f"http://127.0.0.1:{port}")
    assert record.status is RequestStatus.ERROR and record.error_kind == "connection"
    assert record.http_status is None


def test_parse_event_fast_path_agrees_with_a_full_decode():
    data = b'{"text":"he said \\"meta_info\\": no","output_ids":[1,2],"meta_info":{"completion_tokens":2,"cached_tokens":0}}'
    assert parse_event(data)["meta_info"] == {"completion_tokens": 2, "cached_tokens": 0}
    # meta_info not last: falls back to the full decode
    data = b'{"meta_info":{"completion_tokens":1},"text":"x"}'
    assert parse_event(data) == {"meta_info": {"completion_tokens": 1}, "text": "x"}
    assert parse_event(b'{"error":{"message":"m"}}') == {"error": {"message": "m"}}


def test_queue_time_is_recorded_as_the_server_measured_it():
    from replay.clients.sglang_client import reported_queue_time_s

    # SGLang's req_time_stats: queue_time next to forward_entry_time once the request was forwarded.
    assert reported_queue_time_s({"queue_time": 0.25, "forward_entry_time": 1.7e9}) == 0.25
    assert reported_queue_time_s({"queue_time": 0.0, "forward_entry_time": 1.7e9}) == 0.0
    assert reported_queue_time_s({"queue_time": 0.25}) == 0.25
    # Timings that never reached the tokenizer manager read 0 - 0 = 0 with no forward_entry_time.
    assert reported_queue_time_s({"queue_time": 0.0}) is None
    assert reported_queue_time_s({}) is None and reported_queue_time_s({"queue_time": "soon"}) is None


def test_ttft_parts_are_what_the_server_reported_and_nothing_more():
    from replay.clients.sglang_client import reported_ttft_parts
    from replay.clients.stream_record import NO_TTFT_PARTS, ReportedTtftParts

    # The twin: every stage the request passed, in ms, as sent.
    twin = {"sim_ttft_parts_ms": {"prealloc": 4.0, "bootstrap": 0.0, "queue": 1.5, "prefill": 120.0,
                                  "kv_transfer": 3.2, "decode_wait": 5.0}, "queue_time": 0.3}  # fmt: skip
    assert reported_ttft_parts(twin) == ReportedTtftParts(4.0, 0.0, 1.5, 120.0, 3.2, 5.0)
    assert reported_ttft_parts({"sim_ttft_parts_ms": {"queue": 2.0, "prefill": 9.0}}) == ReportedTtftParts(
        queue_ms=2.0, prefill_ms=9.0
    )
    # A real SGLang that prefilled the request: queue_time, and prefill_finished_time - forward_entry_time.
    sglang = {"queue_time": 0.25, "forward_entry_time": 1_700_000_000.5, "prefill_finished_time": 1_700_000_000.75,
              "num_retractions": 0}  # fmt: skip
    assert reported_ttft_parts(sglang) == ReportedTtftParts(queue_ms=250.0, prefill_ms=250.0)
    # Retracted: SGLang's queue_time adds the later waits, so it is no part of the TTFT; the prefill still is.
    assert reported_ttft_parts({**sglang, "num_retractions": 1}) == ReportedTtftParts(prefill_ms=250.0)
    # A PD decode server prefilled nothing (its queue_time is its own wait after the KV): no part; no timings: none.
    assert reported_ttft_parts({"queue_time": 0.01, "forward_entry_time": 1.7e9}) == NO_TTFT_PARTS
    assert reported_ttft_parts({}) == NO_TTFT_PARTS
