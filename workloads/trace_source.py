"""Reading a trace file's records with their physical line numbers: JSON Lines and JSON (CSV by header:
workloads/csv_batches.py).

Every failure here is a TraceFormatError naming the file, and the line where there is one, so each
reader only has to say what is wrong with a record's content.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson

from workloads.json_strict import duplicate_key_reason
from workloads.jsonl_batches import UTF8_BOM
from workloads.workload import TraceFormatError


def read_file_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise TraceFormatError(str(path), None, f"cannot read file: {exc.strerror or exc}") from None


def jsonl_records(path: Path) -> Iterator[tuple[int, object]]:
    """(physical line number, decoded value) for every non-blank line; a line with a key written twice in
    one object is an error (workloads/json_strict.py), not its last value."""
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
