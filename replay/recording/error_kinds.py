"""The vocabulary of `RequestRecord.error_kind`: every way a replayed request can fail, as data.

Shared by all backend clients so a failure means the same thing whichever API was replayed.
"""

from __future__ import annotations

from enum import Enum

ERROR_MESSAGE_MAX_CHARS = 2000  # enough for a server's error body; a record must stay small


class ErrorKind(str, Enum):
    HTTP_STATUS = "http_status"  # the server answered with a non-2xx status (message: status and body)
    STREAM_ERROR = "stream_error"  # a `{"error": ...}` event in the middle of the stream
    SERVER_ABORT = "server_abort"  # the request finished with finish_reason type "abort"
    CONNECTION = "connection"  # could not connect, or the connection dropped mid-response
    INCOMPLETE_STREAM = "incomplete_stream"  # the body ended with neither [DONE] nor a finish_reason
    BAD_PAYLOAD = "bad_payload"  # an event that is not the JSON the protocol promises
    TIMEOUT = "timeout"  # the per-request timeout expired


def clip_message(text: str) -> str:
    return text if len(text) <= ERROR_MESSAGE_MAX_CHARS else text[:ERROR_MESSAGE_MAX_CHARS] + "…"
