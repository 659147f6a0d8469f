"""The twin's reasoning split against SGLang's own DeepSeek-R1 parser (parser/reasoning_parser.py).

The same chat request is sent twice over HTTP: with `separate_reasoning: false` the twin returns its raw
output (thinking, `</think>`, answer) as content; with the split (the default under
--reasoning-parser deepseek-r1) it returns reasoning_content and content. SGLang's ReasoningParser, fed the
raw text whole (non-streaming) or delta by delta (streaming), must split it exactly where the twin did.
"""

from __future__ import annotations

from sglang.srt.parser.reasoning_parser import ReasoningParser
from twin_http import json_events, post_json, post_sse

PATH = "/v1/chat/completions"


def chat(stream: bool, separate: bool, seed_words: str) -> dict:
    body = {
        "model": "default", "messages": [{"role": "user", "content": f"Why is {seed_words} slow?"}],
        "max_tokens": 40, "ignore_eos": True, "stream": stream, "separate_reasoning": separate,
        "sim_reasoning_tokens": 15,
    }  # fmt: skip
    return body


def parser() -> ReasoningParser:
    return ReasoningParser(model_type="deepseek-r1", stream_reasoning=True)


PROMPTS = ("the prefill", "a cold cache", "expert routing")


def test_non_streamed_answers_split_where_sglangs_parser_splits(twin_r1, record_property):
    problems = []
    for words in PROMPTS:
        _, raw = post_json(twin_r1.base_url, PATH, chat(False, False, words))
        _, split = post_json(twin_r1.base_url, PATH, chat(False, True, words))
        raw_text = raw["choices"][0]["message"]["content"]
        message = split["choices"][0]["message"]
        theirs = parser().parse_non_stream(raw_text)
        if "</think>" not in raw_text:
            problems.append(f"{words!r}: the raw text has no </think>: {raw_text!r}")
        if (message["reasoning_content"], message["content"]) != theirs:
            problems.append(f"{words!r}: twin {(message['reasoning_content'], message['content'])}, SGLang {theirs}")
    record_property("checked", f"{len(PROMPTS)} answers: parse_non_stream(raw) vs reasoning_content/content")
    assert not problems, "\n".join(problems)


def _deltas(events: list[dict]) -> list[dict]:
    return [e["choices"][0]["delta"] for e in events if e["choices"]]


def test_streamed_answers_split_chunk_by_chunk_where_sglangs_parser_splits(twin_r1, record_property):
    problems, chunks = [], 0
    for words in PROMPTS:
        raw = _deltas(json_events(post_sse(twin_r1.base_url, PATH, chat(True, False, words))))
        split = _deltas(json_events(post_sse(twin_r1.base_url, PATH, chat(True, True, words))))
        sglang, theirs = parser(), []
        for delta in raw:
            if delta.get("content"):
                reasoning, normal = sglang.parse_stream_chunk(delta["content"])
                theirs += [("reasoning", reasoning)] if reasoning else []
                theirs += [("content", normal)] if normal else []
        ours = [("reasoning", d["reasoning_content"]) for d in split if d.get("reasoning_content")]
        ours += [("content", d["content"]) for d in split if d.get("content")]
        chunks += len(ours)
        if ours != theirs:
            problems.append(f"{words!r}: twin {ours}\n   SGLang {theirs}")
    record_property("checked", f"{len(PROMPTS)} streams, {chunks} deltas: parse_stream_chunk vs the twin's deltas")
    assert not problems, "\n".join(problems)
