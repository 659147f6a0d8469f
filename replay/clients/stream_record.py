"""The one place a streamed response becomes a RequestRecord, whichever API the client spoke."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from redaction.secret_redaction import redact_clipped, secret_header_values
from replay.clients.client_protocol import SendOptions
from replay.clients.stream_request import StreamOutcome
from replay.prepared_request import PreparedRequest
from replay.recording.error_kinds import stored_message
from replay.recording.records import RequestRecord, RequestStatus


@dataclass(frozen=True, slots=True)
class StreamedTimes:
    first_token_s: float | None
    first_answer_s: float | None
    chunk_s: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class ReportedUsage:
    """Usage exactly as the server reported it: None where it said nothing."""

    prompt_tokens: int | None
    completion_tokens: int | None
    cached_tokens: int | None
    reasoning_tokens: int | None


@dataclass(frozen=True, slots=True)
class ReportedTtftParts:
    """The server's time to first token by stage (ms), exactly as it reported them: None where it said nothing
    (requests.ttft_*_ms; the SGLang client reads them, sglang_client.reported_ttft_parts)."""

    prealloc_ms: float | None = None
    bootstrap_ms: float | None = None
    queue_ms: float | None = None
    prefill_ms: float | None = None
    kv_transfer_ms: float | None = None
    decode_wait_ms: float | None = None


NO_TTFT_PARTS = ReportedTtftParts()


SERVER_TEXT_MAX_CHARS = 500  # a finish reason or a worker's URL; longer is a server's junk


@lru_cache(maxsize=1024)  # a run sees a few finish reasons and worker URLs, each many times
def server_text(text: str | None) -> str | None:
    """A short text the server chose, as a record keeps it: redacted (redaction/secret_redaction.py), clipped."""
    return None if text is None else redact_clipped(text, SERVER_TEXT_MAX_CHARS)


def record_from_stream(
    request: PreparedRequest,
    options: SendOptions,
    outcome: StreamOutcome,
    times: StreamedTimes,
    usage: ReportedUsage,
    finish_reason: str | None,
    server_e2e_latency_s: float | None = None,
    server_queue_time_s: float | None = None,
    ttft_parts: ReportedTtftParts = NO_TTFT_PARTS,
) -> RequestRecord:
    error = outcome.error
    return RequestRecord(
        run_id=options.run_id,
        request_id=request.request_id,
        session_id=request.session_id,
        turn=request.turn,
        input_tokens=request.input_tokens,
        output_tokens=request.output_tokens,
        scheduled_mono_s=request.offset_s,
        sent_mono_s=outcome.sent_s,
        first_token_mono_s=times.first_token_s,
        first_answer_mono_s=times.first_answer_s,
        finish_mono_s=outcome.finish_s,
        chunk_mono_s=times.chunk_s,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cached_tokens=usage.cached_tokens,
        reasoning_tokens=usage.reasoning_tokens,
        finish_reason=server_text(finish_reason),
        http_status=outcome.http_status,
        status=error[0] if error else RequestStatus.OK,
        error_kind=error[1].value if error else None,
        error_message=stored_message(error[2], secret_header_values(options.headers)) if error else None,
        server_e2e_latency_s=server_e2e_latency_s,
        server_queue_time_s=server_queue_time_s,
        worker=server_text(outcome.worker),
        ttft_prealloc_ms=ttft_parts.prealloc_ms,
        ttft_bootstrap_ms=ttft_parts.bootstrap_ms,
        ttft_queue_ms=ttft_parts.queue_ms,
        ttft_prefill_ms=ttft_parts.prefill_ms,
        ttft_kv_transfer_ms=ttft_parts.kv_transfer_ms,
        ttft_decode_wait_ms=ttft_parts.decode_wait_ms,
    )
