"""Reading a trace file's records with their physical line numbers: JSON Lines and JSON (CSV by header:
workloads/readers/csv_batches.py).

Every failure here is a TraceFormatError naming the file, and the line where there is one, so each
reader only has to say what is wrong with a record's content.
"""

from __future__ import annotations

import io
import os
import select
import stat
from collections.abc import Iterator
from pathlib import Path

import orjson

from workloads.readers.json_strict import duplicate_key_reason
from workloads.readers.jsonl_batches import UTF8_BOM
from workloads.workload import TraceFormatError

# How long a read of a pipe waits for data before Python looks at pending signals again.
PIPE_WAIT_S = 0.2


def read_file_bytes(path: Path) -> bytes:
    try:
        with path.open("rb") as f:
            if stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return f.read()
            return _read_pipe(f)
    except OSError as exc:
        raise TraceFormatError(str(path), None, f"cannot read file: {exc.strerror or exc}") from None


def _read_pipe(f: io.BufferedReader) -> bytes:
    """A named pipe (or a device) read to its end. A blocking read that starts just after a Ctrl-C arrived
    would wait for the writer with the KeyboardInterrupt still pending (CPython runs signal handlers between
    bytecodes, not inside the read), so each read waits in select() first, which returns to Python often."""
    chunks: list[bytes] = []
    while True:
        if not select.select([f], [], [], PIPE_WAIT_S)[0]:
            continue
        chunk = f.read1(1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def jsonl_records(path: Path) -> Iterator[tuple[int, object]]:
    """(physical line number, decoded value) for every non-blank line; a line with a key written twice in
    one object is an error (workloads/readers/json_strict.py), not its last value."""
    data = read_file_bytes(path)
    if data.startswith(UTF8_BOM):  # an editor's "UTF-8 with signature", as the CSV readers and json_document allow
        data = data[len(UTF8_BOM) :]
    # bytes.splitlines splits on \n, \r\n and \r only, so the index is the physical line.
    for index, line in enumerate(data.splitlines()):
        if not line.strip():
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise TraceFormatError(str(path), index + 1, f"invalid JSON at column {exc.colno}: {exc.msg}") from None
        reason = duplicate_key_reason(line)
        if reason is not None:
            raise TraceFormatError(str(path), index + 1, reason)
        yield index + 1, value


def json_document(path: Path) -> tuple[str, object]:
    """(text, decoded value) of a whole-file JSON document."""
    data = read_file_bytes(path)
    try:
        text = data.decode("utf-8-sig")
        return text, orjson.loads(text)
    except UnicodeDecodeError as exc:
        raise TraceFormatError(str(path), None, f"not UTF-8: {exc.reason} at byte {exc.start}") from None
    except orjson.JSONDecodeError as exc:
        raise TraceFormatError(str(path), exc.lineno, f"invalid JSON at column {exc.colno}: {exc.msg}") from None
