"""What the two OpenAI-compatible clients share: folding stream chunks, and turning them into a record.

Chunks are `data: {"choices": [...], "usage": null|{...}}` ending in `data: [DONE]` (docs/endpoints.md,
"SGLang's API"). A chunk carries tokens when its first choice has text: `delta.content` or
`delta.reasoning_content` (chat; the latter under `--reasoning-parser deepseek-r1`), or `text`
(completions). The first chunk with answer text (content, not reasoning) is the first answer token.
Usage comes from the usage chunk that `stream_options.include_usage` asks for, exactly as reported:
`prompt_tokens_details.cached_tokens`, and `reasoning_tokens`, top-level in SGLang or under
`completion_tokens_details` in OpenAI's schema. A field the server did not send stays None, with one
exception: SGLang reports cached tokens only under `--enable-cache-report`, and then drops
`prompt_tokens_details` when the count is 0 (`UsageProcessor._details_if_cached`,
python/sglang/srt/entrypoints/openai/usage_processor.py). When the server's /server_info says cache
reporting is on (SendOptions.cache_report), a usage chunk without it records 0 cached tokens, so a
cold request stays in the hit rate's denominator instead of dropping out of it.

A request with a response format sends it (`format_fields`) as OpenAI's `response_format` (json_schema,
json_object) or SGLang's extra top-level `regex`, which both SGLang adapters take; a prompt-only one
sends none and carries the schema in its prompt (`prompt_marker`). For these requests only, the answer
text (`content`, or completions' `text`) is kept and checked after the stream (replay/answer_check.py).
"""

from __future__ import annotations

import aiohttp
import orjson

from replay.answer_check import with_answer
from replay.clients.client_protocol import SendOptions
from replay.clients.stream_record import ReportedUsage, StreamedTimes, record_from_stream
from replay.clients.stream_request import Failure, int_or_none, stream_request
from replay.clock import Clock
from replay.prepared_request import PreparedRequest
from replay.recording.error_kinds import ErrorKind
from replay.recording.records import RequestRecord, RequestStatus


class OpenAiStreamState:
    __slots__ = ("chat", "first_token_s", "first_answer_s", "chunk_s", "usage", "finish_reason", "answer")

    def __init__(self, chat: bool, keep_answer: bool = False) -> None:
        self.chat = chat  # chat chunks carry `delta`, completion chunks carry `text`
        self.first_token_s: float | None = None
        self.first_answer_s: float | None = None
        self.chunk_s: list[float] = []
        self.usage: dict | None = None
        self.finish_reason: str | None = None
        self.answer: list[str] | None = [] if keep_answer else None  # answer text pieces, when checked

    def on_event(self, data: bytes, at_s: float) -> str | None:
        chunk = orjson.loads(data)
        if not isinstance(chunk, dict):
            raise ValueError("chunk is not a JSON object")
        if "error" in chunk or chunk.get("object") == "error":
            error = chunk.get("error", chunk)
            message = error.get("message") if isinstance(error, dict) else None
            return str(message or error)
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = usage
        choices = chunk.get("choices")
        if not choices:
            return None  # the usage-only chunk, or an `sglext` chunk
        choice = choices[0]
        if self.chat:
            delta = choice.get("delta") or {}
            answer, reasoning = delta.get("content"), delta.get("reasoning_content")
        else:
            answer, reasoning = choice.get("text"), None
        if answer and self.answer is not None and isinstance(answer, str):
            self.answer.append(answer)
        if answer or reasoning:
            self.chunk_s.append(at_s)
            if self.first_token_s is None:
                self.first_token_s = at_s
            if answer and self.first_answer_s is None:
                self.first_answer_s = at_s
        reason = choice.get("finish_reason")
        if reason is not None:
            self.finish_reason = str(reason)
        return None

    def end_error(self, saw_done: bool) -> Failure | None:
        if self.finish_reason == "abort":
            return RequestStatus.ERROR, ErrorKind.SERVER_ABORT, "finish_reason abort: the server aborted the request"
        if not saw_done and self.finish_reason is None:
            return (
                RequestStatus.ERROR,
                ErrorKind.INCOMPLETE_STREAM,
                "response ended with neither [DONE] nor a finish_reason",
            )
        return None

    def usage_counts(self, cache_report: bool = False) -> tuple[int | None, int | None, int | None, int | None]:
        """(prompt, completion, cached, reasoning) tokens as reported; None where not reported.

        cache_report: the server reports cached tokens and omits the details when there were none.
        """
        usage = self.usage
        if usage is None:
            return None, None, None, None
        prompt_details = usage.get("prompt_tokens_details")
        if isinstance(prompt_details, dict):
            cached = int_or_none(prompt_details.get("cached_tokens"))
        else:
            cached = 0 if cache_report else None
        reasoning = int_or_none(usage.get("reasoning_tokens"))
        completion_details = usage.get("completion_tokens_details")
        if reasoning is None and isinstance(completion_details, dict):
            reasoning = int_or_none(completion_details.get("reasoning_tokens"))
        return int_or_none(usage.get("prompt_tokens")), int_or_none(usage.get("completion_tokens")), cached, reasoning


def sampling_fields(request: PreparedRequest, options: SendOptions) -> dict:
    """Fields both OpenAI bodies carry: exact output length (ignore_eos, SGLang's and vLLM's extra),
    greedy sampling, streaming with a final usage chunk, and the twin's reasoning length when known."""
    fields: dict = {
        "model": options.model,
        "ignore_eos": True,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if options.sim_reasoning_field and request.reasoning_tokens is not None:
        fields[options.sim_reasoning_field] = request.reasoning_tokens
    fields.update(format_fields(request))
    return fields


def format_fields(request: PreparedRequest) -> dict:
    """The constraint of a constrained request with a format: `response_format`, or `regex`."""
    check = request.answer_check
    if check is None or not request.constrained:
        return {}
    response_format = check.response_format
    if response_format.pattern is not None:
        return {"regex": response_format.pattern}
    assert response_format.openai_response_format is not None
    return {"response_format": orjson.Fragment(response_format.openai_response_format)}


def prompt_marker(request: PreparedRequest) -> str:
    """What a prompt-only request appends to its prompt ("" for the others)."""
    check = request.answer_check
    return check.response_format.prompt_marker() if check is not None and not request.constrained else ""


async def send_openai(
    path: str,
    body: bytes,
    chat: bool,
    request: PreparedRequest,
    session: aiohttp.ClientSession,
    clock: Clock,
    t0_s: float,
    options: SendOptions,
) -> RequestRecord:
    state = OpenAiStreamState(chat, keep_answer=request.answer_check is not None)
    outcome = await stream_request(
        session, options.base_url + path, body, {"Content-Type": "application/json", **options.headers},
        clock, t0_s, options.request_timeout_s, state, options.exchange,
    )  # fmt: skip
    times = StreamedTimes(state.first_token_s, state.first_answer_s, tuple(state.chunk_s))
    usage = ReportedUsage(*state.usage_counts(options.cache_report))
    record = record_from_stream(request, options, outcome, times, usage, state.finish_reason)
    if request.answer_check is None:
        return record
    text = "".join(state.answer) if state.answer is not None else None
    return with_answer(record, request.answer_check, request.constrained, text)
