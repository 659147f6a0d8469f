"""Canonical Parquet: a lossless round trip of rows and facts, and clear errors for files that are not one."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from workloads.canonical_parquet import read_canonical, scan_canonical, write_canonical
from workloads.readers.burstgpt_reader import read_burstgpt
from workloads.readers.mooncake_reader import read_mooncake
from workloads.readers.reader_registry import read_trace
from workloads.workload import WORKLOAD_SCHEMA, TraceFormat, TraceFormatError
from workloads.workload_file import open_workload

MOONCAKE_TRACE = Path(__file__).resolve().parents[2] / "workloads" / "traces" / "mooncake_conversation.jsonl"


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
        "response_format": [None] * 3,
        "constrained": [None] * 3,
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


# --- read-time checks: what inspect accepts, replay can run ---------------------------------


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"prefix_blocks": [[1, 2], [3, None], None]}, "row 2: prefix_blocks holds a null block hash"),
        ({"turn": [0, -1, None], "session_id": ["s", "s", None]}, "row 2: turn must be >= 0"),
        ({"reasoning_tokens": [None, None, -3]}, "row 3: reasoning_tokens must be between 0 and output_tokens"),
        ({"reasoning_tokens": [1, 2, None]}, "row 2: reasoning_tokens must be between 0 and output_tokens"),
        ({"arrival_s": [0.0, float("inf"), 1.0]}, "row 2: arrival_s must be finite, >= 0 and at most 34560000 s"),
        ({"arrival_s": [0.0, 1.0, 34_560_000.5]}, "row 3: arrival_s must be finite, >= 0 and at most 34560000 s"),
        ({"input_tokens": [5, 10_485_760, 7]}, "row 2: input_tokens + output_tokens must be at most 10485760"),
        (
            {"prefix_blocks": [[1], [2, 3, 4], None]},
            "row 2: prefix_blocks holds more than ceil(input_tokens / 4) blocks",
        ),
        ({"request_id": ["a", "b", "a"]}, "row 3: request_id values are not unique: 'a' is also row 1"),
    ],
)
def test_values_a_replay_cannot_run_fail_at_read_time(tmp_path: Path, overrides: dict, reason: str) -> None:
    path = tmp_path / "bad.parquet"
    table = canonical_rows(**overrides).replace_schema_metadata({"costbench.block_size": "4"})
    pq.write_table(table, path)
    with pytest.raises(TraceFormatError) as caught:
        read_canonical(path)
    assert str(caught.value).startswith(f"{path}: {reason}")


def test_the_first_bad_row_is_named_in_a_later_row_group(tmp_path: Path) -> None:
    path = tmp_path / "groups.parquet"
    count = 250
    table = pa.table(
        {
            "request_id": [f"r{i}" for i in range(count)],
            "session_id": pa.nulls(count, pa.string()),
            "turn": pa.nulls(count, pa.int32()),
            "arrival_s": [float(i) for i in range(count)],
            "input_tokens": pa.array([5] * 200 + [0] + [5] * 49, pa.int32()),
            "output_tokens": pa.array([1] * count, pa.int32()),
            "prefix_blocks": pa.nulls(count, pa.list_(pa.int64())),
            "prompt": pa.nulls(count, pa.string()),
            "reasoning_tokens": pa.array([None] * 220 + [9] + [None] * 29, pa.int32()),
        }
    )
    pq.write_table(table, path, row_group_size=64)
    with pytest.raises(TraceFormatError) as caught:
        read_canonical(path)
    assert caught.value.reason == "row 201: input_tokens must be >= 1"


def test_a_corrupt_page_fails_at_read_time_naming_its_rows(tmp_path: Path) -> None:
    original = read_mooncake(MOONCAKE_TRACE)
    path = write_canonical(original, tmp_path / "w.parquet")
    data = bytearray(path.read_bytes())
    parquet = pq.ParquetFile(path)
    input_chunk = parquet.metadata.row_group(0).column(WORKLOAD_SCHEMA.get_field_index("input_tokens"))
    # One bit flipped in the middle of the input_tokens pages: the value could still decode as a number.
    middle = input_chunk.data_page_offset + input_chunk.total_compressed_size // 2
    data[middle] ^= 0x10
    (tmp_path / "bad.parquet").write_bytes(data)
    with pytest.raises(TraceFormatError) as caught:
        read_canonical(tmp_path / "bad.parquet")
    assert caught.value.reason.startswith("rows 1-12031 (row group 0): unreadable Parquet data: ")
    # What inspect does (spool the trace) fails the same way, so no replay ever starts on it.
    with pytest.raises(TraceFormatError, match=r"rows 1-12031 \(row group 0\): unreadable Parquet data"):
        open_workload(tmp_path / "bad.parquet", "canonical", tmp_path / "cache")


def test_a_truncated_file_is_not_readable(tmp_path: Path) -> None:
    path = write_canonical(read_mooncake(MOONCAKE_TRACE).window(0, 60), tmp_path / "w.parquet")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 100])
    with pytest.raises(TraceFormatError, match="not a readable Parquet file"):
        read_canonical(path)


def test_facts_written_at_file_level_read_back(tmp_path: Path) -> None:
    # What workloads/workload_file.py's spool does: the facts are known only at the end, so they go into the
    # file-level key-value metadata at close, after the schema was written.
    path = tmp_path / "spooled.parquet"
    with pq.ParquetWriter(path, WORKLOAD_SCHEMA) as writer:
        writer.write_table(canonical_rows().cast(WORKLOAD_SCHEMA))
        writer.add_key_value_metadata(
            {"costbench.name": "week10", "costbench.excluded_rows": "4", "costbench.excluded_reason": "failed: 4"}
        )
    back = read_canonical(path)
    assert (back.name, back.excluded_rows, back.excluded_reason) == ("week10", 4, "failed: 4")


def test_a_spooled_trace_reads_back_as_canonical(tmp_path: Path) -> None:
    spooled = open_workload(MOONCAKE_TRACE, "mooncake", tmp_path / "cache")
    back = read_canonical(spooled.path)
    original = read_mooncake(MOONCAKE_TRACE)
    assert back.table.equals(original.table)
    assert (back.name, back.time_unit, back.block_size) == (original.name, "ms", 512)


def test_scan_streams_row_groups_in_file_order(tmp_path: Path) -> None:
    original = read_mooncake(MOONCAKE_TRACE)
    path = tmp_path / "w.parquet"
    pq.write_table(original.table.replace_schema_metadata({"costbench.block_size": "512"}), path, row_group_size=5000)
    batches = list(scan_canonical(path).batches)
    assert [batch.num_rows for batch in batches] == [5000, 5000, 2031]
    assert pa.Table.from_batches(batches).equals(original.table)


def test_foreign_columns_that_would_be_misread_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "foreign.parquet"
    rows = canonical_rows()
    cases = [
        (
            rows.set_column(4, "input_tokens", pa.array([True, True, False])),
            "column input_tokens holds booleans (bool), not its values",
        ),
        (
            rows.set_column(4, "input_tokens", pa.array([5, 2**40, 7])),
            "row 2: input_tokens 1099511627776 does not fit int32",
        ),
        (rows.set_column(4, "input_tokens", pa.array([5.0, 6.5, 7.0])), "row 2: input_tokens 6.5 does not fit int32"),
        (rows.append_column("arrival_s", pa.array([9.0, 9.0, 9.0])), "column(s) arrival_s appear more than once"),
        (rows.replace_schema_metadata({b"costbench.name": b"\xff"}), "metadata b'costbench.name' is not UTF-8 text"),
        (
            rows.replace_schema_metadata({"costbench.excluded_rows": "-1"}),
            "metadata costbench.excluded_rows is not a valid count: '-1'",
        ),
    ]
    for table, reason in cases:
        pq.write_table(table, path)
        with pytest.raises(TraceFormatError) as caught:
            read_canonical(path)
        assert str(caught.value) == f"{path}: {reason}"
