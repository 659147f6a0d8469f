"""Reasoning tokens for traces that did not capture them (DeepSeek-R1 scenarios).

A reasoning model thinks before it answers: a request whose trace records an answer of n tokens emits
about ratio x n reasoning tokens first. The request's output grows by that much (it is all generated
and paid for) and `reasoning_tokens` records it, so the twin emits exactly that much reasoning and the
warehouse can report the reasoning share. Rows that captured their reasoning keep it.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pyarrow as pa

from workloads.workload import WORKLOAD_SCHEMA, Workload


def with_reasoning(workload: Workload, ratio: float) -> Workload:
    if ratio == 0:
        return workload
    if not math.isfinite(ratio) or ratio < 0:
        raise ValueError(f"{workload.source_path}: reasoning ratio must be a number >= 0, got {ratio!r}")
    outputs = workload.table.column("output_tokens").to_pylist()
    captured = workload.table.column("reasoning_tokens").to_pylist()
    reasoning = [r if r is not None else round(o * ratio) for o, r in zip(outputs, captured)]
    totals = [o if r is not None else o + t for o, r, t in zip(outputs, captured, reasoning)]
    table = workload.table
    for name, values in (("output_tokens", totals), ("reasoning_tokens", reasoning)):
        table = table.set_column(
            table.schema.get_field_index(name), WORKLOAD_SCHEMA.field(name), pa.array(values, pa.int32())
        )
    return replace(workload, name=f"{workload.name}+reasoning{ratio:g}", table=table)
