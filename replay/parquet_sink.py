"""Streams RequestRecords into requests.parquet as they complete, one row group per flushed batch.

Batches are written on one background thread so the event loop (and the open-loop schedule) never
waits on disk, and in order because there is only one. The writer is closed on every exit the process
survives (normal end, exception, cancellation), so what completed is readable. A SIGKILL still loses
the Parquet footer; the deeper replay issue moves to footer-safe part files.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from replay.records import REQUEST_RECORD_SCHEMA, RequestRecord

REQUESTS_FILE = "requests.parquet"


class ParquetRecordSink:
    def __init__(
        self,
        path: Path,
        now_s: Callable[[], float],
        flush_every_records: int = 256,
        flush_interval_s: float = 2.0,
    ) -> None:
        if flush_every_records <= 0 or flush_interval_s <= 0:
            raise ValueError("flush_every_records and flush_interval_s must be > 0")
        self._path = Path(path)
        self._now_s = now_s
        self._flush_every_records = flush_every_records
        self._flush_interval_s = flush_interval_s
        self._rows: list[dict] = []
        self._last_flush_s = now_s()
        self._executor: ThreadPoolExecutor | None = None
        self._writer: pq.ParquetWriter | None = None
        self._pending: list[Future] = []
        self.records_written = 0  # rows handed to the writer thread

    def open(self) -> None:
        """Create the file (and its parent) now, so a bad output path fails before t0."""
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = pq.ParquetWriter(self._path, REQUEST_RECORD_SCHEMA)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="parquet-sink")

    def add(self, record: RequestRecord) -> None:
        self._rows.append(record.to_row())
        if (
            len(self._rows) >= self._flush_every_records
            or self._now_s() - self._last_flush_s >= self._flush_interval_s
        ):
            self.flush()

    def flush(self) -> None:
        """Hand the buffered rows to the writer thread; returns at once."""
        self._last_flush_s = self._now_s()
        if not self._rows:
            return
        if self._executor is None:
            raise RuntimeError(f"{self._path}: sink used before open()")
        rows, self._rows = self._rows, []
        self.records_written += len(rows)
        self._pending = [f for f in self._pending if not f.done() or f.exception() is not None]
        self._pending.append(self._executor.submit(self._write, rows))

    def _write(self, rows: list[dict]) -> None:
        assert self._writer is not None
        self._writer.write_table(pa.Table.from_pylist(rows, schema=REQUEST_RECORD_SCHEMA))

    def close(self) -> None:
        """Write what is buffered, wait for the writer thread, write the footer. Blocking; idempotent."""
        if self._executor is None:
            return
        try:
            self.flush()
            self._executor.shutdown(wait=True)
            for future in self._pending:
                future.result()  # surface a failed write instead of leaving a silently short file
        finally:
            self._executor = None
            if self._writer is not None:
                self._writer.close()
                self._writer = None
