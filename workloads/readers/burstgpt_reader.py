"""BurstGPT CSV traces → the canonical Workload, streamed in checked Arrow batches.

Columns by header name, so both published variants read the same:
  6 columns: Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
  8 columns: Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type
Timestamp is seconds from the trace start (kept as is, like Mooncake's, so a window names trace seconds).
Rows are as strict as workloads/readers/csv_batches.py says, and each is checked:
- Timestamp: seconds >= 0 in ASCII digits with an optional decimal fraction (`45`, `45.5`; no sign,
  exponent, nan or inf), at most MAX_TRACE_SPAN_S (400 days);
- Request tokens, Response tokens: counts in ASCII digits, their sum <= MAX_REQUEST_TOKENS;
- Model: not empty.
A row with Response tokens = 0 is a failed request and one with Request tokens = 0 sent nothing: both are
left out and counted in `excluded`, as are rows of other models when a model filter is given (every row
is checked first). Session ID becomes session_id (empty: no session), turns numbered by arrival once all
rows are in. No prompts, no prefix information. request_id is the 0-based data row.
"""

from __future__ import annotations

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
from workloads.workload_builder import MAX_TRACE_SPAN_S, ExclusionTally

BURSTGPT_COLUMNS = ("Timestamp", "Model", "Request tokens", "Response tokens")
_SESSION = "Session ID"
FAILED_REASON = "failed (Response tokens = 0)"
EMPTY_REASON = "empty request (Request tokens = 0)"
_SECONDS = r"^[0-9]+(\.[0-9]+)?$"


def _seconds(cells: pa.Array, rules: RowRules) -> np.ndarray:
    text = trimmed(cells)
    number = pc.match_substring_regex(text, _SECONDS).to_numpy(zero_copy_only=False)
    rules.add(
        ~number,
        lambda i: f"Timestamp must be seconds >= 0 in ASCII digits like 45 or 45.5, got {cells[i].as_py()!r}",
    )
    seconds = pc.cast(pc.if_else(pa.array(number), text, "0"), pa.float64()).to_numpy()
    days = MAX_TRACE_SPAN_S // 86_400
    rules.add(
        seconds > MAX_TRACE_SPAN_S,
        lambda i: (
            f"Timestamp {cells[i].as_py()!r} s is past {days} days: a trace spans at most that (MAX_TRACE_SPAN_S)"
        ),
    )
    return seconds


class _BurstCheck:
    """The row check of one pass, keeping one model's rows when `model` is given."""

    def __init__(self, model: str | None) -> None:
        self._model = model

    def __call__(self, cells: dict[str, pa.Array], first_row: int) -> Checked:
        length = len(cells["Timestamp"])
        rules = RowRules(length)
        arrival_s = _seconds(cells["Timestamp"], rules)
        model = pc.utf8_trim_whitespace(cells["Model"])
        rules.add(pc.equal(pc.binary_length(model), 0), lambda i: "Model is empty")
        request = count_cells(cells["Request tokens"], "Request tokens", rules)
        response = count_cells(cells["Response tokens"], "Response tokens", rules)
        request_tokens_rule(rules, request, response, "Request tokens + Response tokens")
        rules.raise_first()

        other = np.zeros(length, dtype=bool)
        if self._model is not None:
            other = ~pc.equal(model, self._model).to_numpy(zero_copy_only=False)
        failed = ~other & (response == 0)
        empty = ~other & ~failed & (request == 0)
        reasons = [(f"other model than {self._model}", other), (FAILED_REASON, failed), (EMPTY_REASON, empty)]
        # In the order each reason first occurs, as a row-by-row tally would list them.
        found = sorted((int(np.argmax(mask)), reason, int(mask.sum())) for reason, mask in reasons if mask.any())
        keep = ~(other | failed | empty)

        sessions = cells.get(_SESSION)
        session_id = None
        if sessions is not None:
            session = pc.utf8_trim_whitespace(sessions)
            session_id = pc.if_else(pc.equal(pc.binary_length(session), 0), pa.scalar(None, pa.string()), session)
        mask = pa.array(keep)
        columns = {
            "request_id": pa.array(np.arange(first_row, first_row + length)).cast(pa.string()).filter(mask),
            "arrival_s": pa.array(arrival_s).filter(mask),
            "input_tokens": pa.array(request).filter(mask),
            "output_tokens": pa.array(response).filter(mask),
        }
        if session_id is not None:
            columns["session_id"] = session_id.filter(mask)
        return Checked(batch_of(columns), tuple((reason, count) for _, reason, count in found))


def scan_burstgpt(path: str | Path, model: str | None = None) -> TraceScan:
    """Start reading a BurstGPT CSV; `model` keeps only that Model's rows (e.g. "ChatGPT", "GPT-4").

    The header is checked now; a bad row raises TraceFormatError(path, line, reason) while the batches
    are consumed, and `excluded` is complete once they are exhausted.
    """
    path = Path(path)
    header = read_header(path, BURSTGPT_COLUMNS, optional=(_SESSION,))
    excluded = ExclusionTally()

    def batches():
        for checked in checked_batches(header, _BurstCheck(model)):
            for reason, count in checked.excluded:
                excluded.add(reason, count)
            yield checked.batch

    return TraceScan(
        name=path.stem if model is None else f"{path.stem}[{model}]",
        source_path=str(path),
        trace_format=TraceFormat.BURSTGPT,
        time_unit="s",
        block_size=0,
        batches=batches(),
        excluded=excluded,
        number_turns=True,
        empty_reason="no requests to replay: the file holds no usable rows",
    )


def read_burstgpt(path: str | Path, model: str | None = None) -> Workload:
    """The whole BurstGPT trace in memory; raises TraceFormatError(path, line, reason) on the first bad row."""
    return collect(scan_burstgpt(path, model))
