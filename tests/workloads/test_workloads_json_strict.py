"""Strict JSON traces: what a JSON reader refuses instead of misreading, with file, line and reason.

Duplicate keys (orjson alone keeps the last), booleans as numbers, timestamps no trace can have, and
requests too big to replay, in every JSON format; and the Mooncake fast path (Arrow over plain lines)
accepting exactly what the per-line rules accept, checked over deterministic mutations of real lines.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import orjson
import pytest

from workloads.readers.gateway_reader import read_gateway
from workloads.readers.json_strict import duplicate_key_reason, surely_unique_keys
from workloads.readers.mooncake_reader import read_mooncake
from workloads.readers.sharegpt_reader import read_sharegpt
from workloads.workload import TraceFormatError
from workloads.workload_builder import MAX_REQUEST_TOKENS, MAX_TRACE_SPAN_S

MOONCAKE_TRACE = Path(__file__).resolve().parents[2] / "workloads" / "traces" / "mooncake_conversation.jsonl"
GOOD = '{"timestamp": 0, "input_length": 600, "output_length": 10, "hash_ids": [1, 2]}'


def mooncake_error(tmp_path: Path, bad_line: str) -> TraceFormatError:
    """The error of a trace whose line 3 is `bad_line` (a good line, a blank line, then it, then a good one)."""
    path = tmp_path / "t.jsonl"
    path.write_text(f"{GOOD}\n\n{bad_line}\n{GOOD}\n")
    with pytest.raises(TraceFormatError) as caught:
        read_mooncake(path)
    assert caught.value.line == 3 and caught.value.path == str(path)
    return caught.value


# --- duplicate keys ---------------------------------------------------------------------------


def test_duplicate_key_reason_checks_every_object_and_builds_nothing() -> None:
    assert duplicate_key_reason('{"a": 1, "b": {"c": 2, "d": 3}}') is None
    assert duplicate_key_reason(b'{"a": 1, "a": 2}') == "duplicate key 'a' in a JSON object"
    assert duplicate_key_reason('[{"x": 1}, {"y": [{"z": 1, "z": 1}]}]') == "duplicate key 'z' in a JSON object"
    # An escaped spelling is the same key once decoded.
    assert duplicate_key_reason('{"ab": 1, "a\\u0062": 2}') == "duplicate key 'ab' in a JSON object"


@pytest.mark.parametrize(
    ("text", "surely_unique"),
    [
        (b'{"a": 1, "b": [1, 2]}', True),
        (b'{"a": 1, "a": 2}', False),  # 2 colons, 1 distinct key
        (b'{"a": 1, "\\u0061": 2}', False),  # the same key once decoded
        (b'{"a": "x:y"}', False),  # a colon inside a string: not provable by counting, so checked
        (b'{"a": {"b": 1}}', False),  # nested objects: checked
        (b"[1, 2]", False),
    ],
)
def test_surely_unique_keys_never_vouches_for_a_duplicate(text: bytes, surely_unique: bool) -> None:
    assert surely_unique_keys(text, orjson.loads(text)) is surely_unique


@pytest.mark.parametrize(
    "bad_line",
    [
        # 10 quotes: not a plain line, decoded on its own.
        '{"timestamp": 0, "input_length": 600, "input_length": 6, "output_length": 10, "hash_ids": [1, 2]}',
        # 8 quotes and four keys, but one is written twice and hash_ids is missing: Arrow would see a null.
        '{"timestamp": 0, "timestamp": 5, "input_length": 600, "output_length": 10}',
        '{"timestamp": 0, "input_length": 512, "output_length": 10, "hash_ids": [1], "x": {"k": 1, "k": 2}}',
    ],
)
def test_mooncake_refuses_a_key_written_twice(tmp_path: Path, bad_line: str) -> None:
    error = mooncake_error(tmp_path, bad_line)
    assert error.reason.startswith("duplicate key ")
    assert str(error).startswith(f"{tmp_path / 't.jsonl'}:3: duplicate key ")


def test_gateway_refuses_a_key_written_twice_anywhere_in_the_line(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    good = {"timestamp": 0, "request": {"prompt": "hi"}, "response": {"usage": {"completion_tokens": 3}}}
    bad = '{"timestamp": 1, "request": {"prompt": "hi"}, "response": {"usage": {"completion_tokens": 3, "completion_tokens": 30}}}'
    path.write_text(json.dumps(good) + "\n" + bad + "\n")
    with pytest.raises(TraceFormatError) as caught:
        read_gateway(path)
    assert str(caught.value) == f"{path}:2: duplicate key 'completion_tokens' in a JSON object"


def test_sharegpt_refuses_a_key_written_twice_at_the_record_line(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    good = '{"id": "a", "conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]}'
    bad = '{"id": "b", "conversations": [{"from": "human", "value": "q", "value": "other"}]}'
    path.write_text(f"[\n{good},\n\n{bad}\n]\n")
    with pytest.raises(TraceFormatError) as caught:
        read_sharegpt(path)
    assert str(caught.value) == f"{path}:4: conversation 1: duplicate key 'value' in a JSON object"


# --- numbers read strictly --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad_line", "reason_part"),
    [
        ('{"timestamp": false, "input_length": 600, "output_length": 10, "hash_ids": [1, 2]}', "timestamp must be"),
        ('{"timestamp": 0, "input_length": 600, "output_length": 10, "hash_ids": [1, true]}', "64-bit integers"),
        ('{"timestamp": 0, "input_length": 6e2, "output_length": 10, "hash_ids": [1, 2]}', "input_length must be"),
        ('{"timestamp": 0, "input_length": 600, "output_length": 10.0, "hash_ids": [1, 2]}', "output_length must be"),
        ('{"timestamp": 0, "input_length": 600, "output_length": 10, "hash_ids": [1, null]}', "64-bit integers"),
        ('{"timestamp": 01, "input_length": 600, "output_length": 10, "hash_ids": [1, 2]}', "invalid JSON"),
        ('{"timestamp": 0, "input_length": 600, "output_length": 10, "hash_ids": [1, 2],}', "invalid JSON"),
        ('{"timestamp": 0, "input_length": 600, "output_length": 10, "hash_ids": [1, 2]} {}', "invalid JSON"),
        ('{"timestamp": 0, "input_length": 600, "output_length": 10, "hash_ids": [1, 2], "x": NaN}', "invalid JSON"),
        ('{"timestamp": 0, "input_length": 600, "output_length": 10, "hash_ids": [1, 9223372036854775808]}', "64-bit"),
    ],
)
def test_mooncake_numbers_are_json_integers_exactly(tmp_path: Path, bad_line: str, reason_part: str) -> None:
    assert reason_part in mooncake_error(tmp_path, bad_line).reason


def test_mooncake_timestamp_past_400_days_is_refused_as_no_trace_offset(tmp_path: Path) -> None:
    # Epoch milliseconds in a Mooncake trace would schedule the first request decades after t0.
    epoch_ms = 1_740_830_400_000
    error = mooncake_error(tmp_path, GOOD.replace('"timestamp": 0', f'"timestamp": {epoch_ms}'))
    assert error.reason == (
        f"timestamp must be a non-negative integer (ms from the trace start) of at most {MAX_TRACE_SPAN_S * 1000} "
        f"(400 days), got {epoch_ms}"
    )
    path = tmp_path / "edge.jsonl"
    path.write_text(GOOD.replace('"timestamp": 0', f'"timestamp": {MAX_TRACE_SPAN_S * 1000}') + "\n")
    assert read_mooncake(path).table.column("arrival_s").to_pylist() == [float(MAX_TRACE_SPAN_S)]


def test_mooncake_request_too_big_to_replay_is_refused(tmp_path: Path) -> None:
    input_length = MAX_REQUEST_TOKENS - 5
    hashes = list(range(math.ceil(input_length / 512)))
    line = json.dumps({"timestamp": 0, "input_length": input_length, "output_length": 6, "hash_ids": hashes})
    error = mooncake_error(tmp_path, line)
    assert (
        error.reason
        == f"input_length + output_length must be at most {MAX_REQUEST_TOKENS} tokens, got {MAX_REQUEST_TOKENS + 1}"
    )
    path = tmp_path / "edge.jsonl"
    path.write_text(line.replace('"output_length": 6', '"output_length": 5') + "\n")
    assert read_mooncake(path).table.column("input_tokens").to_pylist() == [input_length]


def gateway_line(timestamp: object, usage: dict, **extra: object) -> str:
    line = {"timestamp": timestamp, "request": {"prompt": "hello there"}, "response": {"usage": usage}, **extra}
    return json.dumps(line)


@pytest.mark.parametrize(
    ("bad_line", "reason"),
    [
        (
            gateway_line(1_740_830_400_000, {"completion_tokens": 3}),
            "timestamp 1740830400000 is not epoch seconds between 1970 and 2100 (0 to 4102444800): "
            "non-negative epoch seconds expected, not milliseconds",
        ),
        (
            gateway_line("1900-01-01T00:00:00Z", {"completion_tokens": 3}),
            "timestamp '1900-01-01T00:00:00Z' is outside 1970-01-01 to 2100-01-01",
        ),
        (
            gateway_line(True, {"completion_tokens": 3}),
            "timestamp must be ISO-8601 text or non-negative epoch seconds, got True",
        ),
        (gateway_line(1, {"completion_tokens": True}), "usage.completion_tokens must be an integer >= 0, got True"),
        (
            gateway_line(1, {"completion_tokens": 3, "reasoning_tokens": -1}),
            "usage.reasoning_tokens must be an integer >= 0, got -1",
        ),
        (
            gateway_line(1, {"completion_tokens": 3, "reasoning_tokens": 2.5}),
            "usage.reasoning_tokens must be an integer >= 0, got 2.5",
        ),
        (
            gateway_line(1, {"completion_tokens": 3, "completion_tokens_details": {"reasoning_tokens": 4}}),
            "usage reasoning_tokens 4 exceeds completion_tokens 3 (it is part of them)",
        ),
        (
            gateway_line(1, {"prompt_tokens": 2_000_000_000, "completion_tokens": 3}),
            f"the request needs 2000000000 + 3 tokens, more than {MAX_REQUEST_TOKENS}",
        ),
        (
            gateway_line(1, {"completion_tokens": 3}, session_id=True),
            "session_id must be a string or an integer, got True",
        ),
        (
            gateway_line(1, {"completion_tokens": 3, "completion_tokens_details": [4]}),
            "usage.completion_tokens_details must be an object, got list",
        ),
        (
            gateway_line(1_000_000 + MAX_TRACE_SPAN_S + 1, {"completion_tokens": 3}),
            f"timestamp {1_000_000 + MAX_TRACE_SPAN_S + 1} stretches the log to {MAX_TRACE_SPAN_S + 1} s, more than {MAX_TRACE_SPAN_S} s (400 days)",
        ),
    ],
)
def test_gateway_refuses_what_it_would_misread(tmp_path: Path, bad_line: str, reason: str) -> None:
    path = tmp_path / "g.jsonl"
    path.write_text(gateway_line(1_000_000, {"completion_tokens": 3}) + "\n" + bad_line + "\n")
    with pytest.raises(TraceFormatError) as caught:
        read_gateway(path)
    assert str(caught.value) == f"{path}:2: {reason}"


def test_gateway_usage_that_is_no_object_is_an_error_not_a_failed_request(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    path.write_text(json.dumps({"timestamp": 1, "request": {"prompt": "x"}, "response": {"usage": [3]}}) + "\n")
    with pytest.raises(TraceFormatError) as caught:
        read_gateway(path)
    assert str(caught.value) == f"{path}:1: response.usage must be an object, got list"


def test_gateway_span_of_exactly_400_days_reads(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    usage = {"completion_tokens": 3, "reasoning_tokens": 3}
    path.write_text(gateway_line(1_000_000, usage) + "\n" + gateway_line(1_000_000 + MAX_TRACE_SPAN_S, usage) + "\n")
    assert read_gateway(path).table.column("arrival_s").to_pylist() == [0.0, float(MAX_TRACE_SPAN_S)]


@pytest.mark.parametrize(("raw_id", "reason"), [(True, "got True"), (1.5, "got 1.5"), ({"a": 1}, "got {'a': 1}")])
def test_sharegpt_id_must_be_text_or_an_integer(tmp_path: Path, raw_id: object, reason: str) -> None:
    path = tmp_path / "s.json"
    record = {"id": raw_id, "conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]}
    path.write_text(json.dumps([record]))
    with pytest.raises(TraceFormatError) as caught:
        read_sharegpt(path)
    assert str(caught.value) == f"{path}:1: conversation 0: id must be a string or an integer, {reason}"


# --- the Mooncake fast path accepts exactly what the rules accept ------------------------------


def rules_outcome(data: bytes) -> tuple[int, None] | list[tuple]:
    """What the documented rules make of a Mooncake file, line by line with orjson and the standard
    library: (line, None) for the first bad line, else the rows (request_id, arrival_s, input, output,
    blocks) sorted by arrival. Written from docs/workloads.md, independently of the reader."""
    rows = []
    for index, line in enumerate(data.splitlines()):
        if not line.strip():
            continue

        def pairs_hook(pairs: list) -> dict:
            if len({key for key, _ in pairs}) != len(pairs):
                raise KeyError("duplicate")
            return dict(pairs)

        try:
            raw = orjson.loads(line)
            json.loads(line, object_pairs_hook=pairs_hook)
        except (orjson.JSONDecodeError, KeyError):
            return index + 1, None
        if not isinstance(raw, dict) or not {"timestamp", "input_length", "output_length", "hash_ids"} <= raw.keys():
            return index + 1, None
        ts, inp, out, blocks = raw["timestamp"], raw["input_length"], raw["output_length"], raw["hash_ids"]
        ok = (
            type(ts) is int
            and 0 <= ts <= MAX_TRACE_SPAN_S * 1000
            and type(inp) is int
            and 1 <= inp
            and type(out) is int
            and 0 <= out
            and inp + out <= MAX_REQUEST_TOKENS
            and isinstance(blocks, list)
            and all(type(h) is int and -(2**63) <= h < 2**63 for h in blocks)
            and len(blocks) == math.ceil(inp / 512)
        )
        if not ok:
            return index + 1, None
        rows.append((str(index), ts / 1000.0, inp, out, blocks))
    return sorted(rows, key=lambda row: row[1])


def reshaped(line: bytes, rng: random.Random) -> bytes:
    """The same request written another valid way: spacing, key order, an extra field, a line break."""
    fields = list(json.loads(line).items())
    choice = rng.randrange(6)
    if choice == 0:
        return json.dumps(dict(fields), separators=(",", ":")).encode()
    if choice == 1:
        rng.shuffle(fields)
        return json.dumps(dict(fields)).encode()
    if choice == 2:
        return json.dumps({**dict(fields), "model": "r1", "tags": [{"k": 1}]}).encode()
    if choice == 3:
        return b"  " + line + b"\t"
    if choice == 4:
        return line + b"\r"  # with the \n that follows: a CRLF line
    return line.replace(b", ", b" ,  ", 2)


def mutated(lines: list[bytes], rng: random.Random) -> bytes:
    alphabet = b'{}[]:,"-0123456789 \t\r\nabcdefghijklmnopqrstuvwxyz_.eE+\\\x0b\xff'
    lines = [reshaped(line, rng) if rng.random() < 0.3 else line for line in lines]
    if rng.random() < 0.3:
        return b"\n".join(lines) + b"\n"  # reshaped only: still valid
    for _ in range(rng.randint(1, 3)):
        k = rng.randrange(len(lines))
        line = bytearray(lines[k])
        at = rng.randrange(len(line) + 1)
        operation = rng.randrange(6)
        if operation == 0 and line:
            del line[min(at, len(line) - 1)]
        elif operation == 1:
            line[at:at] = bytes([rng.choice(alphabet)])
        elif operation == 2 and line:
            line[min(at, len(line) - 1)] = rng.choice(alphabet)
        elif operation == 3:  # a piece of the line repeated inside it
            other = rng.randrange(len(line) + 1)
            line[at:at] = line[min(at, other) : max(at, other)][:40]
        elif operation == 4:  # two lines glued into one
            line = bytearray(lines[k] + b" " + lines[rng.randrange(len(lines))])
        else:
            line = bytearray(line.replace(b'"input_length": ', b'"input_length": 7, "input_length": ', 1))
        lines[k] = bytes(line)
    return b"\n".join(lines) + b"\n"


def test_mooncake_reader_accepts_exactly_what_the_rules_accept(tmp_path: Path) -> None:
    real_lines = MOONCAKE_TRACE.read_bytes().splitlines()[:30]
    rng = random.Random(12)
    path = tmp_path / "m.jsonl"
    outcomes = {"refused": 0, "read": 0}
    for _ in range(400):
        data = mutated(real_lines, rng)
        path.write_bytes(data)
        expected = rules_outcome(data)
        try:
            rows = read_mooncake(path).table.to_pylist()
        except TraceFormatError as error:
            assert isinstance(expected, tuple), f"refused a file the rules accept: {error}\n{data!r}"
            assert error.line == expected[0], data
            outcomes["refused"] += 1
            continue
        assert isinstance(expected, list), f"read a file the rules refuse at line {expected[0]}:\n{data!r}"
        got = [
            (r["request_id"], r["arrival_s"], r["input_tokens"], r["output_tokens"], r["prefix_blocks"]) for r in rows
        ]
        assert got == expected
        outcomes["read"] += 1
    assert outcomes["refused"] > 100 and outcomes["read"] > 50  # both sides of the rule were exercised


def test_a_utf8_bom_at_the_start_of_a_jsonl_file_is_no_content(tmp_path: Path) -> None:
    # An editor's "UTF-8 with signature": allowed as the CSV readers and the ShareGPT reader allow it.
    mooncake = tmp_path / "m.jsonl"
    mooncake.write_bytes(b"\xef\xbb\xbf" + GOOD.encode() + b"\n" + GOOD.encode() + b"\n")
    assert read_mooncake(mooncake).table.column("request_id").to_pylist() == ["0", "1"]
    gateway = tmp_path / "g.jsonl"
    gateway.write_bytes(b"\xef\xbb\xbf" + gateway_line(5, {"completion_tokens": 3}).encode() + b"\n")
    assert read_gateway(gateway).table.column("request_id").to_pylist() == ["0"]
    # Anywhere else it is a byte of the line, and no JSON.
    mooncake.write_bytes(GOOD.encode() + b"\n\xef\xbb\xbf" + GOOD.encode() + b"\n")
    with pytest.raises(TraceFormatError, match=r"m.jsonl:2: invalid JSON"):
        read_mooncake(mooncake)
