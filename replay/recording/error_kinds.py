"""The vocabulary of `RequestRecord.error_kind`: every way a replayed request can fail, as data.

Shared by all backend clients so a failure means the same thing whichever API was replayed. A failure's
text is stored through `stored_message`: redacted (redaction/secret_redaction.py), then clipped.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum

from redaction.secret_redaction import redact_clipped

ERROR_MESSAGE_MAX_CHARS = 2000  # enough for a server's error body; a record must stay small


class ErrorKind(str, Enum):
    HTTP_STATUS = "http_status"  # the server answered with a non-2xx status (message: status and body)
    STREAM_ERROR = "stream_error"  # a `{"error": ...}` event in the middle of the stream
    SERVER_ABORT = "server_abort"  # the request finished with finish_reason type "abort"
    CONNECTION = "connection"  # could not connect, or the connection dropped mid-response
    INCOMPLETE_STREAM = "incomplete_stream"  # the body ended with neither [DONE] nor a finish_reason
    BAD_PAYLOAD = "bad_payload"  # an event that is not the JSON the protocol promises
    TIMEOUT = "timeout"  # the per-request timeout expired
    RESPONSE_TOO_LARGE = "response_too_large"  # an event-stream line or event past its bound (sse_reader.py)


def stored_message(text: str, secrets: Iterable[str] = ()) -> str:
    """A failure's text as a record keeps it: the known `secrets` (the run's API key, which a server may echo
    in a 401 body) and every secret by shape or name redacted, clipped to ERROR_MESSAGE_MAX_CHARS."""
    return redact_clipped(text, ERROR_MESSAGE_MAX_CHARS, secrets)
