"""What a replay records: one RequestRecord per request, one RunInfo per run (docs/replay.md).

Times are seconds on the replay's monotonic clock, measured from the run's t0 (`*_mono_s`), so they
compare with each other exactly; `RunInfo.t0_wall_s` anchors them to epoch time. Usage fields are
exactly what the server reported: None when it reported nothing, never a made-up 0. Derived metrics
(TTFT, end-to-end latency, ITL) are computed in SQL from these fields, not stored twice. Each field's
type, unit and meaning is defined once, in REQUEST_COLUMNS and RUN_INFO_COLUMNS (common/record_columns.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum

import pyarrow as pa

from common.record_columns import Column, ColumnList


class RequestStatus(str, Enum):
    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One replayed request; each field is defined (type, unit, meaning) in REQUEST_COLUMNS below."""

    run_id: str
    request_id: str
    session_id: str | None
    turn: int | None
    input_tokens: int
    output_tokens: int
    scheduled_mono_s: float
    sent_mono_s: float | None
    first_token_mono_s: float | None
    first_answer_mono_s: float | None
    finish_mono_s: float | None
    chunk_mono_s: tuple[float, ...]
    prompt_tokens: int | None
    completion_tokens: int | None
    cached_tokens: int | None
    reasoning_tokens: int | None
    finish_reason: str | None
    http_status: int | None
    status: RequestStatus
    error_kind: str | None = None
    error_message: str | None = None
    server_e2e_latency_s: float | None = None
    is_warmup: bool = False
    held_s: float = 0.0
    held_by: str | None = None
    server_queue_time_s: float | None = None
    response_format_type: str | None = None
    constrained: bool | None = None
    answer_valid: bool | None = None
    answer_error: str | None = None
    worker: str | None = None
    ttft_prealloc_ms: float | None = None
    ttft_bootstrap_ms: float | None = None
    ttft_queue_ms: float | None = None
    ttft_prefill_ms: float | None = None
    ttft_kv_transfer_ms: float | None = None
    ttft_decode_wait_ms: float | None = None

    def to_row(self) -> dict:
        row = asdict(self)
        row["status"] = self.status.value
        row["chunk_mono_s"] = list(self.chunk_mono_s)
        return row


_NOT_REPORTED = "null = not reported"
# The server's TTFT by stage (SGLang's request-level timing, observability/req_time_stats.py; docs/replay.md): what
# a null means for each part.
_TTFT_PART_NOTE = (
    "null = not reported (a real SGLang gives at most queue and prefill), not a stage of this request (a unified one "
    "has no transfer parts), or a file older than this column"
)

# The requests.parquet columns (and the lake table `requests`), in file order.
REQUEST_COLUMNS = ColumnList(
    (
        Column("run_id", pa.string(), "", "the replay this request belongs to (runs.run_id)", nullable=False),
        Column("request_id", pa.string(), "", "request id, stable within the workload", nullable=False),
        Column("session_id", pa.string(), "", "multi-turn session", note="null: independent request"),
        Column("turn", pa.int32(), "", "position in the session", note="null: independent request"),
        Column("input_tokens", pa.int32(), "tokens", "prompt length the workload asked to send", nullable=False),
        Column(
            "output_tokens",
            pa.int32(),
            "tokens",
            "output length the workload enforced via max_new_tokens + ignore_eos",
            nullable=False,
        ),
        Column(
            "scheduled_mono_s", pa.float64(), "s from t0", "when the open-loop schedule said to send it", nullable=False
        ),
        Column("sent_mono_s", pa.float64(), "s from t0", "when the HTTP request was written"),
        Column("first_token_mono_s", pa.float64(), "s from t0", "first chunk carrying output tokens"),
        Column("first_answer_mono_s", pa.float64(), "s from t0", "first chunk carrying answer, not reasoning, tokens"),
        Column("finish_mono_s", pa.float64(), "s from t0", "last byte of the response"),
        Column("chunk_mono_s", pa.list_(pa.float64()), "list of s from t0", "arrival of every token-carrying chunk"),
        Column("prompt_tokens", pa.int32(), "tokens", "prompt length the server reported", note=_NOT_REPORTED),
        Column(
            "completion_tokens",
            pa.int32(),
            "tokens",
            "output length the server reported, reasoning included",
            note=_NOT_REPORTED,
        ),
        Column(
            "cached_tokens",
            pa.int32(),
            "tokens",
            "prompt tokens served from the prefix cache, server-reported",
            note=_NOT_REPORTED,
        ),
        Column("reasoning_tokens", pa.int32(), "tokens", "reasoning tokens the server reported", note=_NOT_REPORTED),
        Column("finish_reason", pa.string(), "", "length | stop | abort"),
        Column("http_status", pa.int32(), "", "HTTP status code of the response"),
        Column("status", pa.string(), "", "ok | error | timeout | cancelled", nullable=False),
        Column("error_kind", pa.string(), "", "class of failure", note="null when ok"),
        Column("error_message", pa.string(), "", "failure detail", note="null when ok"),
        Column(
            "server_e2e_latency_s",
            pa.float64(),
            "s",
            "meta_info.e2e_latency: end-to-end latency measured by the server",
            note=_NOT_REPORTED,
        ),
        Column(
            "is_warmup", pa.bool_(), "", "sent before the measured window; excluded from every metric", nullable=False
        ),
        Column(
            "held_s",
            pa.float64(),
            "s",
            "how long the concurrency cap or session order held it past its schedule",
            nullable=False,
            note="0 in files before v2",
        ),
        Column("held_by", pa.string(), "", "concurrency | session | null"),
        Column(
            "server_queue_time_s",
            pa.float64(),
            "s",
            "meta_info.queue_time (native, --enable-metrics): time in the server's waiting queue before its first "
            "forward batch, measured by the server",
            note="null = not reported, or a file older than this column",
        ),
        Column(
            "response_format_type",
            pa.string(),
            "",
            "json_schema | json_object | regex: the answer format the request asked for",
            note="null = free-form, or a file older than this column",
        ),
        Column(
            "constrained",
            pa.bool_(),
            "",
            "the format was sent to the server as a constraint; false: only written into the prompt",
            note="null when no format",
        ),
        Column(
            "answer_valid",
            pa.bool_(),
            "",
            "the answer after reasoning has the requested format (jsonschema Draft 2020-12, or a full regex match)",
            note="null when no format or the request did not complete",
        ),
        Column(
            "answer_error",
            pa.string(),
            "",
            "first validation error of the answer: JSON path and message",
            note="null when valid, no format, or not completed",
        ),
        Column(
            "worker",
            pa.string(),
            "",
            "the fleet's worker that served it, as SGLang's router (smg) names it in its x-smg-routed-worker-id "
            "response header: the worker's URL",
            note="null: not through smg, or no answer",
        ),
        Column(
            "ttft_prealloc_ms",
            pa.float64(),
            "ms",
            "ttft part, disaggregated: in the decode server's prealloc queue until its kv pool took slots for the "
            "prompt",
            note=_TTFT_PART_NOTE,
        ),
        Column(
            "ttft_bootstrap_ms",
            pa.float64(),
            "ms",
            "ttft part, disaggregated: from the decode's slots until the prefill server queued the request (the "
            "bootstrap handshake and its notices)",
            note=_TTFT_PART_NOTE,
        ),
        Column(
            "ttft_queue_ms",
            pa.float64(),
            "ms",
            "ttft part: in the waiting queue before the first forward batch, on the server that prefilled it "
            "(meta_info.queue_time of a request never retracted)",
            note=_TTFT_PART_NOTE,
        ),
        Column(
            "ttft_prefill_ms",
            pa.float64(),
            "ms",
            "ttft part: the first forward batch to the first token sampled (meta_info.prefill_finished_time - "
            "forward_entry_time)",
            note=_TTFT_PART_NOTE,
        ),
        Column(
            "ttft_kv_transfer_ms",
            pa.float64(),
            "ms",
            "ttft part, disaggregated: the first token sampled on the prefill server to the kv's arrival at the decode "
            "server",
            note=_TTFT_PART_NOTE,
        ),
        Column(
            "ttft_decode_wait_ms",
            pa.float64(),
            "ms",
            "ttft part, disaggregated: the kv's arrival at the decode server to the first token it sent",
            note=_TTFT_PART_NOTE,
        ),
    )
)
REQUEST_RECORD_SCHEMA = REQUEST_COLUMNS.schema()


@dataclass(frozen=True, slots=True)
class RunInfo:
    """Written to run.json next to requests.parquet; each field is defined in RUN_INFO_COLUMNS below."""

    run_id: str
    workload_name: str
    workload_hash: str
    trace_path: str
    trace_format: str
    start_s: float
    duration_s: float | None
    speedup: float
    url: str
    backend: str
    t0_wall_s: float
    finished_wall_s: float | None
    window_s: float | None
    requests_total: int
    requests_recorded: int
    requests_ok: int
    schedule_lag_p50_ms: float | None
    schedule_lag_p99_ms: float | None
    schedule_lag_max_ms: float | None
    client_degraded: bool
    partial: bool
    server_info: dict = field(default_factory=dict)
    max_concurrency: int | None = None
    warmup_s: float = 0.0
    shard_index: int = 0
    shard_count: int = 1
    arrival_process: str = "trace"
    config_fingerprint: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


_EPOCH = "s since the Unix epoch"

# The run.json fields; the lake table `runs` (warehouse/parquet/run_columns.py) reuses most of them.
RUN_INFO_COLUMNS = ColumnList(
    (
        Column("run_id", pa.string(), "", "unique id of the replay", nullable=False),
        Column("workload_name", pa.string(), "", "name of the replayed workload", nullable=False),
        Column("workload_hash", pa.string(), "", "content hash of the replayed workload", nullable=False),
        Column("trace_path", pa.string(), "", "trace file the workload was read from", nullable=False),
        Column("trace_format", pa.string(), "", "trace reader used (mooncake, azure, ...)", nullable=False),
        Column("start_s", pa.float64(), "s of trace time", "start of the replayed slice of the trace", nullable=False),
        Column("duration_s", pa.float64(), "s of trace time", "length of the replayed slice", note="null = to the end"),
        Column("speedup", pa.float64(), "ratio", "trace time / replay time", nullable=False),
        Column("url", pa.string(), "", "base URL the client sent to", nullable=False),
        Column("backend", pa.string(), "", "client backend, e.g. sglang", nullable=False),
        Column("t0_wall_s", pa.float64(), _EPOCH, "wall-clock time of the run's t0", nullable=False),
        Column("finished_wall_s", pa.float64(), _EPOCH, "wall-clock time the run ended", note="null if it never did"),
        Column(
            "window_s",
            pa.float64(),
            "s",
            "the measured window: t0 + warmup_s to the end of the last request (its last byte, or when it failed "
            "or was stopped without one), warm-up already excluded by the replay: the time the endpoint was held, "
            "whatever it answered",
        ),
        Column("requests_total", pa.int64(), "count", "requests in the workload window", nullable=False),
        Column("requests_recorded", pa.int64(), "count", "requests with a record", nullable=False),
        Column(
            "requests_ok", pa.int64(), "count", "requests with status ok, as the client counted them", nullable=False
        ),
        Column(
            "schedule_lag_p50_ms",
            pa.float64(),
            "ms",
            "median requests.schedule_lag_ms over the sent requests, warm-up excluded",
        ),
        Column("schedule_lag_p99_ms", pa.float64(), "ms", "p99 of the same schedule_lag_ms"),
        Column("schedule_lag_max_ms", pa.float64(), "ms", "largest of the same schedule_lag_ms"),
        Column(
            "client_degraded",
            pa.bool_(),
            "",
            "the client fell behind its schedule (lag p99 past the threshold)",
            nullable=False,
        ),
        Column(
            "partial",
            pa.bool_(),
            "",
            "the run did not finish: only the requests that completed are recorded",
            nullable=False,
        ),
        Column(
            "server_info",
            pa.string(),
            "",
            "the server's /server_info as the replay fetched it (a JSON object)",
            nullable=False,
        ),
        Column(
            "max_concurrency",
            pa.int32(),
            "count",
            "client-side cap on requests in flight",
            note="null = open loop only",
        ),
        Column(
            "warmup_s", pa.float64(), "s from t0", "requests scheduled before this offset are warm-up", nullable=False
        ),
        Column("shard_index", pa.int32(), "", "this run replayed shard shard_index of shard_count", nullable=False),
        Column("shard_count", pa.int32(), "count", "shards the workload was split into", nullable=False),
        Column("arrival_process", pa.string(), "", "trace | poisson | gamma | constant", nullable=False),
        Column(
            "config_fingerprint",
            pa.string(),
            "",
            "12 hex digits over model, version and cost-relevant server flags (endpoints/fingerprint.py)",
        ),
    )
)
RUN_INFO_JSON_FIELDS = ("server_info",)  # dict fields, kept as JSON
