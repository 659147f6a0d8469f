"""requests.parquet and run.json: the schema round-trips, and a run stopped halfway stays readable."""

from __future__ import annotations

import asyncio
import dataclasses

import pyarrow.parquet as pq

from replay.clock import MonotonicClock
from replay.parquet_sink import ParquetRecordSink
from replay.records import REQUEST_RECORD_SCHEMA, RequestRecord, RequestStatus
from replay.run_json import read_run_json
from replay.runner import ReplayConfig, run_replay_async
from replay_sglang_peer import SglangPeer, make_workload


def _records(n: int) -> list[RequestRecord]:
    full = RequestRecord(
        run_id="run", request_id="r0", session_id="s", turn=1, input_tokens=10, output_tokens=3,
        scheduled_mono_s=0.5, sent_mono_s=0.501, first_token_mono_s=0.6, first_answer_mono_s=0.7, finish_mono_s=0.8,
        chunk_mono_s=(0.6, 0.7, 0.8), prompt_tokens=10, completion_tokens=3, cached_tokens=4, reasoning_tokens=1,
        finish_reason="length", http_status=200, status=RequestStatus.OK, server_e2e_latency_s=0.29,
    )
    failed = RequestRecord(
        run_id="run", request_id="r1", session_id=None, turn=None, input_tokens=10, output_tokens=3,
        scheduled_mono_s=1.0, sent_mono_s=1.0, first_token_mono_s=None, first_answer_mono_s=None, finish_mono_s=None,
        chunk_mono_s=(), prompt_tokens=None, completion_tokens=None, cached_tokens=None, reasoning_tokens=None,
        finish_reason=None, http_status=None, status=RequestStatus.TIMEOUT, error_kind="timeout", error_message="late",
    )
    base = [full, failed]
    return [dataclasses.replace(base[i % 2], request_id=f"r{i}") for i in range(n)]


def _from_row(row: dict) -> RequestRecord:
    return RequestRecord(**{**row, "status": RequestStatus(row["status"]), "chunk_mono_s": tuple(row["chunk_mono_s"])})


def test_sink_round_trips_records_in_batches(tmp_path):
    path = tmp_path / "out" / "requests.parquet"
    sink = ParquetRecordSink(path, MonotonicClock().now_s, flush_every_records=3, flush_interval_s=60.0)
    sink.open()
    records = _records(8)
    for record in records:
        sink.add(record)
    sink.close()
    sink.close()  # idempotent
    parquet = pq.ParquetFile(path)
    assert parquet.schema_arrow.equals(REQUEST_RECORD_SCHEMA)
    assert parquet.num_row_groups == 3  # 3 + 3 + the 2 left at close
    assert [_from_row(row) for row in parquet.read().to_pylist()] == records


def test_sink_flushes_on_time_as_well_as_on_count(tmp_path):
    now = [0.0]
    sink = ParquetRecordSink(tmp_path / "requests.parquet", lambda: now[0], flush_every_records=100, flush_interval_s=2.0)
    sink.open()
    records = _records(3)
    sink.add(records[0])
    now[0] = 2.5
    sink.add(records[1])  # 2.5 s since the last flush: both go out
    assert sink.records_written == 2
    sink.add(records[2])
    assert sink.records_written == 2
    sink.close()
    assert pq.ParquetFile(tmp_path / "requests.parquet").num_row_groups == 2


def test_a_run_stopped_halfway_leaves_a_partial_run_json_and_readable_records(tmp_path):
    async def main():
        async with SglangPeer() as peer:
            config = ReplayConfig(url=peer.url, run_id="half", flush_every_records=1)
            # Two requests now, one 30 s later: stop the run after the first two finish.
            replay = asyncio.create_task(run_replay_async(make_workload([0.0, 0.0, 30.0]), config, tmp_path))
            while not (tmp_path / "run.json").exists():
                await asyncio.sleep(0.01)
            assert read_run_json(tmp_path).partial  # readable while the run is going
            await asyncio.sleep(0.5)
            replay.cancel()
            try:
                await replay
            except asyncio.CancelledError:
                pass

    asyncio.run(main())
    run = read_run_json(tmp_path)
    assert run.partial and run.finished_wall_s is None
    assert (run.requests_total, run.requests_recorded, run.requests_ok) == (3, 2, 2)
    table = pq.read_table(tmp_path / "requests.parquet")
    assert sorted(table.column("request_id").to_pylist()) == ["r0", "r1"]
