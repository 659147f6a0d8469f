"""BurstGPT CSV: both column variants by header name, failures excluded and counted, sessions and turns."""

from __future__ import annotations

from pathlib import Path

import pytest

from workloads.readers.burstgpt_reader import read_burstgpt
from workloads.readers.reader_registry import ReadOptions, read_trace
from workloads.trace_stats import trace_stats
from workloads.workload import TraceFormat, TraceFormatError

SIX = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
EIGHT = "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "burst.csv"
    path.write_text(text)
    return path


def test_six_column_file_reads_seconds_and_excludes_failures(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        SIX
        + "5,ChatGPT,472,18,490,Conversation log\n"
        + "7,ChatGPT,300,0,300,API log\n"  # failed: no response
        + "45.5,GPT-4,1087,230,1317,Conversation log\n"
        + "50,GPT-4,0,20,20,API log\n"  # sent nothing
        + "60,ChatGPT,10,0,10,API log\n",
    )
    workload = read_burstgpt(path)
    rows = workload.table.to_pylist()
    assert workload.trace_format is TraceFormat.BURSTGPT
    assert (workload.time_unit, workload.block_size) == ("s", 0)
    assert [(r["arrival_s"], r["input_tokens"], r["output_tokens"]) for r in rows] == [
        (5.0, 472, 18),
        (45.5, 1087, 230),
    ]
    assert [r["request_id"] for r in rows] == ["0", "2"]  # data row numbers, stable under exclusion
    assert workload.excluded_rows == 3
    assert workload.excluded_reason == "failed (Response tokens = 0): 2; empty request (Request tokens = 0): 1"
    assert trace_stats(workload).excluded_rows == 3


def test_eight_column_file_with_columns_reordered_maps_sessions_and_turns_by_time(tmp_path: Path) -> None:
    header = "Model,Log Type,Response tokens,Request tokens,Session ID,Timestamp,Elapsed time,Total tokens\n"
    path = write(
        tmp_path,
        header
        + "ChatGPT,Conversation log,10,100,b,30,1,110\n"
        + "ChatGPT,Conversation log,11,101,a,20,1,112\n"
        + "ChatGPT,Conversation log,12,102,a,10,1,114\n"
        + "ChatGPT,API log,13,103,,15,1,116\n",
    )
    rows = read_burstgpt(path).table.to_pylist()
    assert [(r["arrival_s"], r["session_id"], r["turn"], r["input_tokens"]) for r in rows] == [
        (10.0, "a", 0, 102),
        (15.0, None, None, 103),
        (20.0, "a", 1, 101),
        (30.0, "b", 0, 100),
    ]
    assert read_trace(path, "burstgpt").num_requests == 4


def test_model_filter_keeps_one_model_and_counts_the_rest(tmp_path: Path) -> None:
    path = write(tmp_path, EIGHT + "1,s1,0,ChatGPT,10,5,15,x\n2,s2,0,GPT-4,20,6,26,x\n3,s3,0,GPT-4,30,0,30,x\n")
    workload = read_trace(path, "burstgpt", ReadOptions(model="GPT-4"))
    assert workload.table.column("input_tokens").to_pylist() == [20]
    assert workload.excluded_rows == 2
    assert (
        "other model than GPT-4: 1" in workload.excluded_reason
        and "failed (Response tokens = 0): 1" in workload.excluded_reason
    )


@pytest.mark.parametrize(
    ("bad_row", "reason"),
    [
        ("soon,ChatGPT,10,5,15,x", "Timestamp must be seconds >= 0 in ASCII digits like 45 or 45.5, got 'soon'"),
        ("-1,ChatGPT,10,5,15,x", "Timestamp must be seconds >= 0 in ASCII digits like 45 or 45.5, got '-1'"),
        (
            "3,ChatGPT,1.5,5,15,x",
            "Request tokens must be a whole number in ASCII digits (no sign, point, exponent or separator), got '1.5'",
        ),
        (
            "3,ChatGPT,10,-5,15,x",
            "Response tokens must be a whole number in ASCII digits (no sign, point, exponent or separator), got '-5'",
        ),
        ("3,ChatGPT,10", "expected 6 fields as in the header, got 3"),
    ],
)
def test_bad_row_names_file_line_and_reason(tmp_path: Path, bad_row: str, reason: str) -> None:
    path = write(tmp_path, SIX + "1,ChatGPT,10,5,15,x\n" + bad_row + "\n2,ChatGPT,10,5,15,x\n")
    with pytest.raises(TraceFormatError) as caught:
        read_burstgpt(path)
    assert str(caught.value) == f"{path}:3: {reason}"


def test_missing_column_and_all_failed_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="missing column"):
        read_burstgpt(write(tmp_path, "Timestamp,Model,Request tokens\n1,x,2\n"))
    with pytest.raises(TraceFormatError, match=r"no usable rows \(failed \(Response tokens = 0\): 1\)"):
        read_burstgpt(write(tmp_path, SIX + "1,ChatGPT,10,0,10,x\n"))
