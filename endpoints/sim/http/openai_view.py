"""How /v1/chat/completions and /v1/completions answer, field for field (SGLang's serving_chat,
serving_completions and usage_processor).

Streams: the first chat chunk carries `delta.role`; text arrives as deltas (reasoning in
`delta.reasoning_content` under --reasoning-parser deepseek-r1); a last chunk with an empty delta
carries `finish_reason` and `matched_stop`; with `stream_options.include_usage` a usage-only
chunk (`choices: []`) follows; then `data: [DONE]`. Chat chunks take build_sse_content's shape (the
delta always has `reasoning_content`, `role` and `content` only when set; `usage` only when sent),
completion chunks CompletionStreamResponse's. Usage has `prompt_tokens_details.cached_tokens` whenever
--enable-cache-report is on (0 included, as SGLang 0.5.23's UsageProcessor writes it; older builds
dropped a zero), a top-level `reasoning_tokens`, and `completion_tokens_details.reasoning_tokens` when
there were any. Whole answers carry `metadata.weight_version`. `make conformance` checks all of it.
"""

from __future__ import annotations

import time
from enum import Enum
from http import HTTPStatus

import orjson
from aiohttp import web

from endpoints.sim.engine.sim_request import SimRequest, TokenUpdate
from endpoints.sim.http.native_view import WEIGHT_VERSION, json_response
from endpoints.sim.http.openai_request import OpenAIRequest
from endpoints.sim.toy_tokenizer import OutputText

_DATA, _END = b"data: ", b"\n\n"


class Route(str, Enum):
    CHAT = "chat.completion"
    COMPLETION = "text_completion"


def error_body(message: str, status: int, error_type: str | None = None) -> dict:
    """SGLang's ErrorResponse. Its type: "BadRequestError" for a request it refuses (create_error_response),
    the status code as text for the HTTPException a failed request raises (http_server's handler)."""
    if error_type is None:
        error_type = "BadRequestError" if status == 400 else str(status)
    return {"object": "error", "message": message, "type": error_type, "param": None, "code": status}


def _finish(update: TokenUpdate) -> tuple[str | None, object]:
    reason = update.finish_reason
    if reason is None:
        return None, None
    return reason["type"], reason.get("matched")


class OpenAIView:
    __slots__ = (
        "_route", "_request", "_ask", "_text", "_reasoning_end", "_content_start", "_split", "_cache_report",
        "_created", "_sent", "_first", "_chunk_head",
    )  # fmt: skip

    def __init__(
        self,
        route: Route,
        request: SimRequest,
        ask: OpenAIRequest,
        text: OutputText,
        reasoning_parser: bool,
        cache_report: bool,
    ) -> None:
        self._route = route
        self._request = request
        self._ask = ask
        self._text = text
        thinking, length = request.reasoning_target, request.target_tokens
        # Reasoning text is the output before `</think>`; the answer starts after it.
        self._reasoning_end = thinking - 1 if 0 < thinking < length else thinking
        self._content_start = thinking
        self._split = reasoning_parser and route is Route.CHAT and ask.separate_reasoning
        self._cache_report = cache_report
        self._created = int(time.time())
        self._sent = 0
        self._first = True
        self._chunk_head: bytes | None = None  # a stream chunk's bytes up to its choices, the same in every chunk

    # -- pieces -----------------------------------------------------------------------------------

    def usage(self, update: TokenUpdate) -> dict:
        """UsageInfo as SGLang's UsageProcessor writes it: cached tokens whenever --enable-cache-report is on
        (0 included), reasoning tokens at the top level and, when any, under completion_tokens_details."""
        reasoning = update.reasoning_tokens if self._split else 0
        return {
            "prompt_tokens": update.prompt_tokens,
            "total_tokens": update.prompt_tokens + update.output_tokens,
            "completion_tokens": update.output_tokens,
            "prompt_tokens_details": {"cached_tokens": update.cached_tokens} if self._cache_report else None,
            "reasoning_tokens": reasoning,
            "completion_tokens_details": {"reasoning_tokens": reasoning} if reasoning else None,
        }

    def _pieces(self, start: int, end: int) -> tuple[str | None, str]:
        """(reasoning text, content text) of output tokens [start, end)."""
        if not self._split:
            return None, self._text.span(start, end)
        r_end, c_start = self._reasoning_end, self._content_start
        reasoning = self._text.span(min(start, r_end), min(end, r_end)) if start < r_end else None
        content = self._text.span(max(start, c_start), end) if end > c_start else ""
        return reasoning, content

    def _chunk(self, choices: list, usage: dict | None) -> bytes:
        """A completion chunk as CompletionStreamResponse dumps it (usage null when absent); a chat chunk as
        build_sse_content writes it (usage only when present)."""
        head = self._chunk_head
        if head is None:
            # orjson writes an object's members in order, each `"key":` + its value's JSON: so the dump of the
            # members before `choices`, without its closing brace, starts every chunk of this request.
            fields = {
                "id": self._request.rid,
                "object": self._route.value + ("" if self._route is Route.COMPLETION else ".chunk"),
                "created": self._created,
                "model": self._ask.model,
            }
            head = self._chunk_head = _DATA + orjson.dumps(fields)[:-1] + b',"choices":'
        if usage is not None or self._route is Route.COMPLETION:
            return b"".join((head, orjson.dumps(choices), b',"usage":', orjson.dumps(usage), b"}", _END))
        return b"".join((head, orjson.dumps(choices), b"}", _END))

    def _usage_chunk(self, update: TokenUpdate) -> bytes:
        """The last chunk under include_usage: ChatCompletionStreamResponse's dump for chat (usage with its
        nulls), CompletionStreamResponse's without nulls (exclude_none) for completions."""
        usage = self.usage(update)
        if self._route is Route.COMPLETION:
            usage = {k: v for k, v in usage.items() if v is not None}
            body = {"id": self._request.rid, "object": self._route.value, "created": self._created,
                    "model": self._ask.model, "choices": [], "usage": usage}  # fmt: skip
        else:
            body = {"id": self._request.rid, "object": self._route.value + ".chunk", "created": self._created,
                    "model": self._ask.model, "choices": [], "usage": usage}  # fmt: skip
        return _DATA + orjson.dumps(body) + _END

    # -- streams ----------------------------------------------------------------------------------

    def chunk(self, update: TokenUpdate) -> bytes:
        """Every event one engine update turns into (several at a reasoning boundary or the end)."""
        start, end = self._sent, update.output_tokens
        self._sent = end
        reasoning, content = self._pieces(start, end)
        usage = self.usage(update) if self._ask.continuous_usage else None
        reason, matched = _finish(update)
        out = []
        if self._route is Route.COMPLETION:
            choice = {"index": 0, "text": content, "logprobs": None, "finish_reason": reason, "matched_stop": matched}
            out.append(self._chunk([choice], usage))
        else:
            if self._first:
                self._first = False
                out.append(self._chunk([self._delta({"role": "assistant", "content": ""})], usage))
            if reasoning:
                out.append(self._chunk([self._delta({"reasoning_content": reasoning})], usage))
            if content:
                out.append(self._chunk([self._delta({"content": content})], usage))
            if reason is not None:
                out.append(self._chunk([self._delta({}, reason, matched)], usage))
        if reason is not None and self._ask.include_usage:
            out.append(self._usage_chunk(update))
        return b"".join(out)

    @staticmethod
    def _delta(fields: dict, reason: str | None = None, matched: object = None) -> dict:
        """SGLang's StreamDelta: reasoning_content always (null or text), role and content only when set."""
        delta = {"reasoning_content": None, **fields}
        return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason, "matched_stop": matched}

    # -- whole answers ----------------------------------------------------------------------------

    def full_body(self, update: TokenUpdate) -> dict:
        reasoning, content = self._pieces(0, update.output_tokens)
        reason, matched = _finish(update)
        if self._route is Route.COMPLETION:
            choice = {"index": 0, "text": content, "logprobs": None, "finish_reason": reason, "matched_stop": matched}
        else:
            message = {"role": "assistant", "content": content, "reasoning_content": reasoning}
            choice = {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": reason,
                "matched_stop": matched,
            }
        return {
            "id": self._request.rid,
            "object": self._route.value,
            "created": self._created,
            "model": self._ask.model,
            "choices": [choice],
            "usage": self.usage(update),
            "metadata": {"weight_version": WEIGHT_VERSION},  # build_endpoint_weight_version_metadata
        }

    @staticmethod
    def error_event(message: str, status: int) -> bytes:
        """create_streaming_error_response for an abort with a status code: the type is the status's name."""
        return _DATA + orjson.dumps({"error": error_body(message, status, HTTPStatus(status).name)}) + _END

    @staticmethod
    def error_response(message: str, status: int) -> web.Response:
        return json_response(error_body(message, status), status)
