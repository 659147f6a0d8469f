"""A JSON Lines file read in chunks of whole lines, each line with its physical line number.

The streaming half of a big JSONL reader: `line_chunks(path, target_lines)` yields `LineChunk`s of about
`target_lines` lines each (the chunk size adapts to the file's mean line length), so a file of any size
is read in bounded memory. Line breaks are those `bytes.splitlines` counts (\\n, \\r\\n and a lone \\r),
all turned into \\n inside a chunk (a raw \\r cannot occur inside a JSON string, so no value changes), and
blank lines keep their number. A UTF-8 byte order mark at the start of the file is dropped. The per-line
byte counts below are what a reader's vectorized checks need.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workloads.workload import TraceFormatError

# A line longer than this is no trace record (e.g. a whole JSON array on one line): refused, not buffered.
MAX_LINE_BYTES = 64 * 2**20
_MIN_CHUNK_BYTES = 1 * 2**20
_MAX_CHUNK_BYTES = 16 * 2**20  # a chunk this size and Arrow's parse of it peak at about 250 MB of RSS
_FIRST_CHUNK_BYTES = 4 * 2**20
_NEWLINE = ord("\n")
UTF8_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True, slots=True)
class LineChunk:
    """Consecutive whole lines of a file: `data` with every break a single \\n, line i at
    data[starts[i]:ends[i]] (its break excluded) and physical line first_line + i (0-based)."""

    data: bytes
    first_line: int
    starts: np.ndarray  # int64
    ends: np.ndarray  # int64

    @property
    def count(self) -> int:
        return len(self.starts)

    def line(self, index: int) -> bytes:
        return self.data[self.starts[index] : self.ends[index]]

    def bytes_view(self) -> np.ndarray:
        return np.frombuffer(self.data, dtype=np.uint8)

    def count_per_line(self, positions: np.ndarray) -> np.ndarray:
        """How many of the sorted byte offsets `positions` fall in each line."""
        return np.searchsorted(positions, self.ends) - np.searchsorted(positions, self.starts)


def _chunk(data: bytes, first_line: int) -> LineChunk:
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    breaks = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == _NEWLINE).astype(np.int64)
    starts = np.concatenate([np.zeros(1, np.int64), breaks + 1])
    ends = np.concatenate([breaks, np.array([len(data)], np.int64)])
    if data.endswith(b"\n") or not data:  # nothing after the last break: no line there
        starts, ends = starts[:-1], ends[:-1]
    return LineChunk(data, first_line, starts, ends)


def _last_break(data: bytes) -> int:
    """Offset of the last line break in `data` that is surely whole (-1 if none): a \\r as the very last
    byte may be the first half of \\r\\n, so it waits for the next read."""
    return max(data.rfind(b"\n"), data.rfind(b"\r", 0, len(data) - 1))


def line_chunks(path: Path, target_lines: int) -> Iterator[LineChunk]:
    """The file's lines in chunks of about `target_lines`; TraceFormatError(path, ...) if it cannot be read."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise TraceFormatError(str(path), None, f"cannot read file: {exc.strerror or exc}") from None
    with handle:
        first_line = 0
        chunk_bytes = _FIRST_CHUNK_BYTES
        pending = b""
        while True:
            try:
                block = handle.read(chunk_bytes)
            except OSError as exc:
                raise TraceFormatError(str(path), None, f"cannot read file: {exc.strerror or exc}") from None
            data = pending + block if pending else block
            if first_line == 0 and not pending and data.startswith(UTF8_BOM):
                data = data[len(UTF8_BOM) :]  # a BOM (an editor's "UTF-8 with signature") is no content
            if block:
                cut = _last_break(data) + 1
                if cut == 0:  # one line longer than the read: read on, up to the bound
                    if len(data) > MAX_LINE_BYTES:
                        reason = f"line longer than {MAX_LINE_BYTES} bytes: not a JSON Lines record"
                        raise TraceFormatError(str(path), first_line + 1, reason)
                    pending = data
                    continue
                data, pending = data[:cut], data[cut:]
            else:
                pending = b""
            if not data:
                return
            chunk = _chunk(data, first_line)
            first_line += chunk.count
            yield chunk
            if chunk.count:
                per_line = len(data) / chunk.count
                chunk_bytes = int(min(max(per_line * target_lines, _MIN_CHUNK_BYTES), _MAX_CHUNK_BYTES))
            if not block:
                return
