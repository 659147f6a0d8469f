"""Records on disk: part files round-trip, merge at the end, and survive a SIGKILL of the replay."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from replay.clock import MonotonicClock
from replay.recording.part_sink import PartFileSink
from replay.recording.records import REQUEST_RECORD_SCHEMA, RequestRecord, RequestStatus
from replay.recording.requests_reader import PARTS_DIR, REQUESTS_FILE, part_paths, read_requests, requests_partial_parts
from replay.recording.run_json import read_run_json
from replay.runner import ReplayConfig, run_replay_async
from replay.schedule.open_loop import STOPPED_NOT_DUE, STOPPED_UNFINISHED
from replay_sglang_peer import PeerBehaviour, SglangPeer, make_workload, peer_in_thread

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent


def _records(n: int) -> list[RequestRecord]:
    full = RequestRecord(
        run_id="run",
        request_id="r0",
        session_id="s",
        turn=1,
        input_tokens=10,
        output_tokens=3,
        scheduled_mono_s=0.5,
        sent_mono_s=0.501,
        first_token_mono_s=0.6,
        first_answer_mono_s=0.7,
        finish_mono_s=0.8,
        chunk_mono_s=(0.6, 0.7, 0.8),
        prompt_tokens=10,
        completion_tokens=3,
        cached_tokens=4,
        reasoning_tokens=1,
        finish_reason="length",
        http_status=200,
        status=RequestStatus.OK,
        server_e2e_latency_s=0.29,
        held_s=0.25,
        held_by="session",
    )
    failed = RequestRecord(
        run_id="run", request_id="r1", session_id=None, turn=None, input_tokens=10, output_tokens=3,
        scheduled_mono_s=1.0, sent_mono_s=1.0, first_token_mono_s=None, first_answer_mono_s=None, finish_mono_s=None,
        chunk_mono_s=(), prompt_tokens=None, completion_tokens=None, cached_tokens=None, reasoning_tokens=None,
        finish_reason=None, http_status=None, status=RequestStatus.TIMEOUT, error_kind="timeout", error_message="late",
        is_warmup=True,
    )  # fmt: skip
    base = [full, failed]
    return [dataclasses.replace(base[i % 2], request_id=f"r{i}") for i in range(n)]


def _from_row(row: dict) -> RequestRecord:
    return RequestRecord(**{**row, "status": RequestStatus(row["status"]), "chunk_mono_s": tuple(row["chunk_mono_s"])})


def test_parts_are_complete_files_while_running_and_merge_into_one_file_at_close(tmp_path):
    sink = PartFileSink(tmp_path / "out", MonotonicClock().now_s, flush_every_records=3, flush_interval_s=60.0)
    sink.open()
    records = _records(8)
    for record in records[:6]:
        sink.add(record)
    sink._executor.submit(lambda: None).result()  # let the writer thread catch up
    assert [p.name for p in part_paths(tmp_path / "out")] == ["part-00001.parquet", "part-00002.parquet"]
    assert requests_partial_parts(tmp_path / "out")
    assert [_from_row(r) for r in read_requests(tmp_path / "out").to_pylist()] == records[:6]  # readable mid-run
    for record in records[6:]:
        sink.add(record)
    sink.close()
    sink.close()  # idempotent
    assert not (tmp_path / "out" / PARTS_DIR).exists()
    parquet = pq.ParquetFile(tmp_path / "out" / REQUESTS_FILE)
    assert parquet.schema_arrow.equals(REQUEST_RECORD_SCHEMA)
    assert parquet.num_row_groups == 3  # 3 + 3 + the 2 left at close
    assert [_from_row(row) for row in read_requests(tmp_path / "out").to_pylist()] == records
    assert read_requests(tmp_path / "out", ["request_id"]).column_names == ["request_id"]


def test_sink_flushes_on_time_as_well_as_on_count(tmp_path):
    now = [0.0]
    sink = PartFileSink(tmp_path, lambda: now[0], flush_every_records=100, flush_interval_s=2.0)
    sink.open()
    records = _records(3)
    sink.add(records[0])
    now[0] = 2.5
    sink.add(records[1])  # 2.5 s since the last flush: both go out
    assert sink.records_written == 2
    sink.add(records[2])
    assert sink.records_written == 2
    sink.close()
    assert pq.ParquetFile(tmp_path / REQUESTS_FILE).num_row_groups == 2


class ScriptedTimer:
    """The sink's clock and its timer's sleep: a sleep records how long it was asked to wait and
    returns when the test moves the clock (to any time, so an early wake-up can be scripted too)."""

    def __init__(self, now_s: float) -> None:
        self.now_s = now_s
        self.waits_s: list[float] = []
        self._wake: asyncio.Future | None = None

    async def sleep(self, delay_s: float) -> None:
        self.waits_s.append(delay_s)
        self._wake = asyncio.get_running_loop().create_future()
        await self._wake

    async def advance_to(self, t_s: float) -> None:
        self.now_s = t_s
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)
        await _settle()


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_the_timer_flushes_each_batch_flush_interval_after_its_oldest_record_without_further_arrivals(tmp_path):
    timer = ScriptedTimer(now_s=10.0)
    records = _records(3)

    async def main() -> PartFileSink:
        sink = PartFileSink(tmp_path, lambda: timer.now_s, flush_every_records=100, flush_interval_s=1.0)
        sink.open()
        task = asyncio.create_task(sink.flush_when_due(timer.sleep))
        await _settle()
        assert timer.waits_s == []  # nothing buffered: it waits for a record, not for the clock
        timer.now_s = 10.25
        sink.add(records[0])
        await _settle()
        assert timer.waits_s == [1.0] and sink.flush_due_s() == 11.25
        timer.now_s = 10.75
        sink.add(records[1])  # joins the batch; the deadline stays the oldest record's
        await timer.advance_to(11.0)  # the timer woke early: it waits the rest, flushes nothing
        assert timer.waits_s == [1.0, 0.25] and sink.records_written == 0
        await timer.advance_to(11.25)
        assert sink.records_written == 2 and sink.flush_due_s() is None  # no arrival needed
        await _settle()
        assert len(timer.waits_s) == 2  # idle again until the next record
        timer.now_s = 30.0
        sink.add(records[2])
        await _settle()
        await timer.advance_to(31.0)
        assert timer.waits_s[2:] == [1.0] and sink.records_written == 3
        task.cancel()
        return sink

    sink = asyncio.run(main())
    sink.close()
    parquet = pq.ParquetFile(tmp_path / REQUESTS_FILE)
    assert [parquet.metadata.row_group(i).num_rows for i in range(parquet.num_row_groups)] == [2, 1]


def test_open_clears_an_earlier_runs_records_from_the_directory(tmp_path):
    first = PartFileSink(tmp_path, MonotonicClock().now_s)
    first.open()
    for record in _records(2):
        first.add(record)
    first.close()
    second = PartFileSink(tmp_path, MonotonicClock().now_s)
    second.open()
    second.add(_records(3)[2])
    second.close()
    assert read_requests(tmp_path).column("request_id").to_pylist() == ["r2"]


def test_reading_a_directory_without_records_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=str(tmp_path)):
        read_requests(tmp_path)


def test_a_run_stopped_halfway_records_in_flight_and_not_yet_due_requests_as_cancelled(tmp_path):
    async def main():
        async with SglangPeer(PeerBehaviour(token_delay_s=0.5)) as peer:
            config = ReplayConfig(url=peer.url, run_id="half", flush_every_records=1)
            # Two requests now (each takes ~2 s), one 30 s later: stop the run while the first two stream.
            replay = asyncio.create_task(run_replay_async(make_workload([0.0, 0.0, 30.0]), config, tmp_path))
            while not (tmp_path / "run.json").exists():
                await asyncio.sleep(0.01)
            assert read_run_json(tmp_path).partial  # readable while the run is going
            await asyncio.sleep(0.4)
            replay.cancel()
            with pytest.raises(asyncio.CancelledError):
                await replay

    asyncio.run(main())
    run = read_run_json(tmp_path)
    assert run.partial and run.finished_wall_s is None
    assert (run.requests_total, run.requests_recorded, run.requests_ok) == (3, 3, 0)
    rows = {r["request_id"]: r for r in read_requests(tmp_path).to_pylist()}
    assert sorted(rows) == ["r0", "r1", "r2"]
    assert {r["status"] for r in rows.values()} == {"cancelled"}
    assert rows["r2"]["error_message"] == STOPPED_NOT_DUE and rows["r2"]["scheduled_mono_s"] == 30.0
    assert rows["r0"]["error_message"] == rows["r1"]["error_message"] == STOPPED_UNFINISHED


KILLED_REPLAY = """
import sys
sys.path.insert(0, {tests!r})
from replay.runner import ReplayConfig, run_replay
from replay_sglang_peer import make_workload
config = ReplayConfig(url={url!r}, run_id="killed", flush_every_records=1, flush_interval_s=0.05)
run_replay(make_workload([i * 0.05 for i in range(60)], output_tokens=2), config, {out!r})
"""


@pytest.mark.timeout(60)
def test_a_replay_killed_with_sigkill_leaves_every_finished_request_readable(tmp_path):
    out = tmp_path / "run"
    with peer_in_thread(PeerBehaviour(token_delay_s=0.01)) as peer:
        code = KILLED_REPLAY.format(tests=str(TESTS), url=peer.url, out=str(out))
        proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO)
        try:
            deadline = time.monotonic() + 30
            while len(part_paths(out)) < 5 and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            assert proc.poll() is None, "the replay ended before it could be killed"
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.wait(10)
        sent = len(peer.bodies)
    assert proc.returncode == -signal.SIGKILL
    assert requests_partial_parts(out)
    table = read_requests(out)
    ids = table.column("request_id").to_pylist()
    assert len(ids) >= 5 and len(set(ids)) == len(ids)
    assert set(table.column("status").to_pylist()) == {"ok"}
    assert len(ids) <= sent < 60  # killed mid-way; nothing recorded that was not sent
    run = read_run_json(out)
    assert run.partial and run.finished_wall_s is None and run.requests_total == 60


def test_the_fast_row_conversion_equals_to_row():
    from replay.recording.part_sink import record_row

    for record in _records(2):
        row = record_row(record)
        assert {**row, "chunk_mono_s": list(row["chunk_mono_s"])} == record.to_row()
