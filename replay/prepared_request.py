"""Requests ready to send: built from a Workload and its materialized token ids before t0.

Everything a client needs is computed here, off the hot path: the schedule offset (already divided by
the speedup) and the exact input ids, held as a compact int32 array that orjson serializes natively.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from workloads.workload import Workload


@dataclass(frozen=True, slots=True)
class PreparedRequest:
    request_id: str
    session_id: str | None
    turn: int | None
    offset_s: float  # due at t0 + offset_s on the monotonic clock (= arrival_s / speedup)
    input_ids: np.ndarray  # int32, exactly input_tokens long
    output_tokens: int  # max_new_tokens, enforced with ignore_eos

    @property
    def input_tokens(self) -> int:
        return int(self.input_ids.shape[0])


def prepare_requests(
    workload: Workload, input_ids: Sequence[Sequence[int]], speedup: float
) -> list[PreparedRequest]:
    """One PreparedRequest per workload row, in schedule order.

    `input_ids` holds one id list per row in table order. A count or length that disagrees with the
    workload is a bug upstream and is rejected here, naming the request, rather than replayed wrong.
    """
    if speedup <= 0:
        raise ValueError(f"speedup must be > 0, got {speedup}")
    table = workload.table
    if len(input_ids) != table.num_rows:
        raise ValueError(
            f"workload {workload.name!r}: {table.num_rows} requests but {len(input_ids)} input id lists"
        )
    columns = table.select(["request_id", "session_id", "turn", "arrival_s", "input_tokens", "output_tokens"])
    rows = columns.to_pydict()
    prepared: list[PreparedRequest] = []
    for i in range(table.num_rows):
        ids = np.asarray(input_ids[i], dtype=np.int32)
        if ids.ndim != 1 or ids.shape[0] != rows["input_tokens"][i]:
            raise ValueError(
                f"workload {workload.name!r}, request {rows['request_id'][i]!r}: "
                f"{ids.shape[0] if ids.ndim == 1 else ids.shape} input ids for {rows['input_tokens'][i]} input tokens"
            )
        prepared.append(
            PreparedRequest(
                request_id=rows["request_id"][i],
                session_id=rows["session_id"][i],
                turn=rows["turn"][i],
                offset_s=rows["arrival_s"][i] / speedup,
                input_ids=ids,
                output_tokens=rows["output_tokens"][i],
            )
        )
    # Stable sort: equal offsets keep table order, so replay order is deterministic.
    prepared.sort(key=lambda r: r.offset_s)
    return prepared
