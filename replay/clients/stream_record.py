"""The one place a streamed response becomes a RequestRecord, whichever API the client spoke."""

from __future__ import annotations

from dataclasses import dataclass

from replay.clients.client_protocol import SendOptions
from replay.clients.stream_request import StreamOutcome
from replay.prepared_request import PreparedRequest
from replay.recording.error_kinds import clip_message
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


def record_from_stream(
    request: PreparedRequest,
    options: SendOptions,
    outcome: StreamOutcome,
    times: StreamedTimes,
    usage: ReportedUsage,
    finish_reason: str | None,
    server_e2e_latency_s: float | None = None,
    server_queue_time_s: float | None = None,
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
        finish_reason=finish_reason,
        http_status=outcome.http_status,
        status=error[0] if error else RequestStatus.OK,
        error_kind=error[1].value if error else None,
        error_message=clip_message(error[2]) if error else None,
        server_e2e_latency_s=server_e2e_latency_s,
        server_queue_time_s=server_queue_time_s,
        worker=outcome.worker,
    )
