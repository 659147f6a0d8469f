"""ShareGPT JSON: every answered human turn a request of its conversation, untimed, counted without a download."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from workloads.prompts.chat_text import render_prompt
from workloads.prompts.token_counter import ApproxTokenCounter, load_token_counter
from workloads.readers.reader_registry import ReadOptions, read_trace
from workloads.readers.sharegpt_reader import read_sharegpt, scan_sharegpt
from workloads.synthetic_arrivals import ArrivalProcess, with_synthetic_arrivals
from workloads.workload import UNTIMED, TraceFormat, TraceFormatError

SYSTEM_LIKE = "Explain the difference between a process and a thread, with examples. " * 20  # ~1,400 bytes


def conversation(cid: str, *turns: tuple[str, str]) -> dict:
    return {"id": cid, "conversations": [{"from": who, "value": text} for who, text in turns]}


def write(tmp_path: Path, records: list, indent: int | None = 2) -> Path:
    path = tmp_path / "share.json"
    path.write_text(json.dumps(records, indent=indent))
    return path


def test_multi_turn_conversation_becomes_ordered_turns_with_prior_context(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        [
            conversation(
                "c1",
                ("human", SYSTEM_LIKE),
                ("gpt", "A process owns memory."),
                ("human", "And threads?"),
                ("gpt", "Threads share it."),
            ),
            conversation("c2", ("human", "Hi"), ("gpt", "Hello!")),
        ],
    )
    workload = read_sharegpt(path, block_size=64)
    rows = workload.table.to_pylist()
    assert workload.trace_format is TraceFormat.SHAREGPT
    assert (workload.time_unit, workload.arrival_process, workload.needs_arrivals) == (UNTIMED, "none", True)
    assert workload.token_counter == "approx-4-bytes"
    assert [(r["request_id"], r["session_id"], r["turn"], r["arrival_s"]) for r in rows] == [
        ("c1/0", "c1", 0, 0.0),
        ("c1/1", "c1", 1, 0.0),
        ("c2/0", "c2", 0, 0.0),
    ]
    second = orjson.loads(rows[1]["prompt"])
    assert second == [
        {"role": "user", "content": SYSTEM_LIKE},
        {"role": "assistant", "content": "A process owns memory."},
        {"role": "user", "content": "And threads?"},
    ]
    # Counts are the documented approximation: ceil(UTF-8 bytes / 4) of the fixed rendering.
    assert rows[1]["input_tokens"] == -(-len(render_prompt(second).encode()) // 4)
    assert rows[1]["output_tokens"] == -(-len(b"Threads share it.") // 4)
    # The second turn's prompt extends the first's: it shares the first turn's whole blocks.
    first_blocks, second_blocks = rows[0]["prefix_blocks"], rows[1]["prefix_blocks"]
    whole = rows[0]["input_tokens"] // 64
    assert whole >= 5 and second_blocks[:whole] == first_blocks[:whole]
    assert len(second_blocks) == -(-rows[1]["input_tokens"] // 64)


def test_untimed_workload_replays_after_synthetic_arrivals(tmp_path: Path) -> None:
    path = write(tmp_path, [conversation(f"c{i}", ("human", "q"), ("gpt", "a")) for i in range(5)])
    timed = with_synthetic_arrivals(read_sharegpt(path), ArrivalProcess.CONSTANT, rate_rps=2.0)
    assert timed.table.column("arrival_s").to_pylist() == [0.0, 0.5, 1.0, 1.5, 2.0]
    assert (timed.arrival_process, timed.needs_arrivals) == ("constant", False)


def test_unanswered_and_empty_turns_are_excluded_and_counted(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        [
            conversation("a", ("human", "q1"), ("gpt", "a1"), ("human", "dangling")),
            conversation("b", ("gpt", "unprompted"), ("human", "q"), ("gpt", "")),
            conversation("c"),
            conversation("a", ("human", "same id again"), ("gpt", "ok")),  # ids repeat in some dumps
        ],
    )
    workload = read_sharegpt(path)
    assert workload.table.column("request_id").to_pylist() == ["a/0", "a#2/0"]
    assert workload.excluded_rows == 3
    assert workload.excluded_reason == "unanswered human turn: 1; empty answer: 1; conversation without a human turn: 1"


@pytest.mark.parametrize(
    ("bad_record", "reason_part"),
    [
        ("not a conversation", "expected a conversation object"),
        ({"id": "x"}, "missing or non-list field conversations"),
        ({"id": "x", "conversations": [{"from": "human"}]}, "conversations[0] must be an object"),
        ({"id": "x", "conversations": [{"from": "robot", "value": "?"}]}, "conversations[0].from is 'robot'"),
    ],
)
def test_bad_record_names_file_line_and_reason(tmp_path: Path, bad_record: object, reason_part: str) -> None:
    good = conversation("ok", ("human", "q"), ("gpt", "a"))
    path = tmp_path / "share.json"
    # "[" on line 1, the good record on line 2, a blank line, the bad record on line 4.
    path.write_text("[\n" + json.dumps(good) + ",\n\n" + json.dumps(bad_record) + ",\n" + json.dumps(good) + "\n]\n")
    with pytest.raises(TraceFormatError) as caught:
        read_sharegpt(path)
    assert caught.value.line == 4
    assert str(caught.value).startswith(f"{path}:4: conversation 1: ")
    assert reason_part in caught.value.reason


def test_invalid_json_and_wrong_top_level_are_clear(tmp_path: Path) -> None:
    path = tmp_path / "share.json"
    path.write_text('[\n  {"id": "x",\n  "conversations": [\n')
    with pytest.raises(TraceFormatError, match="invalid JSON") as caught:
        read_sharegpt(path)
    assert caught.value.line is not None
    path.write_text('{"id": "x"}')
    with pytest.raises(TraceFormatError, match="expected a JSON array"):
        read_sharegpt(path)


def test_tokenizer_file_is_used_when_the_package_is_there_and_named_when_not(tmp_path: Path) -> None:
    tokenizer = tmp_path / "tokenizer.json"
    # A minimal word-level tokenizer.json in the Hugging Face format.
    tokenizer.write_text(
        json.dumps(
            {
                "version": "1.0",
                "truncation": None,
                "padding": None,
                "added_tokens": [],
                "normalizer": None,
                "pre_tokenizer": {"type": "Whitespace"},
                "post_processor": None,
                "decoder": None,
                "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "hello": 1, "world": 2}, "unk_token": "[UNK]"},
            }
        )
    )
    path = write(tmp_path, [conversation("c", ("human", "hello world hello"), ("gpt", "world world"))])
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        with pytest.raises(TraceFormatError, match="needs the optional `tokenizers` package"):
            read_trace(path, "sharegpt", ReadOptions(tokenizer_path=tokenizer))
        return
    counter = load_token_counter(tokenizer)
    workload = read_sharegpt(path, counter)
    assert workload.token_counter == "tokenizer:tokenizer.json"
    assert workload.table.column("output_tokens").to_pylist() == [2]


def test_missing_tokenizer_file_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, [conversation("c", ("human", "q"), ("gpt", "a"))])
    with pytest.raises(TraceFormatError, match="nope.json: tokenizer file not found"):
        read_trace(path, "sharegpt", ReadOptions(tokenizer_path=tmp_path / "nope.json"))


def test_approximation_is_deterministic_and_prefix_stable() -> None:
    counter = ApproxTokenCounter()
    a, b = counter.encode("héllo wörld, shared start"), counter.encode("héllo wörld, shared start and more")
    assert counter.count("héllo") == 2  # 7 UTF-8 bytes
    assert list(a[:6]) == list(b[:6])


def test_scan_knows_its_exclusions_before_the_rows(tmp_path: Path) -> None:
    path = write(tmp_path, [conversation("a", ("human", "q"), ("gpt", "a"), ("human", "dangling"))])
    scan = scan_sharegpt(path)
    assert (scan.excluded.summary, scan.arrival_process, scan.token_counter) == (
        "unanswered human turn: 1",
        "none",
        "approx-4-bytes",
    )
    assert [batch.column("request_id").to_pylist() for batch in scan.batches] == [["a/0"]]


def test_a_file_without_answered_turns_says_why(tmp_path: Path) -> None:
    path = write(tmp_path, [conversation("a", ("human", "q")), conversation("b", ("gpt", "hello"))])
    with pytest.raises(TraceFormatError) as caught:
        read_sharegpt(path)
    assert str(caught.value) == (
        f"{path}: no requests: no answered human turn in the file "
        "(unanswered human turn: 1; conversation without a human turn: 1)"
    )
