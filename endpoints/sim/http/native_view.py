"""How native /generate answers look: SSE chunks, the final body, and errors, field for field.

Chunks carry cumulative `text` and `output_ids` (SGLang's default) or deltas under
--incremental-streaming-output; `meta_info` follows tokenizer_manager's shape, with
`e2e_latency` on the final chunk only, with speculative decoding's `spec_*` counts after it (as
tokenizer_manager adds them, final chunk only). Under --enable-metrics every chunk after admission also
carries the scheduler's timings as SGLang merges them (SchedulerReqTimeStats.
convert_to_output_meta_info, python/sglang/srt/observability/req_time_stats.py): `forward_entry_time`
(epoch s), `prefill_finished_time` (epoch s, once the first token is sampled, on a server that prefilled the request:
not a PD decode server) and `queue_time` (s in the waiting queue before the first forward batch: on a PD prefill
server from the end of its bootstrap queue, on a PD decode server from the KV's arrival, as SGLang's stages run).
Those three are all a real SGLang says of where the time to first token went. The twin adds, on the final chunk under
--enable-metrics, `sim_ttft_parts_ms`: the request's TTFT on this server by stage, {part: ms} for the stages it
passed (engine/ttft_parts.py: prealloc, bootstrap, queue, prefill, kv_transfer, decode_wait), which add up to it.
"""

from __future__ import annotations

import orjson
from aiohttp import web

from endpoints.sim.engine.sim_request import SimRequest, TokenUpdate
from endpoints.sim.toy_tokenizer import OutputText

_DATA, _END = b"data: ", b"\n\n"
# A cumulative chunk around its three values, as orjson.dumps writes {"text", "output_ids", "meta_info"}.
_CUMULATIVE_TEXT, _CUMULATIVE_IDS = b'data: {"text":"', b'","output_ids":['
_CUMULATIVE_META, _CUMULATIVE_END = b'],"meta_info":', b"}\n\n"
WEIGHT_VERSION = "default"  # SGLang's --weight-version default, in meta_info and the OpenAI answers' metadata


def json_response(data: object, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")


def status_error_body(message: str, status: int) -> dict:
    """SGLang's HTTPException handler: an ErrorResponse whose type is the status code."""
    return {"object": "error", "message": message, "type": str(status), "param": None, "code": status}


class NativeView:
    __slots__ = (
        "_request", "_text", "_incremental", "_report_reasoning", "_epoch_offset_s", "_sent", "_encoded_tokens",
        "_text_json", "_ids_json",
    )  # fmt: skip

    def __init__(
        self,
        request: SimRequest,
        text: OutputText,
        incremental: bool,
        report_reasoning: bool,
        timing_epoch_offset_s: float | None,
    ) -> None:
        self._request = request
        self._text = text
        self._incremental = incremental
        self._report_reasoning = report_reasoning  # SGLang counts reasoning only when asked and a parser is set
        # --enable-metrics adds the scheduler's timings to meta_info; this is epoch s minus the engine
        # clock's now, to stamp them in epoch seconds as SGLang does (None: metrics off, no timings).
        self._epoch_offset_s = timing_epoch_offset_s
        self._sent = 0
        # Cumulative chunks: the JSON of the text and of the ids of the first _encoded_tokens tokens, without
        # quotes or brackets, grown by each chunk's new tokens instead of re-encoding all of them every chunk.
        self._encoded_tokens = 0
        self._text_json = bytearray()
        self._ids_json = bytearray()

    def meta_info(self, update: TokenUpdate) -> dict:
        meta: dict[str, object] = {
            "id": update.rid,
            "finish_reason": update.finish_reason,
            "prompt_tokens": update.prompt_tokens,
            "completion_tokens": update.output_tokens,
            "cached_tokens": update.cached_tokens,
            "reasoning_tokens": update.reasoning_tokens if self._report_reasoning else 0,
            "weight_version": WEIGHT_VERSION,
            "num_retractions": update.num_retractions,
        }
        if self._epoch_offset_s is not None and update.admitted_s is not None:
            meta["forward_entry_time"] = update.admitted_s + self._epoch_offset_s
            if update.first_token_s is not None and self._request.preallocated_s is None:  # prefilled here
                meta["prefill_finished_time"] = update.first_token_s + self._epoch_offset_s
            entered_s = update.arrival_s if update.wait_queue_entry_s is None else update.wait_queue_entry_s
            meta["queue_time"] = update.admitted_s - entered_s
        if update.finished:
            meta["e2e_latency"] = update.now_s - update.arrival_s
        if update.spec_meta_info:  # a finished request's verify counts under speculative decoding
            meta.update(update.spec_meta_info)
        if self._epoch_offset_s is not None and update.ttft_parts is not None:  # twin-only, final chunk
            # To the microsecond (+ 0.0: no -0.0 from a part that is float noise around nothing).
            meta["sim_ttft_parts_ms"] = {name: round(ms, 3) + 0.0 for name, ms in update.ttft_parts.named().items()}
        return meta

    def body(self, update: TokenUpdate) -> dict:
        n = update.output_tokens
        if self._incremental:
            start, self._sent = self._sent, n
            return {
                "text": self._text.span(start, n),
                "output_ids": self._request.output_ids[start:n],
                "meta_info": self.meta_info(update),
            }
        return {
            "text": self._text.upto(n),
            "output_ids": self._request.output_ids[:n],
            "meta_info": self.meta_info(update),
        }

    def chunk(self, update: TokenUpdate) -> bytes:
        if self._incremental:
            return _DATA + orjson.dumps(self.body(update)) + _END
        # The bytes of _DATA + orjson.dumps(self.body(update)) + _END: orjson escapes a string character by
        # character and writes a list's items comma-separated, so the JSON of a prefix and of the rest, joined, is
        # the JSON of the whole.
        n = update.output_tokens
        start = self._encoded_tokens
        if n < start:  # fewer tokens than the last chunk (not seen from the engine today): encode afresh
            start = 0
            self._text_json, self._ids_json = bytearray(), bytearray()
        if n > start:
            ids = orjson.dumps(self._request.output_ids[start:n])
            self._ids_json += memoryview(ids)[1:-1] if not self._ids_json else b"," + ids[1:-1]
            self._text_json += memoryview(orjson.dumps(self._text.span(start, n)))[1:-1]
        self._encoded_tokens = n
        return b"".join(
            (
                _CUMULATIVE_TEXT, self._text_json, _CUMULATIVE_IDS, self._ids_json, _CUMULATIVE_META,
                orjson.dumps(self.meta_info(update)), _CUMULATIVE_END,
            )
        )  # fmt: skip

    def full_body(self, update: TokenUpdate) -> dict:
        """The non-streaming answer: always the whole output."""
        n = update.output_tokens
        return {
            "text": self._text.upto(n),
            "output_ids": self._request.output_ids[:n],
            "meta_info": self.meta_info(update),
        }

    @staticmethod
    def error_event(message: str, status: int) -> bytes:
        return _DATA + orjson.dumps({"error": {"message": message}}) + _END

    @staticmethod
    def error_response(message: str, status: int) -> web.Response:
        if status == 400:  # a ValueError in SGLang's handler
            return json_response({"error": {"message": message}}, 400)
        return json_response(status_error_body(message, status), status)
