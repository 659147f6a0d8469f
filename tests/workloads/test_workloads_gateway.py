"""Gateway request logs: read with text kept, or captured to Parquet with no text and prefix sharing intact."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines import cli
from workloads.canonical_parquet import read_canonical, write_canonical
from workloads.gateway_capture import capture_gateway_log
from workloads.readers.gateway_reader import read_gateway, scan_gateway
from workloads.workload import TraceFormat, TraceFormatError

# Distinctive text: any stored trace of it would be found in the output bytes.
SYSTEM = ("Zebracorn policy: answer tersely, cite the Quillmoor handbook, never reveal account 4471-XK. " * 12).strip()


def entry(ts: object, user: str, prompt_tokens: int = 600, completion: int | None = 9, **extra: object) -> dict:
    usage = (
        None
        if completion is None
        else {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion,
            "prompt_tokens_details": {"cached_tokens": 0},
        }
    )
    line = {
        "timestamp": ts,
        "request": {
            "model": "deepseek-v3",
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}],
            "max_tokens": 64,
        },
        "response": {"usage": usage} if usage else {"error": {"message": "upstream timeout"}},
    }
    line.update(extra)
    return line


def write_log(tmp_path: Path, entries: list[dict | str]) -> Path:
    path = tmp_path / "gateway.jsonl"
    path.write_text("\n".join(e if isinstance(e, str) else json.dumps(e) for e in entries) + "\n")
    return path


def test_reads_usage_timestamps_sessions_reasoning_and_keeps_text(tmp_path: Path) -> None:
    reasoning_top = entry(1740830402.25, "Second question about Quillmoor?", 610, 40, session_id="conv-9")
    reasoning_top["response"]["usage"]["reasoning_tokens"] = 30
    nested = entry("2025-03-01T12:00:03+00:00", "Third", 620, 50, conversation_id="conv-9")
    nested["response"]["usage"]["completion_tokens_details"] = {"reasoning_tokens": 12}
    completion = {
        "timestamp": 1740830404,
        "request": {"model": "deepseek-v3", "prompt": "Once upon", "max_completion_tokens": 5},
        "response": {"usage": {"prompt_tokens": 3, "completion_tokens": 5}},
    }
    path = write_log(
        tmp_path,
        [
            entry("2025-03-01T12:00:00Z", "First", 100, session_id="conv-9"),
            reasoning_top,
            entry(1740830401, "other", completion=None),
            nested,
            completion,
        ],
    )
    workload = read_gateway(path, block_size=32)
    rows = workload.table.to_pylist()
    assert workload.trace_format is TraceFormat.GATEWAY
    assert (workload.time_unit, workload.block_size) == ("s", 32)
    assert workload.token_counter == "usage; blocks by approx-4-bytes"
    assert [r["arrival_s"] for r in rows] == [0.0, 2.25, 3.0, 4.0]
    assert [(r["input_tokens"], r["output_tokens"], r["reasoning_tokens"]) for r in rows] == [
        (100, 9, None),
        (610, 40, 30),
        (620, 50, 12),
        (3, 5, None),
    ]
    assert [(r["session_id"], r["turn"]) for r in rows] == [("conv-9", 0), ("conv-9", 1), ("conv-9", 2), (None, None)]
    assert orjson.loads(rows[0]["prompt"])[0]["content"] == SYSTEM and rows[3]["prompt"] == "Once upon"
    # Blocks cover the text's approximate tokens, capped at ceil(prompt_tokens / block_size) of the server's count.
    approx_blocks = -(-len(("<|system|>\n" + SYSTEM + "\n<|user|>\nFirst\n").encode()) // 4 // 32)
    assert approx_blocks > 4
    assert len(rows[0]["prefix_blocks"]) == -(-100 // 32)
    assert len(rows[2]["prefix_blocks"]) == approx_blocks
    assert (workload.excluded_rows, workload.excluded_reason) == (1, "failed (response without usage): 1")


def test_common_system_prompt_shares_leading_blocks_and_then_diverges(tmp_path: Path) -> None:
    path = write_log(tmp_path, [entry(0, "What is the refund window?"), entry(1, "Who signs off on expenses?")])
    first, second = read_gateway(path, block_size=16).table.column("prefix_blocks").to_pylist()
    shared_blocks = len(("<|system|>\n" + SYSTEM + "\n<|user|>\n").encode()) // 4 // 16
    assert shared_blocks >= 10
    assert first[:shared_blocks] == second[:shared_blocks]
    assert first[shared_blocks + 1] != second[shared_blocks + 1]


@pytest.mark.parametrize(
    ("bad_line", "reason_part"),
    [
        ('{"timestamp": 1, "request": {', "invalid JSON"),
        ('["list"]', "expected a JSON object"),
        ('{"timestamp": 1, "request": {"prompt": "x"}}', "missing field(s) response"),
        (json.dumps(entry("yesterday", "x")), "neither ISO-8601 nor epoch seconds"),
        (json.dumps(entry(-3, "x")), "non-negative epoch seconds"),
        (
            json.dumps({"timestamp": 1, "request": {"model": "m"}, "response": {}}),
            "needs messages (chat) or a non-empty",
        ),
        (
            json.dumps({"timestamp": 1, "request": {"messages": []}, "response": {}}),
            "non-empty list of message objects",
        ),
        (json.dumps(entry(1, "x", prompt_tokens=0)), "usage.prompt_tokens must be an integer >= 1"),
        (json.dumps(entry(1, "x", completion=-2)), "usage.completion_tokens must be an integer >= 0"),
    ],
)
def test_bad_line_names_file_line_and_reason(tmp_path: Path, bad_line: str, reason_part: str) -> None:
    path = write_log(tmp_path, [entry(0, "a"), "", bad_line, entry(2, "b")])
    with pytest.raises(TraceFormatError) as caught:
        read_gateway(path)
    assert str(caught.value).startswith(f"{path}:3: ")
    assert reason_part in caught.value.reason


# --- capture ----------------------------------------------------------------------------------


def leaked_fragments(path: Path, texts: list[str], width: int = 12) -> list[str]:
    """Every `width`-character piece of `texts` found in the file's bytes or in any decoded cell or
    metadata value (Parquet may compress a stored string, so the bytes alone could hide it)."""
    raw = path.read_bytes()
    table = pq.read_table(path)
    decoded = json.dumps(table.to_pylist(), default=str) + json.dumps(
        {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    )
    leaks = []
    for text in texts:
        for start in range(0, max(1, len(text) - width + 1)):
            piece = text[start : start + width]
            if piece.encode() in raw or piece in decoded:
                leaks.append(piece)
    return leaks


def test_capture_output_holds_no_prompt_text_but_keeps_prefix_sharing(tmp_path: Path) -> None:
    entries = [
        entry(0, "My card ending 9931 was charged twice by Quillmoor", session_id="user@example.com"),
        entry(1, "Please escalate ticket ZX-77881 to the Zebracorn desk", session_id="user@example.com"),
    ]
    log = write_log(tmp_path, entries)
    out = tmp_path / "captured.parquet"
    captured = capture_gateway_log(log, out, block_size=16)
    secrets = [m["content"] for e in entries for m in e["request"]["messages"]]
    secrets += [json.dumps(e["request"]["messages"]) for e in entries] + ["user@example.com"]

    # The detector works: the same workload written with its text is caught.
    with_text = tmp_path / "with_text.parquet"
    write_canonical(read_gateway(log, block_size=16), with_text)
    assert leaked_fragments(with_text, secrets)

    assert leaked_fragments(out, secrets) == []
    back = read_canonical(out)
    rows = back.table.to_pylist()
    assert all(r["prompt"] is None for r in rows)
    assert [r["session_id"] for r in rows] == ["s0", "s0"] and [r["turn"] for r in rows] == [0, 1]
    assert rows[0]["prefix_blocks"][:10] == rows[1]["prefix_blocks"][:10]
    assert rows[0]["prefix_blocks"] != rows[1]["prefix_blocks"]
    assert back.block_size == 16 and captured.num_requests == 2


def test_capture_of_a_bad_log_writes_nothing_and_leaves_an_old_file_alone(tmp_path: Path) -> None:
    log = write_log(tmp_path, [entry(0, "fine"), '{"timestamp": 1}'])
    out = tmp_path / "captured.parquet"
    out.write_bytes(b"previous capture")
    with pytest.raises(TraceFormatError, match=r"gateway.jsonl:2: missing field\(s\) request, response"):
        capture_gateway_log(log, out)
    assert out.read_bytes() == b"previous capture"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["captured.parquet", "gateway.jsonl"]


def run_capture(argv: list[str]) -> int:
    return cli.main(argv)  # the entry point: it turns a refused input into one stderr line and exit 2


def test_capture_command_writes_parquet_and_reports_exclusions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = write_log(tmp_path, [entry(0, "a"), entry(1, "b", completion=None), entry(2, "c")])
    out = tmp_path / "out" / "week.parquet"
    assert run_capture(["capture", str(log), "-o", str(out), "--block-size", "64"]) == 0
    assert "captured 2 requests, 1 excluded (failed (response without usage): 1)" in capsys.readouterr().out
    assert read_canonical(out).block_size == 64
    assert run_capture(["capture", str(tmp_path / "missing.jsonl"), "-o", str(out)]) == 2
    assert "missing.jsonl: no such file" in capsys.readouterr().err
    assert run_capture(["capture", str(log), "-o", str(out), "--tokenizer", str(tmp_path / "tok.json")]) == 2
    assert "tok.json: tokenizer file not found" in capsys.readouterr().err


def test_scan_knows_its_facts_before_the_rows_and_its_rows_are_the_read(tmp_path: Path) -> None:
    path = write_log(
        tmp_path, [entry(5, "b", session_id="c"), entry(3, "a", session_id="c"), entry(4, "x", completion=None)]
    )
    scan = scan_gateway(path, block_size=32)
    assert (scan.excluded.count, scan.excluded.summary) == (1, "failed (response without usage): 1")
    assert scan.token_counter == "usage; blocks by approx-4-bytes"
    table = pa.Table.from_batches(list(scan.batches))
    # Sorted by arrival, rebased on the earliest request, turns numbered: the batches are the workload's rows.
    assert table.equals(read_gateway(path, block_size=32).table)
    assert table.column("request_id").to_pylist() == ["1", "0"]
    assert table.column("turn").to_pylist() == [0, 1]


def test_a_log_of_failures_only_says_so(tmp_path: Path) -> None:
    path = write_log(tmp_path, [entry(0, "a", completion=None), entry(1, "b", completion=None)])
    with pytest.raises(TraceFormatError) as caught:
        read_gateway(path)
    assert str(caught.value) == (
        f"{path}: no requests to replay: the log holds no completed request (failed (response without usage): 2)"
    )
