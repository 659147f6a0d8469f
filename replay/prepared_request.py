"""Requests ready to send: built from a Workload and its materialized token ids before t0.

Everything a client needs is computed here, off the hot path: the schedule offset (already divided by
the speedup), the exact input ids (a compact int32 array that orjson serializes natively), the
captured prompt where the trace kept one, whether the request falls in the warm-up period, and for a
request with a response format its compiled answer check (replay/answer_check.py), one per distinct
format, so no schema is compiled after t0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from replay.answer_check import AnswerCheck, compile_checks
from workloads.workload import Workload


@dataclass(frozen=True, slots=True)
class PreparedRequest:
    request_id: str
    session_id: str | None
    turn: int | None
    offset_s: float  # due at t0 + offset_s on the monotonic clock (= arrival_s / speedup)
    input_ids: np.ndarray  # int32, exactly input_tokens long
    output_tokens: int  # max_new_tokens, enforced with ignore_eos
    reasoning_tokens: int | None = None  # captured reasoning length (R1), passed to the twin when known
    prompt: str | None = None  # captured text or JSON chat messages; OpenAI backends send it as is
    is_warmup: bool = False  # scheduled inside the warm-up period: recorded, flagged, left out of the window
    answer_check: AnswerCheck | None = None  # the response format asked for and its check; None: free-form
    constrained: bool = False  # with a format: sent to the server as a constraint, else only in the prompt

    @property
    def input_tokens(self) -> int:
        return int(self.input_ids.shape[0])


def prepare_requests(
    workload: Workload,
    input_ids: Sequence[Sequence[int]] | Sequence[np.ndarray],
    speedup: float,
    warmup_s: float = 0.0,
) -> list[PreparedRequest]:
    """One PreparedRequest per workload row, in schedule order.

    `input_ids` holds one id sequence per row in table order. A count or length that disagrees with
    the workload is a bug upstream and is rejected here, naming the request, rather than replayed
    wrong. Requests due before `warmup_s` (replay seconds after t0) are flagged `is_warmup`.
    """
    if speedup <= 0:
        raise ValueError(f"speedup must be > 0, got {speedup}")
    if warmup_s < 0:
        raise ValueError(f"warmup_s must be >= 0, got {warmup_s}")
    table = workload.table
    if len(input_ids) != table.num_rows:
        raise ValueError(f"workload {workload.name!r}: {table.num_rows} requests but {len(input_ids)} input id lists")
    names = [
        "request_id",
        "session_id",
        "turn",
        "arrival_s",
        "input_tokens",
        "output_tokens",
        "reasoning_tokens",
        "prompt",
        "response_format",
        "constrained",
    ]
    rows = table.select(names).to_pydict()
    try:
        checks = compile_checks(rows["response_format"])
    except ValueError as exc:
        raise ValueError(f"workload {workload.name!r}: {exc}") from None
    prepared: list[PreparedRequest] = []
    for i in range(table.num_rows):
        ids = np.asarray(input_ids[i], dtype=np.int32)
        if ids.ndim != 1 or ids.shape[0] != rows["input_tokens"][i]:
            raise ValueError(
                f"workload {workload.name!r}, request {rows['request_id'][i]!r}: "
                f"{ids.shape[0] if ids.ndim == 1 else ids.shape} input ids for {rows['input_tokens'][i]} input tokens"
            )
        offset_s = rows["arrival_s"][i] / speedup
        prepared.append(
            PreparedRequest(
                request_id=rows["request_id"][i],
                session_id=rows["session_id"][i],
                turn=rows["turn"][i],
                offset_s=offset_s,
                input_ids=ids,
                output_tokens=rows["output_tokens"][i],
                reasoning_tokens=rows["reasoning_tokens"][i],
                prompt=rows["prompt"][i],
                is_warmup=offset_s < warmup_s,
                answer_check=checks.get(rows["response_format"][i]) if rows["response_format"][i] else None,
                # A format without a recorded choice was captured from a request that sent it: constrained.
                constrained=rows["constrained"][i] is not False,
            )
        )
    # Stable sort: equal offsets keep table order, so replay order is deterministic.
    prepared.sort(key=lambda r: r.offset_s)
    return prepared
