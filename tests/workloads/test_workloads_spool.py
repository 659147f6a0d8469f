"""Big traces: spooled to a sorted canonical Parquet file, read back a window at a time, counted in one pass.

The spool must give exactly the workload the in-memory reader gives (rows, order, turns, facts), for
ordered traces and for traces whose lines are out of order; a bad line leaves nothing behind; a cached
spool is reused only while the source file is unchanged.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from replay.replay_config import ArrivalProcess, ReplayConfig
from replay.schedule.request_selection import rows_to_replay
from workloads.readers.reader_registry import read_trace
from workloads.trace_stats import trace_stats
from workloads.workload import TraceFormatError
from workloads.workload_file import open_workload

TRACES = Path(__file__).resolve().parents[2] / "workloads" / "traces"
BUNDLED = [("mooncake", TRACES / "mooncake_conversation.jsonl"), ("azure", TRACES / "azure_conv_2023.csv")]


@pytest.mark.parametrize(("trace_format", "path"), BUNDLED)
def test_spooled_bundled_trace_is_the_in_memory_workload(tmp_path, trace_format, path):
    spooled = open_workload(path, trace_format, tmp_path)
    expected = read_trace(path, trace_format)
    assert spooled.num_requests == expected.num_requests
    assert spooled.rows().table.equals(expected.table)
    assert spooled.header.block_size == expected.block_size
    assert spooled.header.time_unit == expected.time_unit
    # A window reads the same rows as windowing the whole workload, and trace_stats agree on file and memory.
    window = spooled.window_rows(300.0, 120.0)
    assert window.window(300.0, 120.0).table.equals(expected.window(300.0, 120.0).table)
    assert window.num_requests == expected.window(300.0, 120.0).num_requests > 0
    assert trace_stats(spooled) == trace_stats(expected)


def _shuffled_mooncake(tmp_path: Path) -> Path:
    lines = (TRACES / "mooncake_conversation.jsonl").read_text().splitlines()[:3000]
    random.Random(7).shuffle(lines)
    path = tmp_path / "shuffled.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_an_out_of_order_trace_is_sorted_stably_out_of_core(tmp_path):
    path = _shuffled_mooncake(tmp_path)
    spooled = open_workload(path, "mooncake", tmp_path / "cache")
    expected = read_trace(path, "mooncake")
    assert spooled.rows().table.equals(expected.table)
    arrivals = spooled.rows().table.column("arrival_s").to_pylist()
    assert arrivals == sorted(arrivals)
    # The sorted file still carries the workload's facts, so a later run reads it back from the cache.
    again = open_workload(path, "mooncake", tmp_path / "cache")
    assert again.header == spooled.header


def test_turns_are_numbered_across_the_whole_out_of_order_file(tmp_path):
    header = "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    rows = [(t, f"s{t % 5}") for t in range(200)]
    random.Random(3).shuffle(rows)
    body = "".join(f"{t},{session},1,ChatGPT,{10 + t},{5 + t},{15 + 2 * t},Conversation log\n" for t, session in rows)
    path = tmp_path / "burst.csv"
    path.write_text(header + body + "500,s1,1,ChatGPT,300,0,300,API log\n")
    spooled = open_workload(path, "burstgpt", tmp_path / "cache")
    expected = read_trace(path, "burstgpt")
    assert spooled.rows().table.equals(expected.table)
    assert spooled.header.excluded_rows == expected.excluded_rows == 1
    turns = {}
    for row in spooled.rows().table.to_pylist():
        turns.setdefault(row["session_id"], []).append(row["turn"])
    assert all(sequence == list(range(len(sequence))) for sequence in turns.values())


def test_a_bad_line_leaves_no_spooled_or_partial_file(tmp_path):
    lines = (TRACES / "mooncake_conversation.jsonl").read_text().splitlines()
    lines[-3] = '{"timestamp": 1, "input_length": 10, "output_length": 2, "hash_ids": []}'
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    cache = tmp_path / "cache"
    with pytest.raises(TraceFormatError, match=rf"bad.jsonl:{len(lines) - 2}: 0 hash_ids for input_length 10"):
        open_workload(path, "mooncake", cache)
    assert not cache.exists() or list(cache.iterdir()) == []


def test_a_cached_spool_is_reused_only_while_the_source_is_unchanged(tmp_path):
    path = tmp_path / "trace.jsonl"
    lines = (TRACES / "mooncake_conversation.jsonl").read_text().splitlines()
    path.write_text("\n".join(lines[:100]) + "\n")
    cache = tmp_path / "cache"
    first = open_workload(path, "mooncake", cache)
    assert open_workload(path, "mooncake", cache).path == first.path
    path.write_text("\n".join(lines[:150]) + "\n")
    os.utime(path, ns=(first.path.stat().st_mtime_ns + 10**9,) * 2)
    changed = open_workload(path, "mooncake", cache)
    assert changed.path != first.path and changed.num_requests == 150


def test_a_replay_window_reads_only_the_row_groups_it_touches(tmp_path):
    path = tmp_path / "long.jsonl"
    lines = (TRACES / "mooncake_conversation.jsonl").read_text().splitlines()
    path.write_text("\n".join(lines) + "\n")
    spooled = open_workload(path, "mooncake", tmp_path / "cache")
    config = ReplayConfig(url="http://127.0.0.1:1", start_s=600.0, duration_s=30.0)
    window = rows_to_replay(spooled, config)
    arrivals = window.table.column("arrival_s").to_pylist()
    assert arrivals and min(arrivals) >= 600.0 and max(arrivals) < 630.0
    assert pq.ParquetFile(spooled.path).metadata.num_rows == spooled.num_requests == len(lines)
    # Synthetic arrivals replace the trace's schedule, so they take every row and window afterwards.
    synthetic = ReplayConfig(
        url="http://127.0.0.1:1", arrival_process=ArrivalProcess.POISSON, rate_rps=5.0, start_s=0.0, duration_s=10.0
    )
    assert rows_to_replay(spooled, synthetic).num_requests == len(lines)


def test_partial_files_of_a_killed_spool_are_removed_and_a_live_ones_kept(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    killed = cache / f".trace-0123.parquet.{int(dead.stdout)}.partial"
    killed_sort = cache / f".trace-0123.parquet.{int(dead.stdout)}.partial.sorted"
    live = cache / f".other-4567.parquet.{os.getpid()}.partial"
    for path in (killed, killed_sort, live):
        path.write_bytes(b"half a file")
    open_workload(TRACES / "azure_conv_2023.csv", "azure", cache)
    assert not killed.exists() and not killed_sort.exists()
    assert live.exists()
