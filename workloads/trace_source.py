"""Reading a trace file's records with their physical line numbers: JSON Lines, JSON and CSV by header.

Every failure here is a TraceFormatError naming the file, and the line where there is one, so each
reader only has to say what is wrong with a record's content.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

import orjson

from workloads.workload import TraceFormatError
from workloads.workload_builder import INT32_MAX


def read_file_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise TraceFormatError(str(path), None, f"cannot read file: {exc.strerror or exc}") from None


def jsonl_records(path: Path) -> Iterator[tuple[int, object]]:
    """(physical line number, decoded value) for every non-blank line."""
    data = read_file_bytes(path)
    # bytes.splitlines splits on \n, \r\n and \r only, so the index is the physical line.
    for index, line in enumerate(data.splitlines()):
        if not line.strip():
            continue
        try:
            yield index + 1, orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise TraceFormatError(str(path), index + 1, f"invalid JSON at column {exc.colno}: {exc.msg}") from None


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


def csv_rows(
    path: Path, required: tuple[str, ...], optional: tuple[str, ...] = ()
) -> Iterator[tuple[int, dict[str, str]]]:
    """(physical line of the row's end, {column name: cell}) for every non-blank data row.

    Columns are found by header name, never by position; `optional` columns appear only when present.
    """
    try:
        # utf-8-sig: a spreadsheet-saved copy starts with a BOM that would glue onto the first name.
        handle = path.open(newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise TraceFormatError(str(path), None, f"cannot read file: {exc.strerror or exc}") from None
    with handle:
        rows = csv.reader(handle)
        try:
            header = next(rows, None)
            if header is None:
                raise TraceFormatError(str(path), None, "empty file: expected a header " + ",".join(required))
            names = [name.strip() for name in header]
            missing = [column for column in required if column not in names]
            if missing:
                raise TraceFormatError(
                    str(path), rows.line_num, f"missing column(s) {', '.join(missing)} (header has: {', '.join(names)})"
                )
            at = {column: names.index(column) for column in (*required, *optional) if column in names}
            width = max(at.values()) + 1
            for row in rows:
                if not row or not any(cell.strip() for cell in row):
                    continue
                # line_num counts physical lines read so far, so it names the row's last line.
                if len(row) < width:
                    reason = f"expected at least {width} fields, got {len(row)}"
                    raise TraceFormatError(str(path), rows.line_num, reason)
                yield rows.line_num, {column: row[index] for column, index in at.items()}
        except (csv.Error, UnicodeDecodeError) as exc:
            raise TraceFormatError(str(path), rows.line_num or None, f"unreadable CSV: {exc}") from None


def parse_count_cell(text: str, column: str, minimum: int) -> int:
    """A CSV cell holding a token count; ValueError naming the column when it is not one."""
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError(f"{column} must be an integer, got {text!r}") from None
    if not minimum <= value <= INT32_MAX:
        raise ValueError(f"{column} must be between {minimum} and {INT32_MAX}, got {value}")
    return value
