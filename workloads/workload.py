"""The canonical Workload: a named, content-hashed Arrow table of requests (docs/workloads.md).

Every reader produces exactly this schema; replay and the warehouse read nothing else.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from enum import Enum

import pyarrow as pa


class TraceFormat(str, Enum):
    MOONCAKE = "mooncake"
    AZURE = "azure"
    BURSTGPT = "burstgpt"
    SHAREGPT = "sharegpt"
    CANONICAL = "canonical"
    GATEWAY = "gateway"


# time_unit of a trace that carries no timing (ShareGPT): every arrival_s is 0 until
# workloads.synthetic_arrivals.with_synthetic_arrivals gives it a schedule.
UNTIMED = "none"


class TraceFormatError(ValueError):
    """A trace file that cannot be read: names the file, the line and the reason."""

    def __init__(self, path: str, line: int | None, reason: str) -> None:
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason


# One row per request. Columns and meaning are those of docs/workloads.md.
WORKLOAD_SCHEMA = pa.schema(
    [
        pa.field("request_id", pa.string(), nullable=False),  # stable within the workload
        pa.field("session_id", pa.string()),  # null: independent request
        pa.field("turn", pa.int32()),  # order within the session
        pa.field("arrival_s", pa.float64(), nullable=False),  # offset from the workload start
        pa.field("input_tokens", pa.int32(), nullable=False),
        pa.field("output_tokens", pa.int32(), nullable=False),  # enforced with ignore_eos
        pa.field("prefix_blocks", pa.list_(pa.int64())),  # block hashes; equal hash = equal tokens
        pa.field("prompt", pa.string()),  # text or JSON chat messages, only where captured
        pa.field("reasoning_tokens", pa.int32()),  # captured reasoning length (R1), when known
        # The answer's format as canonical JSON (workloads/prompts/response_format.py); null: free-form.
        pa.field("response_format", pa.string()),
        # With a format: true sends the constraint to the server, false only writes it into the prompt.
        pa.field("constrained", pa.bool_()),
    ]
)
# Columns added after the first canonical files were written: older files read with them null, and a
# workload that leaves them all null hashes as it did before they existed.
LATER_COLUMNS = ("response_format", "constrained")


@dataclass(frozen=True, slots=True)
class Workload:
    """A list of canonical requests plus the facts needed to replay it faithfully."""

    name: str
    source_path: str
    trace_format: TraceFormat
    time_unit: str  # unit of the source timestamps ("ms", "s", "datetime"; "none": the source has no timing)
    block_size: int  # tokens per prefix block; 0 when the trace has no prefix information
    table: pa.Table  # WORKLOAD_SCHEMA, sorted by arrival_s
    # Rows of the source left out on purpose (e.g. BurstGPT failures), and why, per reason:
    # "failed (Response tokens = 0): 12; other model: 3". Bad rows are errors, not exclusions.
    excluded_rows: int = 0
    excluded_reason: str = ""
    # What produced input/output token counts: "trace" (the file's own counts), "usage" (the server's
    # logged usage), "approx-4-bytes" (UTF-8 bytes / 4, see token_counter.py) or "tokenizer:<file name>".
    token_counter: str = "trace"
    # Where arrival_s came from: "trace"; "none" for an untimed trace (all 0, see UNTIMED); or the
    # synthetic process that set it ("poisson", "gamma", "constant").
    arrival_process: str = "trace"

    def __post_init__(self) -> None:
        if not self.table.schema.equals(WORKLOAD_SCHEMA):
            raise ValueError(f"workload {self.name!r}: table does not have the canonical schema")

    @property
    def needs_arrivals(self) -> bool:
        """True for an untimed trace: replay it only after synthetic_arrivals.with_synthetic_arrivals."""
        return self.arrival_process == "none"

    @property
    def num_requests(self) -> int:
        return self.table.num_rows

    @property
    def content_hash(self) -> str:
        """sha256 over the canonical columns, so two workloads with equal requests hash equal."""
        digest = hashlib.sha256()
        digest.update(f"{self.block_size}".encode())
        table = self.table
        if all(table.column(name).null_count == table.num_rows for name in LATER_COLUMNS):
            table = table.drop_columns(list(LATER_COLUMNS))
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        digest.update(sink.getvalue().to_pybytes())
        return digest.hexdigest()[:16]

    def window(self, start_s: float, duration_s: float | None) -> "Workload":
        """Requests arriving in [start_s, start_s + duration_s), re-based so the first window second is 0."""
        import pyarrow.compute as pc

        arrival = self.table.column("arrival_s")
        mask = pc.greater_equal(arrival, start_s)
        if duration_s is not None:
            mask = pc.and_(mask, pc.less(arrival, start_s + duration_s))
        sub = self.table.filter(mask)
        rebased = pc.subtract(sub.column("arrival_s"), start_s)
        sub = sub.set_column(sub.schema.get_field_index("arrival_s"), WORKLOAD_SCHEMA.field("arrival_s"), rebased)
        return replace(
            self,
            name=f"{self.name}[{start_s:g}s+{duration_s if duration_s is not None else 'end'}s]",
            table=sub,
        )
