"""The one place a reader's rows become the canonical table, so no reader repeats the Arrow plumbing.

A reader validates its whole file first, appending each good row to a `RequestColumns`, and only then
calls `table()`: a bad row raises before any table exists, so nothing is ever half-imported.
Rows left out on purpose (failed requests, another model) are counted in an `ExclusionTally`.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from workloads.workload import WORKLOAD_SCHEMA

INT32_MAX = 2**31 - 1  # token counts are int32 in the canonical schema
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# A request's input_tokens + output_tokens is at most this (10 Mi tokens, far above any model's context):
# a count past it is a misread or corrupt trace, refused by every reader before t0, never replayed.
MAX_REQUEST_TOKENS = 10 * 2**20  # 10,485,760
# A trace's arrivals span at most this many seconds (400 days: a year of traffic with room to spare); a
# timestamp that stretches the span past it is refused as corrupt.
MAX_TRACE_SPAN_S = 400 * 86_400


class RequestColumns:
    """Canonical rows collected column by column, in source order."""

    def __init__(self) -> None:
        self._request_id: list[str] = []
        self._session_id: list[str | None] = []
        self._turn: list[int | None] = []
        self._arrival_s: list[float] = []
        self._input_tokens: list[int] = []
        self._output_tokens: list[int] = []
        self._prefix_blocks: list[list[int] | None] = []
        self._prompt: list[str | None] = []
        self._reasoning_tokens: list[int | None] = []
        self._response_format: list[str | None] = []
        self._constrained: list[bool | None] = []

    def __len__(self) -> int:
        return len(self._request_id)

    def append(
        self,
        request_id: str,
        arrival_s: float,
        input_tokens: int,
        output_tokens: int,
        *,
        session_id: str | None = None,
        turn: int | None = None,
        prefix_blocks: list[int] | None = None,
        prompt: str | None = None,
        reasoning_tokens: int | None = None,
        response_format: str | None = None,
        constrained: bool | None = None,
    ) -> None:
        self._request_id.append(request_id)
        self._session_id.append(session_id)
        self._turn.append(turn)
        self._arrival_s.append(arrival_s)
        self._input_tokens.append(input_tokens)
        self._output_tokens.append(output_tokens)
        self._prefix_blocks.append(prefix_blocks)
        self._prompt.append(prompt)
        self._reasoning_tokens.append(reasoning_tokens)
        self._response_format.append(response_format)
        self._constrained.append(constrained)

    def table(self, *, number_turns: bool = False) -> pa.Table:
        """The canonical table sorted by arrival_s (stable: equal arrivals keep source order).

        number_turns: set `turn` to 0, 1, ... within each session in arrival order (traces that carry a
        session id but no turn number, e.g. BurstGPT or a gateway log).
        """
        table = pa.table(
            {
                "request_id": pa.array(self._request_id, pa.string()),
                "session_id": pa.array(self._session_id, pa.string()),
                "turn": pa.array(self._turn, pa.int32()),
                "arrival_s": pa.array(self._arrival_s, pa.float64()),
                "input_tokens": pa.array(self._input_tokens, pa.int32()),
                "output_tokens": pa.array(self._output_tokens, pa.int32()),
                "prefix_blocks": pa.array(self._prefix_blocks, pa.list_(pa.int64())),
                "prompt": pa.array(self._prompt, pa.string()),
                "reasoning_tokens": pa.array(self._reasoning_tokens, pa.int32()),
                "response_format": pa.array(self._response_format, pa.string()),
                "constrained": pa.array(self._constrained, pa.bool_()),
            },
            schema=WORKLOAD_SCHEMA,
        )
        table = table.sort_by("arrival_s")
        return numbered_turns(table) if number_turns else table


def numbered_turns(table: pa.Table) -> pa.Table:
    """`turn` = 0, 1, ... within each session in table order (sorted by arrival): for traces that carry a
    session id but no turn number (BurstGPT, a gateway log). Rows without a session keep a null turn."""
    sessions = table.column("session_id")
    if sessions.null_count == len(sessions):
        return table
    # Rank within session by position: a stable group-by over (session, row index).
    order = pa.table({"session": sessions, "row": np.arange(table.num_rows, dtype=np.int64)})
    ranked = order.sort_by([("session", "ascending"), ("row", "ascending")])
    session_sorted = ranked.column("session").combine_chunks()
    starts = pc.not_equal(session_sorted.slice(1), session_sorted.slice(0, len(session_sorted) - 1))
    new_group = np.concatenate([[True], pc.fill_null(starts, True).to_numpy(zero_copy_only=False)])
    positions = np.arange(len(session_sorted))
    group_start = np.maximum.accumulate(np.where(new_group, positions, 0))
    turn_sorted = positions - group_start
    turns = np.empty(table.num_rows, dtype=np.int32)
    turns[ranked.column("row").to_numpy()] = turn_sorted
    turn_array = pa.array(turns, pa.int32(), mask=pc.is_null(sessions).to_numpy(zero_copy_only=False))
    at = WORKLOAD_SCHEMA.get_field_index("turn")
    return table.set_column(at, WORKLOAD_SCHEMA.field("turn"), turn_array)


class ExclusionTally:
    """Rows left out on purpose, counted per reason, so a workload can say what it does not hold."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()

    def add(self, reason: str, count: int = 1) -> None:
        self._counts[reason] += count

    @property
    def count(self) -> int:
        return sum(self._counts.values())

    @property
    def summary(self) -> str:
        """ "reason: n; reason: n" in first-seen order; empty when nothing was excluded."""
        return "; ".join(f"{reason}: {n}" for reason, n in self._counts.items())
