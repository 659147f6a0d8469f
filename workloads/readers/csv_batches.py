"""A CSV trace read by header as a stream of checked Arrow batches, each row strictly as wide as the header.

The fast path is Arrow's streaming CSV reader (every column as text) feeding a reader's vectorized row
check. Arrow knows no physical line numbers, so when it or the check refuses a row the file is read again
by Python's csv module (strict quoting), which numbers lines exactly (blank lines and quoted newlines
included), and that reading names the first bad row: `file:line: reason`. Only a bad file takes the slow
path. Rules every CSV reader shares:
- the header is the first line; column names (spaces around them ignored) are unique;
- every other non-blank line is one row with exactly the header's number of fields (quotes honoured);
  a blank line (nothing, or only spaces and tabs) is skipped and is not a data row;
- data rows are numbered 0, 1, ... in file order, blank lines not counted (the readers' request_id).
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from workloads.trace_scan import BATCH_ROWS
from workloads.workload import TraceFormatError
from workloads.workload_builder import MAX_REQUEST_TOKENS

_SAMPLE_BYTES = 256 * 1024
_MIN_BLOCK, _MAX_BLOCK = 1 << 20, 64 << 20
# Counts are read from at most this many digits (int64-safe); a longer one is out of any range anyway.
_MAX_DIGITS = 18


class BadRow(Exception):
    """Raised by a row check: the row at `offset` in the batch it was given is not valid, and why."""

    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(reason)
        self.offset = offset
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Checked:
    """A row check's result for one batch: the canonical rows kept, and the rows left out on purpose by
    reason, in the order each reason first occurs."""

    batch: pa.RecordBatch
    excluded: tuple[tuple[str, int], ...] = ()


# cells of one batch by column name (text, no nulls) and the data-row index of its first row → Checked.
# A check may keep state across batches (e.g. the span so far); one that raises BadRow leaves it as it was.
RowCheck = Callable[[dict[str, pa.Array], int], Checked]


@dataclass(frozen=True, slots=True)
class CsvHeader:
    path: Path
    names: tuple[str, ...]  # as written, in file order
    columns: dict[str, str]  # column the reader reads (stripped name) → name as written

    @property
    def width(self) -> int:
        return len(self.names)


def _open_text(path: Path):
    try:
        # utf-8-sig: a spreadsheet-saved copy starts with a BOM that would glue onto the first name.
        # surrogateescape: a byte that is not UTF-8 is refused at its row (see _utf8_fault), not at the
        # read-ahead of the decoder, which would hide the rows before it.
        return path.open(newline="", encoding="utf-8-sig", errors="surrogateescape")
    except OSError as exc:
        raise TraceFormatError(str(path), None, f"cannot read file: {exc.strerror or exc}") from None


def read_header(path: Path, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> CsvHeader:
    """The header of `path`, checked: the `required` columns present, every name once."""
    with _open_text(path) as handle:
        rows = csv.reader(handle, strict=True)
        try:
            header = next(rows, None)
        except csv.Error as exc:
            raise TraceFormatError(str(path), 1, f"unreadable CSV header: {exc}") from None
    if header is None:
        raise TraceFormatError(str(path), None, "empty file: expected a header " + ",".join(required))
    fault = _utf8_fault(header)
    if fault:
        raise TraceFormatError(str(path), 1, fault)
    stripped = [name.strip() for name in header]
    if not any(stripped):
        raise TraceFormatError(str(path), 1, "line 1 names no column: the header must be the first line")
    seen: set[str] = set()
    for name in stripped:
        if name in seen:
            raise TraceFormatError(str(path), 1, f"column {name!r} appears twice in the header")
        seen.add(name)
    missing = [column for column in required if column not in seen]
    if missing:
        reason = f"missing column(s) {', '.join(missing)} (header has: {', '.join(stripped)})"
        raise TraceFormatError(str(path), 1, reason)
    at = {name: raw for name, raw in zip(stripped, header)}
    columns = {column: at[column] for column in (*required, *optional) if column in at}
    return CsvHeader(path=path, names=tuple(header), columns=columns)


def checked_batches(header: CsvHeader, check: RowCheck) -> Iterator[Checked]:
    """Every data row of the file in checked batches of about BATCH_ROWS rows, in file order.

    A bad row raises TraceFormatError(path, physical line, reason) once the batches before it were yielded.
    """
    done = 0  # data rows already checked and yielded
    try:
        for cells in _arrow_cells(header):
            checked = check(cells, done)
            yield checked
            done += len(next(iter(cells.values())))
        # Arrow takes a quote left open in the last row's last cell as a cell running to the end of the
        # file. Quotes then do not pair up: only such a file (or one with a stray `"` inside an unquoted
        # cell) is read again by Python, which refuses the first and accepts the second.
        if _quotes_pair(header.path):
            return
    except (BadRow, pa.ArrowException):
        pass
    # The slow path: Python reads the file again, which knows each row's physical line; the rows already
    # yielded are only counted, the others checked by the same check. It raises at the first bad row;
    # should it find none (a file only Arrow refuses) it carries on from `done`.
    yield from _python_checked(header, check, done)


def _block_size(path: Path) -> int:
    """Bytes per Arrow block for about BATCH_ROWS rows, from the line length at the start of the file."""
    with path.open("rb") as handle:
        sample = handle.read(_SAMPLE_BYTES)
    lines = max(1, sample.count(b"\n") or sample.count(b"\r"))
    return int(min(_MAX_BLOCK, max(_MIN_BLOCK, len(sample) / lines * BATCH_ROWS)))


def _quotes_pair(path: Path) -> bool:
    quotes = 0
    with path.open("rb") as handle:
        while chunk := handle.read(16 << 20):
            quotes += chunk.count(b'"')
    return quotes % 2 == 0


def _skip_blank(row: pcsv.InvalidRow) -> str:
    # A line of only spaces parses as one field; it is blank, not a short row.
    return "skip" if not row.text.strip(" \t") else "error"


def _arrow_cells(header: CsvHeader) -> Iterator[dict[str, pa.Array]]:
    reader = pcsv.open_csv(
        header.path,
        read_options=pcsv.ReadOptions(block_size=_block_size(header.path)),
        parse_options=pcsv.ParseOptions(newlines_in_values=True, invalid_row_handler=_skip_blank),
        convert_options=pcsv.ConvertOptions(
            # Every column as text, the unread ones too: Arrow checks each string is UTF-8, and a file
            # that is not is refused whichever cell holds the bad byte.
            column_types={name: pa.string() for name in header.names},
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
        ),
    )
    try:
        for batch in reader:
            if batch.num_rows:
                yield {column: batch.column(name) for column, name in header.columns.items()}
    finally:
        reader.close()


def _python_rows(header: CsvHeader) -> Iterator[tuple[int, list[str]]]:
    """(physical line where the row starts, cells) for every non-blank data row; structural faults raise."""
    path = str(header.path)
    with _open_text(header.path) as handle:
        rows = csv.reader(handle, strict=True)
        next(rows)  # the header, checked by read_header
        end = rows.line_num
        while True:
            start = end + 1
            try:
                row = next(rows)
            except StopIteration:
                return
            except csv.Error as exc:
                if "unexpected end of data" in str(exc):
                    raise TraceFormatError(path, start, "a quoted field starts here and is never closed") from None
                raise TraceFormatError(path, start, f"unreadable CSV: {exc}") from None
            end = rows.line_num
            if not row or (len(row) == 1 and not row[0].strip(" \t")):
                continue
            fault = _utf8_fault(row)
            if fault:
                raise TraceFormatError(path, start, fault)
            if len(row) != header.width:
                reason = f"expected {header.width} fields as in the header, got {len(row)}"
                raise TraceFormatError(path, start, reason)
            yield start, row


def _python_checked(header: CsvHeader, check: RowCheck, skip: int) -> Iterator[Checked]:
    """The slow path: rows as Python reads them; those below `skip` (checked before) only counted, the
    others checked and yielded in batches."""
    at = {column: header.names.index(name) for column, name in header.columns.items()}
    lines: list[int] = []
    cells: list[list[str]] = []
    rows = _python_rows(header)
    for _ in range(skip):
        if next(rows, None) is None:
            raise TraceFormatError(str(header.path), None, "unreadable CSV: Arrow and Python read different rows")
    done = skip

    def flush() -> Checked:
        columns = {column: pa.array([row[index] for row in cells], pa.string()) for column, index in at.items()}
        try:
            return check(columns, done)
        except BadRow as bad:
            raise TraceFormatError(str(header.path), lines[bad.offset], bad.reason) from None

    try:
        for line, row in rows:
            lines.append(line)
            cells.append(row)
            if len(cells) == BATCH_ROWS:
                yield flush()
                done += len(cells)
                lines, cells = [], []
    except TraceFormatError:
        if cells:
            flush()  # a bad row before the structural fault is the first error
        raise
    if cells:
        yield flush()


def _utf8_fault(cells: list[str]) -> str | None:
    """Why a row read with surrogateescape is not UTF-8 (a byte it could not decode), or None."""
    try:
        "".join(cells).encode("utf-8")
        return None
    except UnicodeEncodeError as exc:
        byte = ord(exc.object[exc.start]) - 0xDC00
        return f"not UTF-8: byte 0x{byte:02x} cannot be decoded"


# --- vectorized cell rules ----------------------------------------------------------------------


class RowRules:
    """Per-row failures of one batch, rule by rule; `raise_first` raises BadRow for the first bad row,
    with the reason of the first rule it breaks (rules are checked in the order they were added)."""

    def __init__(self, length: int) -> None:
        self._length = length
        self._rules: list[tuple[np.ndarray, Callable[[int], str]]] = []

    def add(self, bad: np.ndarray | pa.Array | pa.ChunkedArray, reason: Callable[[int], str]) -> None:
        if not isinstance(bad, np.ndarray):
            bad = pc.fill_null(bad, True).to_numpy(zero_copy_only=False)
        self._rules.append((bad, reason))

    def any_bad(self) -> np.ndarray:
        bad = np.zeros(self._length, dtype=bool)
        for mask, _ in self._rules:
            bad |= mask
        return bad

    def raise_first(self) -> None:
        bad = self.any_bad()
        if not bad.any():
            return
        offset = int(np.argmax(bad))
        for mask, reason in self._rules:
            if mask[offset]:
                raise BadRow(offset, reason(offset))


def trimmed(cells: pa.Array) -> pa.Array:
    """Cells without the spaces and tabs around them (a number may be padded, its digits may not)."""
    return pc.utf8_trim(cells, characters=" \t")


def count_cells(cells: pa.Array, column: str, rules: RowRules, minimum: int = 0) -> np.ndarray:
    """A count column as int64: ASCII digits only (no sign, point, exponent, `_` or other script's digits),
    from `minimum` to MAX_REQUEST_TOKENS. A row that breaks a rule gets it in `rules` and the value `minimum`."""
    text = trimmed(cells)
    digits = pc.ascii_is_decimal(text).to_numpy(zero_copy_only=False)
    rules.add(~digits, lambda i: _count_reason(column, cells[i].as_py()))
    long = pc.greater(pc.binary_length(text), _MAX_DIGITS).to_numpy(zero_copy_only=False) & digits
    usable = digits & ~long
    parsed = pc.cast(pc.if_else(pa.array(usable), text, "0"), pa.int64()).to_numpy()
    rules.add(usable & (parsed < minimum), lambda i: f"{column} must be at least {minimum}, got {parsed[i]}")
    huge = long | (usable & (parsed > MAX_REQUEST_TOKENS))
    rules.add(
        huge,
        lambda i: (
            f"{column} = {text[i].as_py()} is more than MAX_REQUEST_TOKENS = {MAX_REQUEST_TOKENS} "
            "(no model takes a request that long)"
        ),
    )
    return np.where(usable & ~huge, parsed, minimum)


def _count_reason(column: str, text: str) -> str:
    if not text.strip():
        return f"{column} is empty"
    return f"{column} must be a whole number in ASCII digits (no sign, point, exponent or separator), got {text!r}"


def request_tokens_rule(rules: RowRules, input_tokens: np.ndarray, output_tokens: np.ndarray, what: str) -> None:
    """A request's input + output tokens (each already a checked count) at most MAX_REQUEST_TOKENS."""
    total = input_tokens + output_tokens
    rules.add(
        total > MAX_REQUEST_TOKENS,
        lambda i: (
            f"{what} = {total[i]} is more than MAX_REQUEST_TOKENS = {MAX_REQUEST_TOKENS} "
            "(no model takes a request that long)"
        ),
    )
