"""The OpenAI-compatible clients (chat and completions) against an SGLang-shaped peer on 127.0.0.1."""

from __future__ import annotations

import asyncio

import aiohttp
import numpy as np
import pytest

from replay.clients import openai_chat_client, openai_completions_client
from replay.clients.client_protocol import SendOptions
from replay.clients.openai_stream import OpenAiStreamState
from replay.clients.prompt_text import chat_messages, text_for_ids
from replay.clock import MonotonicClock
from replay.prepared_request import PreparedRequest
from replay.recording.records import RequestStatus
from replay_sglang_peer import PeerBehaviour, SglangPeer

CLIENTS = {"chat": openai_chat_client.send, "completions": openai_completions_client.send}


def _request(output_tokens: int = 5, input_tokens: int = 12, prompt: str | None = None, reasoning: int | None = None):
    return PreparedRequest(
        request_id="r1", session_id=None, turn=None, offset_s=0.0,
        input_ids=np.arange(500, 500 + input_tokens, dtype=np.int32), output_tokens=output_tokens,
        reasoning_tokens=reasoning, prompt=prompt,
    )  # fmt: skip


def _send(kind: str, behaviour: PeerBehaviour, request: PreparedRequest | None = None, **option_changes):
    async def main():
        async with SglangPeer(behaviour) as peer:
            clock = MonotonicClock()
            options = SendOptions(
                base_url=peer.url, run_id="run-1", request_timeout_s=10.0, model="m", **option_changes
            )
            async with aiohttp.ClientSession() as session:
                record = await CLIENTS[kind](request or _request(), session, clock, clock.now_s(), options)
            return record, peer

    return asyncio.run(main())


@pytest.mark.parametrize("kind", ["chat", "completions"])
def test_stream_with_usage_records_usage_exactly_and_sends_the_length_controls(kind):
    record, peer = _send(kind, PeerBehaviour(cached_tokens=8, token_delay_s=0.002))
    body = peer.bodies[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["ignore_eos"] is True and body["temperature"] == 0 and body["model"] == "m"
    if kind == "chat":
        assert body["max_completion_tokens"] == 5 and body["messages"][0]["role"] == "user"
    else:
        assert body["max_tokens"] == 5 and isinstance(body["prompt"], str)
    assert record.status is RequestStatus.OK and record.http_status == 200
    assert (record.prompt_tokens, record.completion_tokens, record.cached_tokens) == (12, 5, 8)
    assert record.input_tokens == 12 and record.reasoning_tokens is None  # not reported: None, not 0
    assert record.finish_reason == "length"
    assert len(record.chunk_mono_s) == 5  # the role chunk and the usage chunk carry no tokens
    assert record.sent_mono_s < record.first_token_mono_s == record.first_answer_mono_s <= record.finish_mono_s


def test_reasoning_content_counts_for_first_token_but_not_first_answer():
    record, _ = _send("chat", PeerBehaviour(reasoning_tokens=3, token_delay_s=0.002), _request(output_tokens=6))
    assert record.status is RequestStatus.OK
    assert record.reasoning_tokens == 3 and record.completion_tokens == 6
    assert record.first_token_mono_s == record.chunk_mono_s[0]
    assert record.first_answer_mono_s == record.chunk_mono_s[3]  # chunks 1-3 are reasoning


def test_cached_tokens_dropped_by_the_server_stay_none():
    record, _ = _send("chat", PeerBehaviour(cached_tokens=0))
    assert record.prompt_tokens == 12 and record.cached_tokens is None


@pytest.mark.parametrize("kind", ["chat", "completions"])
def test_under_cache_report_missing_details_mean_zero_cached(kind):
    # --enable-cache-report: SGLang omits prompt_tokens_details when nothing was cached.
    cold, _ = _send(kind, PeerBehaviour(cached_tokens=0), cache_report=True)
    warm, _ = _send(kind, PeerBehaviour(cached_tokens=8), cache_report=True)
    assert (cold.prompt_tokens, cold.cached_tokens) == (12, 0)
    assert (warm.prompt_tokens, warm.cached_tokens) == (12, 8)
    failed, _ = _send(kind, PeerBehaviour(mode="http_500"), cache_report=True)
    assert failed.cached_tokens is None  # no usage at all: nothing reported, not 0


def test_the_twins_reasoning_field_is_sent_only_when_configured():
    _, peer = _send("chat", PeerBehaviour(), _request(reasoning=40))
    assert "sim_reasoning_tokens" not in peer.bodies[0]
    _, peer = _send("chat", PeerBehaviour(), _request(reasoning=40), sim_reasoning_field="sim_reasoning_tokens")
    assert peer.bodies[0]["sim_reasoning_tokens"] == 40


@pytest.mark.parametrize(
    "mode, status, kind",
    [("http_500", "error", "http_status"), ("error_event", "error", "stream_error"), ("drop", "error", "connection"),
     ("abort", "error", "server_abort"), ("no_finish", "error", "incomplete_stream")],
)  # fmt: skip
def test_failures_are_records_with_their_cause(mode, status, kind):
    record, _ = _send("completions", PeerBehaviour(mode=mode))
    assert (record.status.value, record.error_kind) == (status, kind)
    assert record.error_message


def test_a_captured_chat_prompt_is_sent_as_captured():
    messages = '[{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]'
    _, peer = _send("chat", PeerBehaviour(), _request(prompt=messages))
    assert peer.bodies[0]["messages"] == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]


def test_built_text_keeps_prefix_sharing_and_is_four_bytes_a_token():
    a = text_for_ids(np.array([1, 2, 3, 4]))
    b = text_for_ids(np.array([1, 2, 3, 9]))
    assert len(a.encode()) == 16 and a[:12] == b[:12] and a != b
    assert chat_messages("plain text", np.array([1])) == [{"role": "user", "content": "plain text"}]


def test_sglang_error_object_mid_stream_is_a_stream_error():
    state = OpenAiStreamState(chat=True)
    assert state.on_event(b'{"object": "error", "message": "oom", "type": "x", "code": 500}', 0.1) == "oom"
    with pytest.raises(ValueError):
        state.on_event(b"[1, 2]", 0.2)
