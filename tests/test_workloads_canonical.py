"""Canonical Parquet: a lossless round trip of rows and facts, and clear errors for files that are not one."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from workloads.burstgpt_reader import read_burstgpt
from workloads.canonical_parquet import read_canonical, write_canonical
from workloads.mooncake_reader import read_mooncake
from workloads.reader_registry import read_trace
from workloads.workload import WORKLOAD_SCHEMA, TraceFormat, TraceFormatError

MOONCAKE_TRACE = Path(__file__).resolve().parent.parent / "workloads" / "traces" / "mooncake_conversation.jsonl"


def test_round_trip_keeps_rows_and_facts(tmp_path: Path) -> None:
    original = read_mooncake(MOONCAKE_TRACE).window(100, 30)
    path = write_canonical(original, tmp_path / "deep" / "w.parquet")
    back = read_trace(path, "canonical")
    assert back.table.equals(original.table)
    assert back.content_hash == original.content_hash
    assert (back.name, back.time_unit, back.block_size, back.trace_format) == (
        original.name,
        "ms",
        512,
        TraceFormat.CANONICAL,
    )
    assert pq.read_schema(path).metadata[b"costbench.source_format"] == b"mooncake"
    assert [p.name for p in path.parent.iterdir()] == ["w.parquet"]  # no temporary file left behind


def test_round_trip_keeps_exclusions_and_sessions(tmp_path: Path) -> None:
    csv = tmp_path / "b.csv"
    csv.write_text(
        "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "1,s,0,ChatGPT,10,5,15,x\n2,s,0,ChatGPT,11,0,11,x\n3,s,0,ChatGPT,12,6,18,x\n"
    )
    original = read_burstgpt(csv)
    back = read_canonical(write_canonical(original, tmp_path / "b.parquet"))
    assert back.table.equals(original.table)
    assert (back.excluded_rows, back.excluded_reason) == (1, "failed (Response tokens = 0): 1")
    assert (back.token_counter, back.arrival_process, back.time_unit) == ("trace", "trace", "s")


def test_a_foreign_file_reads_by_column_name_with_castable_types(tmp_path: Path) -> None:
    path = tmp_path / "foreign.parquet"
    pq.write_table(
        pa.table(
            {
                "output_tokens": pa.array([3, 4], pa.int64()),
                "input_tokens": pa.array([10, 20], pa.int64()),
                "arrival_s": [1.0, 0.5],
                "request_id": ["a", "b"],
                "session_id": [None, None],
                "turn": [None, None],
                "prefix_blocks": pa.nulls(2, pa.list_(pa.int64())),
                "prompt": pa.nulls(2, pa.string()),
                "reasoning_tokens": pa.nulls(2, pa.int32()),
                "extra": ["x", "y"],
            }
        ),
        path,
    )
    workload = read_canonical(path)
    assert workload.table.schema.equals(WORKLOAD_SCHEMA)
    assert workload.table.column("request_id").to_pylist() == ["b", "a"]  # sorted by arrival
    assert (workload.name, workload.time_unit, workload.block_size) == ("foreign", "s", 0)


def canonical_rows(**overrides: list) -> pa.Table:
    columns = {
        "request_id": ["a", "b", "c"],
        "session_id": [None] * 3,
        "turn": [None] * 3,
        "arrival_s": [0.0, 1.0, 2.0],
        "input_tokens": [5, 6, 7],
        "output_tokens": [1, 1, 1],
        "prefix_blocks": [None] * 3,
        "prompt": [None] * 3,
        "reasoning_tokens": [None] * 3,
    }
    columns.update(overrides)
    return pa.table(
        columns, schema=WORKLOAD_SCHEMA.with_metadata({}).remove(0).insert(0, pa.field("request_id", pa.string()))
    )


@pytest.mark.parametrize(
    ("overrides", "reason_part"),
    [
        ({"input_tokens": [5, 0, 7]}, "row 2: input_tokens must be >= 1"),
        ({"output_tokens": [1, 1, -1]}, "row 3: output_tokens must be >= 0"),
        ({"arrival_s": [0.0, float("nan"), 1.0]}, "row 2: arrival_s must be finite"),
        ({"request_id": ["a", None, "c"]}, "row 2: request_id is null"),
        ({"request_id": ["a", "a", "c"]}, "request_id values are not unique"),
        ({"prefix_blocks": [[1], None, None]}, "block_size is missing"),
    ],
)
def test_bad_values_name_file_row_and_reason(tmp_path: Path, overrides: dict, reason_part: str) -> None:
    path = tmp_path / "bad.parquet"
    pq.write_table(canonical_rows(**overrides), path)
    with pytest.raises(TraceFormatError) as caught:
        read_canonical(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert reason_part in caught.value.reason


def test_not_parquet_or_missing_columns_are_clear(tmp_path: Path) -> None:
    path = tmp_path / "w.parquet"
    path.write_text("not parquet")
    with pytest.raises(TraceFormatError, match="not a readable Parquet file"):
        read_canonical(path)
    pq.write_table(canonical_rows().drop_columns(["turn", "prompt"]), path)
    with pytest.raises(TraceFormatError, match=r"missing column\(s\) turn, prompt"):
        read_canonical(path)
