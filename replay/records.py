"""What a replay records: one RequestRecord per request, one RunInfo per run (DESIGN.md, "Replay").

Times are seconds on the replay's monotonic clock, measured from the run's t0 (`*_mono_s`), so they
compare with each other exactly; `RunInfo.t0_wall_s` anchors them to epoch time. Usage fields are
exactly what the server reported: None when it reported nothing, never a made-up 0. Derived metrics
(TTFT, end-to-end latency, ITL) are computed in SQL from these fields, not stored twice.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum

import pyarrow as pa


class RequestStatus(str, Enum):
    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class RequestRecord:
    run_id: str
    request_id: str
    session_id: str | None
    turn: int | None
    input_tokens: int  # what the workload asked to send
    output_tokens: int  # what the workload asked to receive (max_new_tokens)
    scheduled_mono_s: float  # when the open-loop schedule said to send it
    sent_mono_s: float | None  # when the HTTP request was written
    first_token_mono_s: float | None  # first chunk carrying output tokens
    first_answer_mono_s: float | None  # first chunk carrying answer (non-reasoning) tokens
    finish_mono_s: float | None  # last byte of the response
    chunk_mono_s: tuple[float, ...]  # arrival of every token-carrying chunk (for inter-token latency)
    prompt_tokens: int | None  # as the server reported
    completion_tokens: int | None
    cached_tokens: int | None
    reasoning_tokens: int | None
    finish_reason: str | None  # length | stop | abort
    http_status: int | None
    status: RequestStatus
    error_kind: str | None = None
    error_message: str | None = None
    server_e2e_latency_s: float | None = None  # meta_info.e2e_latency, measured by the server
    is_warmup: bool = False
    held_s: float = 0.0  # how long the concurrency cap or session order held it past its schedule
    held_by: str | None = None  # "concurrency" | "session" | None
    # meta_info.queue_time (native, --enable-metrics): seconds the server's scheduler held the request in
    # its waiting queue before its first forward batch, as the server measured it (None: not reported).
    server_queue_time_s: float | None = None

    def to_row(self) -> dict:
        row = asdict(self)
        row["status"] = self.status.value
        row["chunk_mono_s"] = list(self.chunk_mono_s)
        return row


REQUEST_RECORD_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("request_id", pa.string(), nullable=False),
        pa.field("session_id", pa.string()),
        pa.field("turn", pa.int32()),
        pa.field("input_tokens", pa.int32(), nullable=False),
        pa.field("output_tokens", pa.int32(), nullable=False),
        pa.field("scheduled_mono_s", pa.float64(), nullable=False),
        pa.field("sent_mono_s", pa.float64()),
        pa.field("first_token_mono_s", pa.float64()),
        pa.field("first_answer_mono_s", pa.float64()),
        pa.field("finish_mono_s", pa.float64()),
        pa.field("chunk_mono_s", pa.list_(pa.float64())),
        pa.field("prompt_tokens", pa.int32()),
        pa.field("completion_tokens", pa.int32()),
        pa.field("cached_tokens", pa.int32()),
        pa.field("reasoning_tokens", pa.int32()),
        pa.field("finish_reason", pa.string()),
        pa.field("http_status", pa.int32()),
        pa.field("status", pa.string(), nullable=False),
        pa.field("error_kind", pa.string()),
        pa.field("error_message", pa.string()),
        pa.field("server_e2e_latency_s", pa.float64()),
        pa.field("is_warmup", pa.bool_(), nullable=False),
        pa.field("held_s", pa.float64(), nullable=False),
        pa.field("held_by", pa.string()),
        pa.field("server_queue_time_s", pa.float64()),  # newer than schema version 2: older files read null
    ]
)


@dataclass(frozen=True, slots=True)
class RunInfo:
    """Written to run.json next to requests.parquet."""

    run_id: str
    workload_name: str
    workload_hash: str
    trace_path: str
    trace_format: str
    start_s: float
    duration_s: float | None
    speedup: float
    url: str
    backend: str  # client backend, e.g. "sglang"
    t0_wall_s: float  # epoch seconds at t0
    finished_wall_s: float | None
    window_s: float | None  # the measured window: t0 + warmup_s to the last finish (warm-up already excluded)
    requests_total: int  # requests in the workload window
    requests_recorded: int
    requests_ok: int
    schedule_lag_p50_ms: float | None
    schedule_lag_p99_ms: float | None
    schedule_lag_max_ms: float | None
    client_degraded: bool  # the client fell behind its schedule (lag p99 past the threshold)
    partial: bool  # the run did not finish: requests.parquet holds only what completed
    server_info: dict = field(default_factory=dict)
    max_concurrency: int | None = None  # client-side cap on requests in flight (None: open loop only)
    warmup_s: float = 0.0  # requests scheduled before this offset are flagged is_warmup
    shard_index: int = 0  # this process replays shard shard_index of shard_count
    shard_count: int = 1
    arrival_process: str = "trace"  # trace | poisson | gamma | constant
    config_fingerprint: str | None = None  # endpoints/fingerprint.py: what changes cost, hashed

    def to_dict(self) -> dict:
        return asdict(self)
