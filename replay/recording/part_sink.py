"""Streams RequestRecords to Parquet part files as they complete, so even SIGKILL loses nothing written.

A Parquet file is readable only once its footer is written, at close, so one growing file would be
unreadable after a SIGKILL. Instead each flushed batch becomes its own small, complete file,
`requests.parts/part-00001.parquet`, written under a temporary name and renamed into place (a rename
is atomic, so a reader never sees half a part). When the process ends the run in any way it
survives, the parts are merged into `requests.parquet` (also via a temporary name) and removed.
`requests_reader.read_requests` reads whichever of the two exists.

A batch is flushed when it reaches `flush_every_records`, or `flush_interval_s` after its oldest record
arrived, whichever comes first. The second needs no further traffic: `flush_when_due` is a timer task
on the event loop that flushes at that deadline, so a pause in arrivals does not leave records in
memory. A record added at time t is therefore in a renamed part file by t + flush_interval_s plus the
time the writer thread takes to write its part (and any part queued before it), and plus however late
the event loop wakes the timer; SIGKILL loses at most that much.

Parts are written on one background thread so the event loop (and the open-loop schedule) never
waits on disk, and in order because there is only one.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from replay.recording.records import REQUEST_RECORD_SCHEMA, RequestRecord
from replay.recording.requests_reader import PARTS_DIR, REQUESTS_FILE, part_paths

_PART_NAME = "part-{:05d}.parquet"
_FIELDS = REQUEST_RECORD_SCHEMA.names


def record_row(record: RequestRecord) -> dict:
    """The record as an Arrow row. Same result as `record.to_row()`, without `asdict`'s recursive deep
    copy, which costs more per request than the rest of the client path (see bench/replay_overhead.py)."""
    row = {name: getattr(record, name) for name in _FIELDS}
    row["status"] = record.status.value
    return row


class PartFileSink:
    def __init__(
        self,
        out_dir: Path,
        now_s: Callable[[], float],
        flush_every_records: int = 256,
        flush_interval_s: float = 1.0,
    ) -> None:
        if flush_every_records <= 0 or flush_interval_s <= 0:
            raise ValueError("flush_every_records and flush_interval_s must be > 0")
        self._out_dir = Path(out_dir)
        self._parts_dir = self._out_dir / PARTS_DIR
        self._now_s = now_s
        self._flush_every_records = flush_every_records
        self._flush_interval_s = flush_interval_s
        self._rows: list[dict] = []
        self._oldest_s = 0.0  # when the oldest buffered row arrived (meaningful while _rows is not empty)
        self._arrived = asyncio.Event()  # set when the buffer stops being empty; wakes flush_when_due
        self._executor: ThreadPoolExecutor | None = None
        self._pending: list[Future] = []
        self._parts_started = 0
        self.records_written = 0  # rows handed to the writer thread

    def open(self) -> None:
        """Create the parts directory now, so a bad output path fails before t0. Clears leftovers of an
        earlier run in the same directory, which would otherwise be merged into this one."""
        if self._parts_dir.exists():
            shutil.rmtree(self._parts_dir)
        (self._out_dir / REQUESTS_FILE).unlink(missing_ok=True)
        self._parts_dir.mkdir(parents=True)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="part-sink")

    def add(self, record: RequestRecord) -> None:
        now_s = self._now_s()
        if not self._rows:
            self._oldest_s = now_s
            self._arrived.set()
        self._rows.append(record_row(record))
        if len(self._rows) >= self._flush_every_records or now_s - self._oldest_s >= self._flush_interval_s:
            self.flush()

    def flush_due_s(self) -> float | None:
        """When the buffered batch is due on `now_s`'s clock (its oldest row + flush_interval_s); None if empty."""
        return self._oldest_s + self._flush_interval_s if self._rows else None

    async def flush_when_due(self, sleep: Callable[[float], Awaitable[object]] = asyncio.sleep) -> None:
        """Flush every batch when it is due, however long until the next record; runs until cancelled.

        Run it as a task on the loop that calls `add`. It waits `due - now_s()` with `sleep` (the event
        loop's timer by default, which runs on the same monotonic clock as MonotonicClock) and checks
        `now_s` again on waking, so a timer that fires early only makes it wait the rest.
        """
        while True:
            due_s = self.flush_due_s()
            if due_s is None:
                self._arrived.clear()
                await self._arrived.wait()
                continue
            wait_s = due_s - self._now_s()
            if wait_s > 0:
                await sleep(wait_s)
            else:
                self.flush()

    def flush(self) -> None:
        """Hand the buffered rows to the writer thread as one part; returns at once."""
        if not self._rows:
            return
        if self._executor is None:
            raise RuntimeError(f"{self._out_dir}: sink used before open()")
        rows, self._rows = self._rows, []
        self.records_written += len(rows)
        self._parts_started += 1
        self._pending = [f for f in self._pending if not f.done() or f.exception() is not None]
        self._pending.append(self._executor.submit(self._write_part, self._parts_started, rows))

    def _write_part(self, number: int, rows: list[dict]) -> None:
        final = self._parts_dir / _PART_NAME.format(number)
        tmp = self._parts_dir / f".{final.name}.tmp"
        pq.write_table(pa.Table.from_pylist(rows, schema=REQUEST_RECORD_SCHEMA), tmp)
        os.replace(tmp, final)

    def close(self) -> Path:
        """Write what is buffered, wait for the writer, merge the parts into requests.parquet.

        Blocking; idempotent. Returns the path of requests.parquet.
        """
        target = self._out_dir / REQUESTS_FILE
        if self._executor is None:
            return target
        try:
            self.flush()
            self._executor.shutdown(wait=True)
            for future in self._pending:
                future.result()  # surface a failed write instead of leaving a silently short file
        finally:
            self._executor = None
        merge_parts(self._out_dir)
        return target


def merge_parts(out_dir: Path) -> Path:
    """Merge out_dir's part files into requests.parquet (one row group per part) and remove them.

    Crash-safe at every step: the merged file appears by rename, and until the parts are removed a
    reader prefers the complete merged file.
    """
    out_dir = Path(out_dir)
    target = out_dir / REQUESTS_FILE
    tmp = out_dir / f".{REQUESTS_FILE}.tmp"
    with pq.ParquetWriter(tmp, REQUEST_RECORD_SCHEMA) as writer:
        for part in part_paths(out_dir):
            writer.write_table(pq.read_table(part, schema=REQUEST_RECORD_SCHEMA))
    os.replace(tmp, target)
    shutil.rmtree(out_dir / PARTS_DIR, ignore_errors=True)
    return target
