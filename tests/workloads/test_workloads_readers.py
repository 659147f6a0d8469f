"""Trace readers: Mooncake JSONL and Azure CSV into the canonical Workload, and the format registry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workloads.readers.azure_reader import read_azure
from workloads.readers.mooncake_reader import read_mooncake, scan_mooncake
from workloads.readers.reader_registry import read_trace
from workloads.trace_scan import BATCH_ROWS
from workloads.workload import WORKLOAD_SCHEMA, TraceFormat, TraceFormatError

TRACES = Path(__file__).resolve().parents[2] / "workloads" / "traces"
MOONCAKE_TRACE = TRACES / "mooncake_conversation.jsonl"
AZURE_TRACE = TRACES / "azure_conv_2023.csv"


def mooncake_line(timestamp=0, input_length=600, output_length=10, hash_ids=(1, 2)) -> str:
    return json.dumps(
        {
            "timestamp": timestamp,
            "input_length": input_length,
            "output_length": output_length,
            "hash_ids": list(hash_ids),
        }
    )


# --- Mooncake ---------------------------------------------------------------------------------


def test_mooncake_reads_fields_by_name_and_converts_ms(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    # Field order differs between the lines: the reader must not care.
    path.write_text(
        mooncake_line(1500, 512, 7, [10])
        + "\n"
        + '{"hash_ids": [10, 11, 12], "output_length": 3, "input_length": 1025, "timestamp": 2250}\n'
    )
    workload = read_mooncake(path)
    rows = workload.table.to_pylist()
    assert workload.trace_format is TraceFormat.MOONCAKE
    assert (workload.block_size, workload.time_unit, workload.name) == (512, "ms", "t")
    assert workload.table.schema.equals(WORKLOAD_SCHEMA)
    assert [r["request_id"] for r in rows] == ["0", "1"]
    assert [r["arrival_s"] for r in rows] == [1.5, 2.25]
    assert [r["input_tokens"] for r in rows] == [512, 1025]
    assert [r["output_tokens"] for r in rows] == [7, 3]
    assert [r["prefix_blocks"] for r in rows] == [[10], [10, 11, 12]]
    assert all(r["session_id"] is None and r["turn"] is None for r in rows)


def test_mooncake_sorts_by_arrival_keeping_file_order_for_ties(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(mooncake_line(ts) for ts in (5, 0, 5, 0)) + "\n")
    rows = read_mooncake(path).table.to_pylist()
    assert [r["request_id"] for r in rows] == ["1", "3", "0", "2"]
    assert [r["arrival_s"] for r in rows] == [0.0, 0.0, 0.005, 0.005]


def test_mooncake_skips_blank_lines_and_ids_follow_physical_lines(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(mooncake_line(0) + "\n\n   \n" + mooncake_line(1) + "\n\n")
    rows = read_mooncake(path).table.to_pylist()
    assert [r["request_id"] for r in rows] == ["0", "3"]


@pytest.mark.parametrize(
    ("bad_line", "reason_part"),
    [
        ('{"timestamp": 1, "input_length": 600,', "invalid JSON"),
        ("[1, 2, 3]", "expected a JSON object"),
        ('{"timestamp": 1, "input_length": 600, "hash_ids": [1, 2]}', "missing field(s) output_length"),
        (mooncake_line(timestamp=-5), "timestamp must be a non-negative integer"),
        (mooncake_line(input_length=600.5), "input_length must be a positive integer"),
        (mooncake_line(input_length=0, hash_ids=()), "input_length must be a positive integer"),
        (mooncake_line(output_length=True), "output_length must be a non-negative integer"),
        (mooncake_line(output_length=-1), "output_length must be a non-negative integer"),
        ('{"timestamp": 1, "input_length": 600, "output_length": 1, "hash_ids": "1,2"}', "hash_ids must be a list"),
        (mooncake_line(hash_ids=(1, "2")), "hash_ids must hold only 64-bit integers"),
        (mooncake_line(input_length=1025, hash_ids=(1, 2)), "expected ceil(1025/512) = 3"),
        (mooncake_line(input_length=512, hash_ids=(1, 2)), "expected ceil(512/512) = 1"),
    ],
)
def test_mooncake_bad_line_names_file_line_and_reason(tmp_path: Path, bad_line: str, reason_part: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(mooncake_line(0) + "\n\n" + bad_line + "\n" + mooncake_line(1) + "\n")
    with pytest.raises(TraceFormatError) as caught:
        read_mooncake(path)
    assert caught.value.line == 3
    assert caught.value.path == str(path)
    assert reason_part in caught.value.reason
    assert str(caught.value).startswith(f"{path}:3: ")


def test_mooncake_empty_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("\n \n")
    with pytest.raises(TraceFormatError, match="no requests"):
        read_mooncake(path)


def test_bundled_mooncake_trace_loads_whole() -> None:
    workload = read_mooncake(MOONCAKE_TRACE)  # how fast: bench/, not a timed test
    assert workload.num_requests == 12031
    # workloads/traces/README.md's figures for this trace: mean input 12,035 tokens, mean output 343.
    assert workload.table.column("input_tokens").to_numpy().mean() == pytest.approx(12035, abs=1)


def test_window_of_bundled_mooncake_matches_raw_timestamps() -> None:
    workload = read_mooncake(MOONCAKE_TRACE)
    window = workload.window(211, 12)
    raw_ms = [json.loads(line)["timestamp"] for line in MOONCAKE_TRACE.read_text().splitlines()]
    expected = [ms / 1000 - 211 for ms in raw_ms if 211_000 <= ms < 223_000]
    arrivals = window.table.column("arrival_s").to_pylist()
    assert len(arrivals) == len(expected) > 0
    assert arrivals == pytest.approx(expected)
    assert all(0 <= a < 12 for a in arrivals)
    assert window.block_size == 512 and window.trace_format is TraceFormat.MOONCAKE


def test_mooncake_line_breaks_count_as_bytes_splitlines_counts_them(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    # CRLF, a lone CR, a blank CRLF line, and no break after the last line.
    path.write_bytes(
        (
            mooncake_line(0) + "\r\n" + mooncake_line(1) + "\r" + mooncake_line(2) + "\r\n\r\n" + mooncake_line(3)
        ).encode()
    )
    rows = read_mooncake(path).table.to_pylist()
    assert [r["request_id"] for r in rows] == ["0", "1", "2", "4"]
    assert [r["arrival_s"] for r in rows] == [0.0, 0.001, 0.002, 0.003]


def test_mooncake_lines_with_extra_fields_or_other_spacing_read_like_plain_ones(tmp_path: Path) -> None:
    plain = [json.loads(mooncake_line(ts, 600 + ts, 3, (ts, ts + 1))) for ts in range(6)]
    written = [
        json.dumps(plain[0]),
        json.dumps({**plain[1], "model": "kimi", "extra": {"nested": [1, "x"]}}),
        json.dumps(plain[2], separators=(",", ":")),
        "  " + json.dumps(dict(reversed(list(plain[3].items())))) + "\t",
        json.dumps(plain[4]).replace(", ", " ,   "),
        json.dumps(plain[5]),
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(written) + "\n")
    rows = read_mooncake(path).table.to_pylist()
    assert [r["request_id"] for r in rows] == ["0", "1", "2", "3", "4", "5"]
    assert [r["input_tokens"] for r in rows] == [600, 601, 602, 603, 604, 605]
    assert [r["prefix_blocks"] for r in rows] == [[ts, ts + 1] for ts in range(6)]


def big_mooncake_file(path: Path, lines: int, blank_every: int = 997) -> list[int]:
    """`lines` physical lines, every blank_every-th blank; returns the 0-based lines holding a request."""
    requests = [i for i in range(lines) if i % blank_every != blank_every - 1]
    text = []
    for i in range(lines):
        text.append(
            ""
            if i % blank_every == blank_every - 1
            else f'{{"timestamp": {i}, "input_length": 1, "output_length": 2, "hash_ids": [{i}]}}'
        )
    path.write_text("\n".join(text) + "\n")
    return requests


def test_mooncake_scan_streams_batches_and_ids_stay_physical_lines_across_chunks(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    requests = big_mooncake_file(path, 200_000)  # about 14 MB: several read chunks
    scan = scan_mooncake(path)
    sizes, ids, arrivals = [], [], []
    for batch in scan.batches:
        sizes.append(batch.num_rows)
        ids.extend(batch.column("request_id").to_pylist())
        arrivals.extend(batch.column("arrival_s").to_pylist())
    assert len(sizes) >= 3 and max(sizes) <= 2 * BATCH_ROWS
    assert ids == [str(i) for i in requests]
    assert arrivals == [i / 1000.0 for i in requests]


def test_mooncake_bad_line_after_the_first_chunks_names_its_physical_line(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    big_mooncake_file(path, 150_000)
    with path.open("a") as handle:
        handle.write('{"timestamp": 1, "input_length": 513, "output_length": 1, "hash_ids": [5]}\n')
    scan = scan_mooncake(path)
    consumed = 0
    with pytest.raises(TraceFormatError) as caught:
        for batch in scan.batches:
            consumed += batch.num_rows
    assert str(caught.value) == f"{path}:150001: 1 hash_ids for input_length 513: expected ceil(513/512) = 2"
    assert consumed > 0  # the rows before it came through as batches: the scan streams


# --- Azure ------------------------------------------------------------------------------------


def test_azure_parses_seven_fractional_digits_exactly(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:46.6805901,10,0\n"
        "2023-11-16 18:16:00.0000000,396,109\n"
        "2023-11-17 00:00:00.5,1,1\n"
    )
    workload = read_azure(path)
    rows = workload.table.to_pylist()
    assert (workload.block_size, workload.time_unit) == (0, "datetime")
    assert workload.trace_format is TraceFormat.AZURE
    arrivals = [r["arrival_s"] for r in rows]
    # The 7th digit is 100 ns; a float parse of the whole timestamp would lose it.
    assert arrivals[1] - arrivals[0] == pytest.approx(1e-7, abs=1e-12)
    assert arrivals == pytest.approx([0.0, 1e-7, 13.31941, 20653.81941], abs=1e-9)
    assert [r["input_tokens"] for r in rows] == [374, 10, 396, 1]
    assert [r["output_tokens"] for r in rows] == [44, 0, 109, 1]
    assert all(r["prefix_blocks"] is None for r in rows)


def test_azure_reads_columns_by_header_name(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text(
        "GeneratedTokens,Extra,TIMESTAMP,ContextTokens\n"
        "5,x,2024-05-10 00:00:01.0000000,100\n"
        "6,y,2024-05-10 00:00:00.0000000,200\n"
    )
    rows = read_azure(path).table.to_pylist()
    # Sorted by arrival; offsets from the earliest request.
    assert [(r["request_id"], r["arrival_s"], r["input_tokens"], r["output_tokens"]) for r in rows] == [
        ("1", 0.0, 200, 6),
        ("0", 1.0, 100, 5),
    ]


def test_azure_missing_column_names_file_and_column(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text("TIMESTAMP,ContextTokens\n2023-11-16 18:15:46.6805900,374\n")
    with pytest.raises(TraceFormatError) as caught:
        read_azure(path)
    assert str(path) in str(caught.value)
    assert "GeneratedTokens" in caught.value.reason


@pytest.mark.parametrize(
    ("bad_row", "reason"),
    [
        (
            "2023-11-16 18:15:47.1,12.5,3",
            "ContextTokens must be a whole number in ASCII digits (no sign, point, exponent or separator), got '12.5'",
        ),
        ("2023-11-16 18:15:47.1,0,3", "ContextTokens must be at least 1, got 0"),
        (
            "2023-11-16 18:15:47.1,12,-3",
            "GeneratedTokens must be a whole number in ASCII digits (no sign, point, exponent or separator), got '-3'",
        ),
        (
            "16/11/2023 18:15:47,12,3",
            "TIMESTAMP '16/11/2023 18:15:47' is not a datetime like 2023-11-16 18:15:46.6805900",
        ),
        ("2023-13-16 18:15:47.1,12,3", "TIMESTAMP '2023-13-16 18:15:47.1' is not a valid datetime"),
        ("2023-11-16 18:15:47.1,12", "expected 3 fields as in the header, got 2"),
    ],
)
def test_azure_bad_row_names_physical_line(tmp_path: Path, bad_row: str, reason: str) -> None:
    path = tmp_path / "a.csv"
    # header = line 1, good row = line 2, blank = line 3, bad row = line 4
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n\n" + bad_row + "\n")
    with pytest.raises(TraceFormatError) as caught:
        read_azure(path)
    assert caught.value.line == 4
    assert str(caught.value) == f"{path}:4: {reason}"


def test_azure_header_only_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n")
    with pytest.raises(TraceFormatError, match="no rows"):
        read_azure(path)


def test_bundled_azure_trace_loads_whole() -> None:
    workload = read_azure(AZURE_TRACE)
    # The file holds 19,366 data rows (a count of 19,365 quoted for it is off by one).
    assert workload.num_requests == 19366
    arrivals = workload.table.column("arrival_s").to_pylist()
    assert arrivals[0] == 0.0
    assert arrivals[-1] == pytest.approx(3501.721937)  # 19:14:08.4025270 − 18:15:46.6805900


# --- registry ---------------------------------------------------------------------------------


def test_registry_dispatches_by_enum_or_string() -> None:
    assert read_trace(MOONCAKE_TRACE, TraceFormat.MOONCAKE).num_requests == 12031
    assert read_trace(str(AZURE_TRACE), "azure").trace_format is TraceFormat.AZURE


def test_registry_unknown_format_lists_known_ones() -> None:
    with pytest.raises(TraceFormatError) as caught:
        read_trace(MOONCAKE_TRACE, "lmsys")
    assert "'lmsys'" in str(caught.value)
    assert "mooncake, azure, burstgpt, sharegpt, canonical, gateway" in str(caught.value)


def test_registry_missing_file_names_it(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(TraceFormatError, match="no such file") as caught:
        read_trace(missing, "mooncake")
    assert caught.value.path == str(missing)
