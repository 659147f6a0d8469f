"""Azure LLM inference CSV traces (2023 and 2024) → the canonical Workload, streamed in checked Arrow batches.

Columns by header name: TIMESTAMP (wall-clock datetime with up to 9 fractional digits, Azure writes 7:
`2023-11-16 18:15:46.6805900`; optional `T`, `Z` or `+hh:mm`, none meaning UTC), ContextTokens (>= 1),
GeneratedTokens (>= 0). The trace carries no prompt and no prefix information, so `prefix_blocks` is null
and `block_size` 0. Rows are as strict as workloads/readers/csv_batches.py says, and each is checked:
- counts in ASCII digits, ContextTokens + GeneratedTokens <= MAX_REQUEST_TOKENS;
- a real datetime (no 24:00, no 29 February 2023) in the years 2000-2100, and no row more than
  MAX_TRACE_SPAN_S (400 days) from any other;
- a bad row fails the read with file, physical line and reason.
Arrivals are offsets from the first row in integer nanoseconds (exact to the last digit), then seconds;
the scan rebases them so the earliest request arrives at 0. request_id is the 0-based data row.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from workloads.readers.csv_batches import (
    Checked,
    RowRules,
    checked_batches,
    count_cells,
    read_header,
    request_tokens_rule,
    trimmed,
)
from workloads.trace_scan import TraceScan, batch_of, collect
from workloads.workload import TraceFormat, Workload
from workloads.workload_builder import MAX_TRACE_SPAN_S

AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
FIRST_YEAR, LAST_YEAR = 2000, 2100
_NS_PER_S = 1_000_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_NAIVE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?$"
_PATTERN = (
    r"^(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})[ T](?P<time>[0-9]{2}:[0-9]{2}:[0-9]{2})"
    r"(?:\.(?P<frac>[0-9]{1,9}))?(?P<tz>Z|[+-][0-9]{2}:?[0-9]{2})?$"
)
# datetime.fromisoformat takes at most 6 fractional digits, Azure writes 7: split the fraction off and
# keep it as integer nanoseconds so no digit is lost.
_TIMESTAMP = re.compile(_PATTERN)
_LIKE = "like 2023-11-16 18:15:46.6805900"


def parse_timestamp_ns(text: str) -> int:
    """Nanoseconds since the Unix epoch of one TIMESTAMP cell; no zone is UTC. ValueError if malformed.

    The scalar statement of what the vectorized reading below computes (tests hold the two equal).
    """
    match = _TIMESTAMP.match(text.strip(" \t"))
    if match is None:
        raise ValueError(f"TIMESTAMP {text!r} is not a datetime {_LIKE}")
    try:
        whole = datetime.fromisoformat(f"{match['date']} {match['time']}{match['tz'] or ''}")
    except ValueError as exc:
        raise ValueError(f"TIMESTAMP {text!r} is not a valid datetime: {exc}") from None
    if whole.tzinfo is None:
        whole = whole.replace(tzinfo=timezone.utc)
    # Integer arithmetic on whole seconds: a float here would round the 7th digit away.
    seconds = (whole - _EPOCH).days * 86_400 + (whole - _EPOCH).seconds
    fraction = match["frac"] or ""
    return seconds * _NS_PER_S + int(fraction.ljust(9, "0") or "0")


def timestamp_ns(cells: pa.Array, rules: RowRules) -> np.ndarray:
    """TIMESTAMP cells as int64 ns since the epoch, vectorized; bad rows get a rule in `rules` (value 0)."""
    text = trimmed(cells)
    naive = pc.match_substring_regex(text, _NAIVE).to_numpy(zero_copy_only=False)
    offset_s = np.zeros(len(cells), dtype=np.int64)
    if naive.all():  # the usual case, as Azure writes it: no zone
        shaped, real = naive, naive.copy()
        whole = pc.utf8_slice_codeunits(text, 0, 19)
        fraction = pc.utf8_slice_codeunits(text, 20, 29)
    else:
        parts = pc.extract_regex(text, _PATTERN)
        shaped = parts.is_valid().to_numpy(zero_copy_only=False)
        real = shaped.copy()
        whole = pc.binary_join_element_wise(parts.field("date"), parts.field("time"), " ")
        fraction = parts.field("frac")
        tz = parts.field("tz")
        hhmm = pc.replace_substring(pc.utf8_slice_codeunits(tz, 1), ":", "")
        hhmm = pc.if_else(pc.equal(pc.binary_length(hhmm), 4), hhmm, "0000")  # Z or none: UTC
        hours = pc.cast(pc.utf8_slice_codeunits(hhmm, 0, 2), pa.int64()).to_numpy()
        minutes = pc.cast(pc.utf8_slice_codeunits(hhmm, 2, 4), pa.int64()).to_numpy()
        sign = np.where(pc.starts_with(tz, "-").to_numpy(zero_copy_only=False), -1, 1)
        real &= (hours < 24) & (minutes < 60)
        offset_s = sign * (hours * 3600 + minutes * 60)
    rules.add(~shaped, lambda i: f"TIMESTAMP {cells[i].as_py()!r} is not a datetime {_LIKE}")
    candidate = pc.if_else(pa.array(shaped), whole, "2000-01-01 00:00:00")
    try:  # Arrow's cast refuses 24:00, :60 and 29 February 2023, but for the whole batch at once
        seconds = pc.cast(candidate, pa.timestamp("s"))
    except pa.ArrowInvalid:  # some row is no real datetime: find which (a batch with a bad row only)
        candidate = pc.replace_substring(candidate, "T", " ")
        seconds = pc.strptime(candidate, format="%Y-%m-%d %H:%M:%S", unit="s", error_is_null=True)
        # strptime rolls 18:15:60 over to 18:16:00 and 29 February 2023 to 1 March: a real one prints back.
        prints_back = pc.equal(pc.strftime(seconds, format="%Y-%m-%d %H:%M:%S"), candidate)
        real &= pc.fill_null(prints_back, False).to_numpy(zero_copy_only=False)
    rules.add(shaped & ~real, lambda i: f"TIMESTAMP {cells[i].as_py()!r} is not a valid datetime")
    year = pc.fill_null(pc.year(seconds), 0).to_numpy()
    in_years = (year >= FIRST_YEAR) & (year <= LAST_YEAR)
    rules.add(
        real & ~in_years,
        lambda i: f"TIMESTAMP {cells[i].as_py()!r}: year {year[i]} is outside {FIRST_YEAR}-{LAST_YEAR}",
    )
    good = real & in_years
    nanos = pc.cast(pc.utf8_rpad(fraction, width=9, padding="0"), pa.int64()).to_numpy()
    whole_s = pc.fill_null(pc.cast(seconds, pa.int64()), 0).to_numpy()
    return np.where(good, (np.where(good, whole_s, 0) - offset_s) * _NS_PER_S + nanos, 0)


class _AzureCheck:
    """The row check of a pass: the first row's instant and the span so far carry across batches, updated
    only by a batch that passes."""

    def __init__(self) -> None:
        self._first_ns: int | None = None
        self._min_ns = self._max_ns = 0

    def __call__(self, cells: dict[str, pa.Array], first_row: int) -> Checked:
        stamps = cells["TIMESTAMP"]
        rules = RowRules(len(stamps))
        ns = timestamp_ns(stamps, rules)
        context = count_cells(cells["ContextTokens"], "ContextTokens", rules, minimum=1)
        generated = count_cells(cells["GeneratedTokens"], "GeneratedTokens", rules)
        request_tokens_rule(rules, context, generated, "ContextTokens + GeneratedTokens")
        span = self._check_span(ns, stamps, rules)
        rules.raise_first()
        assert span is not None  # every row passed, so the batch has a first row
        self._first_ns, self._min_ns, self._max_ns = span
        first_ns = span[0]
        # Exact in int64; float64 seconds after the subtraction (exact to the ns below 2**53 ns, 104 days).
        arrival_s = (ns - first_ns) / _NS_PER_S
        request_id = pa.array(np.arange(first_row, first_row + len(stamps))).cast(pa.string())
        batch = batch_of(
            {"request_id": request_id, "arrival_s": arrival_s, "input_tokens": context, "output_tokens": generated}
        )
        return Checked(batch)

    def _check_span(self, ns: np.ndarray, stamps: pa.Array, rules: RowRules) -> tuple[int, int, int] | None:
        """No row more than MAX_TRACE_SPAN_S from any other: refused at the row that stretches it.

        Returns (first row's ns, earliest, latest) with this batch, for the caller to keep if it passes.
        """
        good = ~rules.any_bad()
        if not good.any():
            return None
        first = self._first_ns if self._first_ns is not None else int(ns[np.argmax(good)])
        earliest, latest = (self._min_ns, self._max_ns) if self._first_ns is not None else (first, first)
        # Bad rows (already refused) take the first row's value, which stretches nothing.
        values = np.where(good, ns, first)
        low = np.minimum.accumulate(np.minimum(values, earliest))
        high = np.maximum.accumulate(np.maximum(values, latest))
        span_ns = MAX_TRACE_SPAN_S * _NS_PER_S
        days = MAX_TRACE_SPAN_S // 86_400
        rules.add(
            high - low > span_ns,
            lambda i: (
                f"TIMESTAMP {stamps[i].as_py()!r} is {(high[i] - low[i]) / _NS_PER_S / 86_400:.1f} days from "
                f"another row's: a trace spans at most {days} days (MAX_TRACE_SPAN_S)"
            ),
        )
        return first, int(low[-1]), int(high[-1])


def scan_azure(path: str | Path) -> TraceScan:
    """Start reading an Azure LLM inference CSV: the header is checked now, each row as its batch is made.

    A bad row raises TraceFormatError(path, line, reason) while the batches are consumed.
    """
    path = Path(path)
    header = read_header(path, AZURE_COLUMNS)
    return TraceScan(
        name=path.stem,
        source_path=str(path),
        trace_format=TraceFormat.AZURE,
        time_unit="datetime",
        block_size=0,
        batches=(checked.batch for checked in checked_batches(header, _AzureCheck())),
        rebase_arrivals=True,
        empty_reason="no requests: the file has a header but no rows",
    )


def read_azure(path: str | Path) -> Workload:
    """The whole Azure trace in memory; raises TraceFormatError(path, line, reason) on the first bad row."""
    return collect(scan_azure(path))
