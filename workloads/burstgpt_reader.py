"""BurstGPT CSV traces → the canonical Workload.

Columns by header name, so both published variants read the same:
  6 columns: Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
  8 columns: Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type
Timestamp is seconds from the trace start (kept as is, like Mooncake's, so a window names trace seconds).
A row with Response tokens = 0 is a failed request and one with Request tokens = 0 sent nothing: both are
left out and counted in `Workload.excluded_rows`, as are rows of other models when a model filter is
given. Session ID becomes session_id, turns numbered by timestamp. No prompts, no prefix information.
A malformed row fails the whole read with file, line and reason.
"""

from __future__ import annotations

import math
from pathlib import Path

from workloads.trace_scan import TraceScan, scan_of_workload
from workloads.trace_source import csv_rows, parse_count_cell
from workloads.workload import TraceFormat, TraceFormatError, Workload
from workloads.workload_builder import ExclusionTally, RequestColumns

BURSTGPT_COLUMNS = ("Timestamp", "Model", "Request tokens", "Response tokens")
_SESSION = "Session ID"
FAILED_REASON = "failed (Response tokens = 0)"
EMPTY_REASON = "empty request (Request tokens = 0)"


def _parse_seconds(text: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise ValueError(f"Timestamp must be a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"Timestamp must be a finite, non-negative number of seconds, got {text!r}")
    return value


def read_burstgpt(path: str | Path, model: str | None = None) -> Workload:
    """Read a BurstGPT CSV; `model` keeps only that Model's rows (e.g. "ChatGPT", "GPT-4").

    Raises TraceFormatError(path, line, reason) on the first malformed row.
    """
    path = Path(path)
    rows = RequestColumns()
    excluded = ExclusionTally()
    for line, row in csv_rows(path, BURSTGPT_COLUMNS, optional=(_SESSION,)):
        try:
            arrival_s = _parse_seconds(row["Timestamp"])
            input_tokens = parse_count_cell(row["Request tokens"], "Request tokens", 0)
            output_tokens = parse_count_cell(row["Response tokens"], "Response tokens", 0)
        except ValueError as exc:
            raise TraceFormatError(str(path), line, str(exc)) from None
        if model is not None and row["Model"].strip() != model:
            excluded.add(f"other model than {model}")
        elif output_tokens == 0:
            excluded.add(FAILED_REASON)
        elif input_tokens == 0:
            excluded.add(EMPTY_REASON)
        else:
            session = row.get(_SESSION, "").strip() or None
            rows.append(str(line - 2), arrival_s, input_tokens, output_tokens, session_id=session)
    if not len(rows):
        detail = f" ({excluded.summary})" if excluded.count else ""
        raise TraceFormatError(str(path), None, f"no requests to replay: the file holds no usable rows{detail}")
    return Workload(
        name=path.stem if model is None else f"{path.stem}[{model}]",
        source_path=str(path),
        trace_format=TraceFormat.BURSTGPT,
        time_unit="s",
        block_size=0,
        table=rows.table(number_turns=True),
        excluded_rows=excluded.count,
        excluded_reason=excluded.summary,
    )


# Transitional: reads the whole file, then streams it. Replaced by a streaming scan.
def scan_burstgpt(path: str | Path, model: str | None = None) -> TraceScan:
    return scan_of_workload(read_burstgpt(path, model))
