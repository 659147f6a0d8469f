"""SGLang native `POST /generate` client: exact input ids, enforced output length, streamed.

Body: {input_ids, sampling_params: {max_new_tokens, ignore_eos: true, temperature: 0}, stream: true},
plus `require_reasoning: true` when configured (R1: SGLang then counts reasoning tokens) and, against
the twin only, its reasoning-length field. SGLang streams `data: {"text", "output_ids", "meta_info"}`
events ending in `data: [DONE]`; `text` and `output_ids` are cumulative by default, so tokens are
counted from `meta_info.completion_tokens` (cumulative in both streaming modes), never from text.
Usage is taken from the last event's meta_info, exactly as reported (docs/endpoints.md, "SGLang's API").

A request with a response format sends it as SGLang's `sampling_params.json_schema` (a JSON string;
json_object as '{"type": "object"}', what SGLang's OpenAI adapter sends) or `sampling_params.regex`.
A prompt-only one sends no constraint: its prompt goes as `text` (the captured text, or the words
built from its ids, prompt_text.py) with the schema appended, since a marker cannot be appended to
token ids without the server's tokenizer. Only for these requests is the output text kept
(`_AnswerText`), then checked after the stream (replay/answer_check.py).

Under `--enable-metrics` SGLang's tokenizer manager merges the scheduler's timings into every event's
meta_info (`SchedulerReqTimeStats.convert_to_output_meta_info`, python/sglang/srt/observability/
req_time_stats.py): `queue_time` = forward_entry_time − wait_queue_entry_time, in seconds, next to
`forward_entry_time` (epoch s, written only once the request entered a forward batch). It is recorded
as `server_queue_time_s`. A `queue_time` of exactly 0 without `forward_entry_time` is the default of
timings that never reached the tokenizer manager (both stamps 0), not a measurement, and stays None.

Where the time to first token went (requests.ttft_*_ms, `reported_ttft_parts`): the twin sends its request's TTFT
by stage on the final event, `sim_ttft_parts_ms` ({prealloc, bootstrap, queue, prefill, kv_transfer, decode_wait}:
ms, the stages the request passed), read as they are. A real SGLang sends only those three timings, so from it
come two parts at most, on a server that prefilled the request itself (`prefill_finished_time` present):
prefill = prefill_finished_time − forward_entry_time, and queue = queue_time when the request was never retracted
(SGLang adds a retracted request's later waits to it). A PD decode server sends no `prefill_finished_time` (its
`queue_time` is its own wait after the KV arrived): nothing is taken from it. The rest stays None, never made up.
"""

from __future__ import annotations

import aiohttp
import orjson

from replay.answer_check import with_answer
from replay.clients.client_protocol import SendOptions
from replay.clients.prompt_text import completion_prompt
from replay.clients.stream_record import (
    NO_TTFT_PARTS,
    ReportedTtftParts,
    ReportedUsage,
    StreamedTimes,
    record_from_stream,
)
from replay.clients.stream_request import Failure, float_or_none, int_or_none, stream_request
from replay.clock import Clock
from replay.prepared_request import PreparedRequest
from replay.recording.error_kinds import ErrorKind
from replay.recording.records import RequestRecord, RequestStatus

GENERATE_PATH = "/generate"
_META_KEY = b'"meta_info":'
TWIN_TTFT_PARTS_KEY = "sim_ttft_parts_ms"  # the twin's meta_info: {part: ms} (endpoints/sim/engine/ttft_parts.py)


def build_body(request: PreparedRequest, options: SendOptions | None = None) -> bytes:
    sampling: dict = {"max_new_tokens": request.output_tokens, "ignore_eos": True, "temperature": 0}
    body: dict = {"input_ids": request.input_ids, "sampling_params": sampling, "stream": True}
    check = request.answer_check
    if check is not None:
        response_format = check.response_format
        if not request.constrained:
            del body["input_ids"]
            body["text"] = completion_prompt(request.prompt, request.input_ids) + response_format.prompt_marker()
        elif response_format.pattern is not None:
            sampling["regex"] = response_format.pattern
        else:
            sampling["json_schema"] = response_format.sglang_json_schema
    if options is not None:
        if options.require_reasoning:
            body["require_reasoning"] = True
        if options.sim_reasoning_field and request.reasoning_tokens is not None:
            body[options.sim_reasoning_field] = request.reasoning_tokens
    return orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)


def parse_event(data: bytes) -> dict:
    """The event as a dict; when possible only its meta_info is decoded.

    With cumulative streaming every event repeats all text and output ids so far, so decoding whole
    events costs O(n²) in the output length. meta_info is the last key SGLang writes, and a JSON
    string cannot contain an unescaped `"meta_info":`, so the slice after its last occurrence is the
    meta object; anything unexpected falls back to a full decode.
    """
    at = data.rfind(_META_KEY)
    if at >= 0:
        if data.endswith(b"}"):  # as SGLang and the twin write it: no whitespace to strip, one slice
            meta_json: bytes | None = data[at + len(_META_KEY) : -1]
        else:
            tail = data[at + len(_META_KEY) :].rstrip()
            meta_json = tail[:-1] if tail.endswith(b"}") else None
        if meta_json is not None:
            try:
                meta = orjson.loads(meta_json)
            except orjson.JSONDecodeError:
                meta = None
            if isinstance(meta, dict) and "completion_tokens" in meta:
                return {"meta_info": meta}
    return orjson.loads(data)


class _AnswerText:
    """The output text of one response, for requests whose answer is checked.

    SGLang streams cumulative text by default and deltas under --incremental-streaming-output. The
    second event that carries tokens tells which: cumulative when its output_ids are all the tokens so
    far (or, without ids, its text extends the text so far). Cumulative events are kept raw, only the
    last one decoded at the end; deltas are decoded as they come (they are small).
    """

    __slots__ = ("_text", "_last", "_cumulative", "_events")

    def __init__(self) -> None:
        self._text = ""
        self._last: bytes | None = None
        self._cumulative: bool | None = None
        self._events = 0

    def add(self, data: bytes, completion_tokens: int | None) -> None:
        if self._cumulative:
            self._last = data
            return
        event = orjson.loads(data)
        text = event.get("text") if isinstance(event, dict) else None
        if not isinstance(text, str):
            return
        if self._cumulative is None and text:
            self._events += 1
            if self._events == 2:
                ids = event.get("output_ids")
                if isinstance(ids, list) and completion_tokens is not None:
                    self._cumulative = len(ids) == completion_tokens
                else:
                    self._cumulative = text.startswith(self._text)
                if self._cumulative:
                    self._text, self._last = text, data
                    return
            else:
                self._text = text
                return
        self._text += text

    def text(self) -> str:
        if self._cumulative and self._last is not None:
            event = orjson.loads(self._last)
            return str(event.get("text") or "")
        return self._text


class _StreamState:
    """What the events of one response have told us so far (times already relative to t0)."""

    __slots__ = ("first_token_s", "first_answer_s", "chunk_s", "meta", "completion_seen", "output_len_seen", "answer")

    def __init__(self, keep_answer: bool = False) -> None:
        self.first_token_s: float | None = None
        self.first_answer_s: float | None = None
        self.chunk_s: list[float] = []
        self.meta: dict = {}
        self.completion_seen = 0
        self.output_len_seen = 0
        self.answer = _AnswerText() if keep_answer else None

    def on_event(self, data: bytes, at_s: float) -> str | None:
        event = parse_event(data)
        message = self.fold(event, at_s)
        if self.answer is not None and message is None:
            self.answer.add(data, int_or_none(self.meta.get("completion_tokens")))
        return message

    def fold(self, event: dict, at_s: float) -> str | None:
        """Fold one decoded event in; returns an error message when the event reports an error."""
        if "error" in event:
            error = event["error"]
            message = error.get("message") if isinstance(error, dict) else None
            return str(message or error)
        meta = event.get("meta_info")
        if not isinstance(meta, dict):
            raise ValueError("event has no meta_info object")
        self.meta = meta
        completion = meta.get("completion_tokens")
        if type(completion) is not int:  # the usual int passes without a call (int_or_none's test, inline)
            completion = int_or_none(completion)
        if completion is not None:
            grew = completion > self.completion_seen
            if grew:
                self.completion_seen = completion
        else:
            # No count reported: fall back to the (cumulative) output itself.
            output = event.get("output_ids") or event.get("text") or ""
            grew = len(output) > self.output_len_seen
            self.output_len_seen = max(len(output), self.output_len_seen)
        if grew:
            self.chunk_s.append(at_s)
            if self.first_token_s is None:
                self.first_token_s = at_s
            if self.first_answer_s is None and completion is not None:
                reasoning = int_or_none(meta.get("reasoning_tokens"))
                if reasoning is not None and completion - reasoning > 0:
                    self.first_answer_s = at_s
        return None

    def finish_reason(self) -> tuple[str | None, str | None]:
        """(type, message) of meta_info.finish_reason, which is a dict, a string, or null."""
        reason = self.meta.get("finish_reason")
        if isinstance(reason, dict):
            kind = reason.get("type")
            return (str(kind) if kind is not None else None), reason.get("message")
        return (str(reason) if reason is not None else None), None

    def end_error(self, saw_done: bool) -> Failure | None:
        finish_type, finish_message = self.finish_reason()
        if finish_type == "abort":
            return RequestStatus.ERROR, ErrorKind.SERVER_ABORT, str(finish_message or "aborted by the server")
        if not saw_done and finish_type is None:
            return (
                RequestStatus.ERROR,
                ErrorKind.INCOMPLETE_STREAM,
                "response ended with neither [DONE] nor a finish_reason",
            )
        return None


async def send(
    request: PreparedRequest,
    session: aiohttp.ClientSession,
    clock: Clock,
    t0_s: float,
    options: SendOptions,
) -> RequestRecord:
    state = _StreamState(keep_answer=request.answer_check is not None)
    outcome = await stream_request(
        session, options.base_url + GENERATE_PATH, build_body(request, options),
        {"Content-Type": "application/json", **options.headers}, clock, t0_s, options.request_timeout_s, state,
        options.exchange,
    )  # fmt: skip
    meta = state.meta
    usage = ReportedUsage(
        int_or_none(meta.get("prompt_tokens")),
        int_or_none(meta.get("completion_tokens")),
        int_or_none(meta.get("cached_tokens")),
        int_or_none(meta.get("reasoning_tokens")),
    )
    times = StreamedTimes(state.first_token_s, state.first_answer_s, tuple(state.chunk_s))
    record = record_from_stream(
        request,
        options,
        outcome,
        times,
        usage,
        state.finish_reason()[0],
        float_or_none(meta.get("e2e_latency")),
        reported_queue_time_s(meta),
        reported_ttft_parts(meta),
    )
    if request.answer_check is None:
        return record
    text = state.answer.text() if state.answer is not None else None
    return with_answer(record, request.answer_check, request.constrained, text)


def reported_queue_time_s(meta: dict) -> float | None:
    """meta_info.queue_time (s) when the server measured it; None when absent or the unset default."""
    queue_time_s = float_or_none(meta.get("queue_time"))
    if queue_time_s == 0.0 and "forward_entry_time" not in meta:
        return None
    return queue_time_s


def reported_ttft_parts(meta: dict) -> ReportedTtftParts:
    """The TTFT's parts the server reported (ms): the twin's every one, SGLang's queue and prefill at most (see the
    module's docstring)."""
    twin = meta.get(TWIN_TTFT_PARTS_KEY)
    if isinstance(twin, dict):
        return ReportedTtftParts(
            prealloc_ms=float_or_none(twin.get("prealloc")),
            bootstrap_ms=float_or_none(twin.get("bootstrap")),
            queue_ms=float_or_none(twin.get("queue")),
            prefill_ms=float_or_none(twin.get("prefill")),
            kv_transfer_ms=float_or_none(twin.get("kv_transfer")),
            decode_wait_ms=float_or_none(twin.get("decode_wait")),
        )
    finished_s = float_or_none(meta.get("prefill_finished_time"))
    entered_s = float_or_none(meta.get("forward_entry_time"))
    if finished_s is None or entered_s is None:
        return NO_TTFT_PARTS  # not prefilled here (a PD decode server), or no timings at all
    queue_s = reported_queue_time_s(meta)
    never_retracted = not int_or_none(meta.get("num_retractions"))
    return ReportedTtftParts(
        queue_ms=queue_s * 1000 if queue_s is not None and never_retracted else None,
        prefill_ms=(finished_s - entered_s) * 1000,
    )
