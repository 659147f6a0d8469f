"""Strict CSV (Azure, BurstGPT): a row as wide as its header, numbers read strictly, bounds on counts and
spans, exact `file:line: reason` errors, and streaming in checked batches (docs/workloads.md)."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pytest

from workloads.readers.azure_reader import parse_timestamp_ns, read_azure, scan_azure, timestamp_ns
from workloads.readers.burstgpt_reader import read_burstgpt, scan_burstgpt
from workloads.readers.csv_batches import BadRow, RowRules
from workloads.readers.reader_registry import read_trace
from workloads.trace_scan import BATCH_ROWS, collect
from workloads.workload import WORKLOAD_SCHEMA, TraceFormatError
from workloads.workload_builder import MAX_REQUEST_TOKENS

AZURE = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
AZURE_ROW = "2023-11-16 18:15:46.6805900,374,44\n"
BURST = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
BURST_ROW = "5,ChatGPT,472,18,490,Conversation log\n"
DIGITS = "must be a whole number in ASCII digits (no sign, point, exponent or separator)"


def write(tmp_path: Path, text: str | bytes, name: str = "t.csv") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8", newline="")
    return path


def error_of(read, path: Path) -> str:
    with pytest.raises(TraceFormatError) as caught:
        read(path)
    return str(caught.value)


# --- every row as wide as the header ------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad_row", "reason"),
    [
        ("6,906,47,953,Conversation log", "expected 6 fields as in the header, got 5"),  # the Model cell lost
        ("6,GPT-4,906,47,953,Conversation log,extra", "expected 6 fields as in the header, got 7"),
        ("6,GPT-4,906,47,953,API log7,GPT-4,1,2,3,API log", "expected 6 fields as in the header, got 11"),  # merged
        ("6", "expected 6 fields as in the header, got 1"),
    ],
)
def test_burstgpt_row_of_another_width_is_an_error_naming_its_line(tmp_path: Path, bad_row: str, reason: str) -> None:
    # header = 1, rows = 2, 3, blank = 4, bad = 5
    path = write(tmp_path, BURST + BURST_ROW + BURST_ROW + "\n" + bad_row + "\n" + BURST_ROW)
    assert error_of(read_burstgpt, path) == f"{path}:5: {reason}"


@pytest.mark.parametrize(
    ("bad_row", "reason"),
    [
        ("2023-11-16 18:15:47.1,12", "expected 3 fields as in the header, got 2"),
        ("2023-11-16 18:15:47.1,12,3,", "expected 3 fields as in the header, got 4"),
        ("2023-11-16 18:15:47.1,12,32023-11-16 18:15:48.1,13,4", "expected 3 fields as in the header, got 5"),
    ],
)
def test_azure_row_of_another_width_is_an_error_naming_its_line(tmp_path: Path, bad_row: str, reason: str) -> None:
    path = write(tmp_path, AZURE + AZURE_ROW + bad_row + "\n" + AZURE_ROW)
    assert error_of(read_azure, path) == f"{path}:3: {reason}"


def test_quoted_cells_count_as_one_field_and_lines_after_a_quoted_newline_stay_exact(tmp_path: Path) -> None:
    rows = (
        BURST
        + '6,"GPT,4",100,10,110,"a log type\nover two lines"\n'  # lines 2-3: one row
        + "\n"  # line 4: blank
        + "7,GPT-4,200,20,220,API log\n"  # line 5
    )
    workload = read_burstgpt(write(tmp_path, rows))
    assert workload.table.select(["request_id", "input_tokens"]).to_pylist() == [
        {"request_id": "0", "input_tokens": 100},
        {"request_id": "1", "input_tokens": 200},
    ]
    path = write(tmp_path, rows + "8,GPT-4,300\n", "bad.csv")  # line 6
    assert error_of(read_burstgpt, path) == f"{path}:6: expected 6 fields as in the header, got 3"


def test_blank_lines_are_skipped_and_not_counted_as_data_rows(tmp_path: Path) -> None:
    path = write(tmp_path, AZURE + "\n" + AZURE_ROW + "  \n\t\n" + "2023-11-16 18:15:47.6805900,10,1\n\n")
    rows = read_azure(path).table.select(["request_id", "arrival_s", "input_tokens"]).to_pylist()
    assert rows == [
        {"request_id": "0", "arrival_s": 0.0, "input_tokens": 374},
        {"request_id": "1", "arrival_s": 1.0, "input_tokens": 10},
    ]


def test_crlf_bom_and_no_final_newline_read_the_same(tmp_path: Path) -> None:
    text = BURST + BURST_ROW + "45.5,GPT-4,1087,230,1317,API log\n"
    plain = read_burstgpt(write(tmp_path, text, "plain.csv"))
    crlf = read_burstgpt(write(tmp_path, ("\ufeff" + text).replace("\n", "\r\n").encode(), "crlf.csv"))
    unterminated = read_burstgpt(write(tmp_path, text.rstrip("\n"), "cut.csv"))
    assert crlf.table.equals(plain.table) and unterminated.table.equals(plain.table)


def test_header_faults(tmp_path: Path) -> None:
    twice = write(tmp_path, "TIMESTAMP,ContextTokens,GeneratedTokens,ContextTokens\n" + AZURE_ROW)
    assert error_of(read_azure, twice) == f"{twice}:1: column 'ContextTokens' appears twice in the header"
    blank_first = write(tmp_path, "\n" + AZURE + AZURE_ROW, "blank.csv")
    assert (
        error_of(read_azure, blank_first)
        == f"{blank_first}:1: line 1 names no column: the header must be the first line"
    )
    empty = write(tmp_path, "", "empty.csv")
    assert (
        error_of(read_azure, empty) == f"{empty}: empty file: expected a header TIMESTAMP,ContextTokens,GeneratedTokens"
    )


def test_not_utf8_and_an_unclosed_quote_name_their_line(tmp_path: Path) -> None:
    latin1 = write(tmp_path, (BURST + BURST_ROW + "6,Gr\xfcn,1,1,2,x\n").encode("latin-1"))
    assert error_of(read_burstgpt, latin1) == f"{latin1}:3: not UTF-8: byte 0xfc cannot be decoded"
    unread = write(tmp_path, (BURST + BURST_ROW + BURST_ROW + "6,GPT-4,1,1,2,API \xfc\n").encode("latin-1"), "u.csv")
    assert error_of(read_burstgpt, unread) == f"{unread}:4: not UTF-8: byte 0xfc cannot be decoded"  # Log Type
    unclosed = write(tmp_path, BURST + BURST_ROW + '6,"GPT-4,1,1,2,x\n' + BURST_ROW, "quote.csv")
    assert error_of(read_burstgpt, unclosed) == f"{unclosed}:3: a quoted field starts here and is never closed"


@pytest.mark.parametrize("end", ["\n", ""])
def test_a_quote_left_open_in_the_last_cell_is_an_error_not_a_cell_to_the_end_of_the_file(
    tmp_path: Path, end: str
) -> None:
    path = write(tmp_path, BURST + BURST_ROW + '6,GPT-4,1,1,2,"API log\n' + BURST_ROW + BURST_ROW.rstrip("\n") + end)
    assert error_of(read_burstgpt, path) == f"{path}:3: a quoted field starts here and is never closed"


def test_a_stray_quote_inside_an_unquoted_cell_is_text(tmp_path: Path) -> None:
    path = write(tmp_path, BURST + BURST_ROW + '6,GPT"4,1,1,2,x\n')
    assert read_burstgpt(path, 'GPT"4').table.column("request_id").to_pylist() == ["1"]


# --- numbers read strictly ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cell", "reason"),
    [
        ("1_000", f"ContextTokens {DIGITS}, got '1_000'"),
        ("+7", f"ContextTokens {DIGITS}, got '+7'"),
        ("-7", f"ContextTokens {DIGITS}, got '-7'"),
        ("\u0663", f"ContextTokens {DIGITS}, got '\u0663'"),  # ARABIC-INDIC DIGIT THREE
        ("12.0", f"ContextTokens {DIGITS}, got '12.0'"),
        ("2e9", f"ContextTokens {DIGITS}, got '2e9'"),
        ("7 7", f"ContextTokens {DIGITS}, got '7 7'"),
        ("", "ContextTokens is empty"),
        ("0", "ContextTokens must be at least 1, got 0"),
        (
            "2000000000",
            f"ContextTokens = 2000000000 is more than MAX_REQUEST_TOKENS = {MAX_REQUEST_TOKENS} "
            "(no model takes a request that long)",
        ),
        (
            "99999999999999999999999",
            f"ContextTokens = 99999999999999999999999 is more than MAX_REQUEST_TOKENS = {MAX_REQUEST_TOKENS} "
            "(no model takes a request that long)",
        ),
    ],
)
def test_azure_count_cells_are_ascii_digits_within_bounds(tmp_path: Path, cell: str, reason: str) -> None:
    path = write(tmp_path, AZURE + AZURE_ROW + f"2023-11-16 18:15:47.1,{cell},3\n")
    assert error_of(read_azure, path) == f"{path}:3: {reason}"


def test_counts_may_be_padded_with_spaces_and_leading_zeros(tmp_path: Path) -> None:
    path = write(tmp_path, AZURE + '2023-11-16 18:15:47.1, 7 ,"\t007"\n')
    row = read_azure(path).table.to_pylist()[0]
    assert (row["input_tokens"], row["output_tokens"]) == (7, 7)


def test_a_request_of_more_than_max_request_tokens_is_refused(tmp_path: Path) -> None:
    at_bound = write(tmp_path, AZURE + f"2023-11-16 18:15:47.1,{MAX_REQUEST_TOKENS - 5},5\n")
    assert read_azure(at_bound).num_requests == 1
    over = write(tmp_path, BURST + f"5,GPT-4,{MAX_REQUEST_TOKENS},1,0,x\n", "over.csv")
    assert error_of(read_burstgpt, over) == (
        f"{over}:2: Request tokens + Response tokens = {MAX_REQUEST_TOKENS + 1} is more than "
        f"MAX_REQUEST_TOKENS = {MAX_REQUEST_TOKENS} (no model takes a request that long)"
    )


@pytest.mark.parametrize(
    ("stamp", "reason"),
    [
        ("nan", "TIMESTAMP 'nan' is not a datetime like 2023-11-16 18:15:46.6805900"),
        ("inf", "TIMESTAMP 'inf' is not a datetime like 2023-11-16 18:15:46.6805900"),
        ("1700158546", "TIMESTAMP '1700158546' is not a datetime like 2023-11-16 18:15:46.6805900"),
        (
            "2023-11-16 18:15:4\u0666",
            "TIMESTAMP '2023-11-16 18:15:4\u0666' is not a datetime like 2023-11-16 18:15:46.6805900",
        ),
        ("2023-11-16 18:15:60", "TIMESTAMP '2023-11-16 18:15:60' is not a valid datetime"),
        ("2023-02-29 00:00:00", "TIMESTAMP '2023-02-29 00:00:00' is not a valid datetime"),
        ("2023-11-16 24:00:00", "TIMESTAMP '2023-11-16 24:00:00' is not a valid datetime"),
        ("2023-11-16 18:15:47+24:00", "TIMESTAMP '2023-11-16 18:15:47+24:00' is not a valid datetime"),
        ("1999-12-31 23:59:59", "TIMESTAMP '1999-12-31 23:59:59': year 1999 is outside 2000-2100"),
        ("2101-01-01 00:00:00", "TIMESTAMP '2101-01-01 00:00:00': year 2101 is outside 2000-2100"),
        (
            "2024-12-20 21:15:46",  # 400 days and 3 hours after the first row
            "TIMESTAMP '2024-12-20 21:15:46' is 400.1 days from another row's: a trace spans at most 400 days "
            "(MAX_TRACE_SPAN_S)",
        ),
    ],
)
def test_azure_timestamps_are_real_datetimes_within_a_sane_span(tmp_path: Path, stamp: str, reason: str) -> None:
    path = write(tmp_path, AZURE + AZURE_ROW + f"{stamp},12,3\n")
    assert error_of(read_azure, path) == f"{path}:3: {reason}"


def test_azure_span_may_reach_400_days_and_zones_are_read(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        AZURE + "2023-11-16 18:00:00,1,1\n2024-12-20 18:00:00Z,1,1\n2023-11-16T19:00:00.5+01:00,1,1\n",
    )
    assert read_azure(path).table.column("arrival_s").to_pylist() == [0.0, 0.5, 400 * 86_400.0]


def test_vectorized_timestamps_equal_the_scalar_parse_to_the_nanosecond() -> None:
    rng = random.Random(12)
    stamps = []
    for _ in range(2000):
        stamp = f"{rng.randint(2000, 2100):04d}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        stamp += rng.choice(" T") + f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
        if rng.random() < 0.8:
            stamp += "." + "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 9)))
        stamp += rng.choice(["", "", "Z", "+05:30", "-0800", "+00:00"])
        stamps.append(stamp)
    rules = RowRules(len(stamps))
    vectorized = timestamp_ns(pa.array(stamps), rules)
    rules.raise_first()
    assert vectorized.tolist() == [parse_timestamp_ns(stamp) for stamp in stamps]
    # Only naive stamps in a batch take the fast path; the zoned ones above took the other.
    naive = [s for s in stamps if s[-1].isdigit() and s[-5] not in "+-" and s[-6] not in "+-"]
    assert timestamp_ns(pa.array(naive), RowRules(len(naive))).tolist() == [parse_timestamp_ns(s) for s in naive]


def test_a_bad_datetime_among_good_ones_is_found_in_its_batch() -> None:
    stamps = ["2023-11-16 18:15:46.1"] * 5 + ["2023-04-31 00:00:00"] + ["2023-11-16 18:15:47"] * 3
    rules = RowRules(len(stamps))
    timestamp_ns(pa.array(stamps), rules)
    with pytest.raises(BadRow) as caught:
        rules.raise_first()
    assert (caught.value.offset, caught.value.reason) == (5, "TIMESTAMP '2023-04-31 00:00:00' is not a valid datetime")


@pytest.mark.parametrize(
    ("stamp", "reason"),
    [
        ("nan", "Timestamp must be seconds >= 0 in ASCII digits like 45 or 45.5, got 'nan'"),
        ("inf", "Timestamp must be seconds >= 0 in ASCII digits like 45 or 45.5, got 'inf'"),
        ("1e3", "Timestamp must be seconds >= 0 in ASCII digits like 45 or 45.5, got '1e3'"),
        ("+5", "Timestamp must be seconds >= 0 in ASCII digits like 45 or 45.5, got '+5'"),
        ("5.", "Timestamp must be seconds >= 0 in ASCII digits like 45 or 45.5, got '5.'"),
        ("34560001", "Timestamp '34560001' s is past 400 days: a trace spans at most that (MAX_TRACE_SPAN_S)"),
    ],
)
def test_burstgpt_timestamps_are_plain_seconds_within_400_days(tmp_path: Path, stamp: str, reason: str) -> None:
    path = write(tmp_path, BURST + BURST_ROW + f"{stamp},GPT-4,1,1,2,x\n")
    assert error_of(read_burstgpt, path) == f"{path}:3: {reason}"


def test_burstgpt_empty_model_is_an_error_and_empty_session_is_no_session(tmp_path: Path) -> None:
    path = write(tmp_path, BURST + "6, ,1,1,2,x\n")
    assert error_of(read_burstgpt, path) == f"{path}:2: Model is empty"
    eight = "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    rows = read_burstgpt(write(tmp_path, eight + "1, ,0,GPT-4,5,5,10,x\n2, s1 ,0,GPT-4,5,5,10,x\n", "s.csv"))
    assert rows.table.select(["session_id", "turn"]).to_pylist() == [
        {"session_id": None, "turn": None},
        {"session_id": "s1", "turn": 0},
    ]


# --- streaming ---------------------------------------------------------------------------------


def azure_file(tmp_path: Path, rows: int, bad_at: int | None = None) -> tuple[Path, int | None]:
    """`rows` data rows one ms apart, with a blank line every 1,000; the physical line of row `bad_at`."""
    lines = [AZURE.rstrip("\n")]
    bad_line = None
    for row in range(rows):
        if row % 1000 == 999:
            lines.append("")
        cell = "1_000" if row == bad_at else str(100 + row % 50)
        if row == bad_at:
            bad_line = len(lines) + 1
        lines.append(f"2024-05-10 00:{row // 60_000 % 60:02d}:{row // 1000 % 60:02d}.{row % 1000:03d},{cell},7")
    path = tmp_path / "big.csv"
    path.write_text("\n".join(lines) + "\n")
    return path, bad_line


def test_scan_streams_checked_batches_of_about_batch_rows(tmp_path: Path) -> None:
    path, _ = azure_file(tmp_path, 3 * BATCH_ROWS + 10)
    batches = list(scan_azure(path).batches)
    assert len(batches) >= 3
    assert all(batch.schema.equals(WORKLOAD_SCHEMA) for batch in batches)
    assert max(batch.num_rows for batch in batches) < 2 * BATCH_ROWS
    ids = pa.concat_arrays([batch.column("request_id") for batch in batches]).to_pylist()
    assert ids == [str(row) for row in range(3 * BATCH_ROWS + 10)]


def test_a_bad_row_deep_in_the_file_is_named_by_its_physical_line_after_earlier_batches(tmp_path: Path) -> None:
    bad_at = 2 * BATCH_ROWS + 123
    path, bad_line = azure_file(tmp_path, 3 * BATCH_ROWS, bad_at=bad_at)
    scan = scan_azure(path)
    received = 0
    with pytest.raises(TraceFormatError) as caught:
        for batch in scan.batches:
            received += batch.num_rows
    assert received > 0  # the rows before it were streamed already
    assert bad_line == bad_at + 2 + bad_at // 1000  # header, then one blank line every 1,000 rows
    assert str(caught.value) == f"{path}:{bad_line}: ContextTokens {DIGITS}, got '1_000'"


def test_header_faults_raise_at_scan_row_faults_as_batches_are_consumed(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="missing column"):
        scan_burstgpt(write(tmp_path, "Timestamp,Model\n1,x\n"))
    scan = scan_burstgpt(write(tmp_path, BURST + "x,GPT-4,1,1,2,x\n", "rows.csv"))
    with pytest.raises(TraceFormatError, match=":2: Timestamp must be seconds"):
        collect(scan)


def test_exclusions_fill_as_batches_are_consumed_in_first_seen_order(tmp_path: Path) -> None:
    lines = [BURST.rstrip("\n")]
    for row in range(BATCH_ROWS + 50):
        request, response = (0, 5) if row == 3 else (10, 0) if row > BATCH_ROWS else (10, 5)
        lines.append(f"{row},GPT-4,{request},{response},0,x")
    scan = scan_burstgpt(write(tmp_path, "\n".join(lines) + "\n"))
    assert scan.excluded.count == 0
    workload = collect(scan)
    assert workload.num_requests == BATCH_ROWS
    assert workload.excluded_reason == "empty request (Request tokens = 0): 1; failed (Response tokens = 0): 49"


def test_the_registry_reports_a_bad_row_as_a_trace_format_error(tmp_path: Path) -> None:
    path = write(tmp_path, BURST + "6,906,47,953,x\n")
    with pytest.raises(TraceFormatError) as caught:
        read_trace(path, "burstgpt")
    assert str(caught.value) == f"{path}:2: expected 6 fields as in the header, got 5"
