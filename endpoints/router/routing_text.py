"""The text smg routes on, read from a request body as smg reads it (`extract_text_for_routing`, smg's
crates/protocols: generate.rs, chat.rs, completion.rs).

Over HTTP smg never tokenizes to route: /generate gives `text`, else its `input_ids` as decimal numbers
joined by spaces; /v1/completions its `prompt` (a list joined by spaces); /v1/chat/completions every
message's text content joined by single spaces, in order, with no chat template (an assistant's
`reasoning_content` follows its content). The prefix trees and hashes run over these characters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

_TEXT_ROLES = ("system", "user", "tool", "developer")


def routing_text(path: str, body: Mapping[str, Any]) -> str:
    """The routing text of one request to `path` (/generate, /v1/completions, /v1/chat/completions)."""
    if path == "/generate":
        return _generate_text(body)
    if path == "/v1/completions":
        prompt = body.get("prompt")
        if isinstance(prompt, list):
            return " ".join(str(p) for p in prompt)
        return prompt if isinstance(prompt, str) else ""
    if path == "/v1/chat/completions":
        return _chat_text(body.get("messages"))
    return ""


def _generate_text(body: Mapping[str, Any]) -> str:
    text = body.get("text")
    if isinstance(text, str):
        return text
    ids = body.get("input_ids")
    if isinstance(ids, list):
        flat = [i for batch in ids for i in batch] if ids and isinstance(ids[0], list) else ids
        return _decimal_words(flat)
    return ""


def _decimal_words(values: list) -> str:
    """`" ".join(map(str, values))`, for a list of ints (a prompt's thousands of token ids) written by orjson: its
    integers are str's decimal digits, and anything else in the list (a float, a bool, a string, null) writes some
    other character, which sends it the slow way."""
    try:
        written = orjson.dumps(values)[1:-1]
    except orjson.JSONEncodeError:  # an int beyond 64 bits, an object orjson does not write
        return " ".join(map(str, values))
    if written.translate(None, b"0123456789,-"):
        return " ".join(map(str, values))
    return written.replace(b",", b" ").decode()


def _content_text(content: Any) -> str:
    """A message's text: a string, or its text parts joined by spaces (images and the rest skipped)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return " ".join(p for p in parts if p)
    return ""


def _chat_text(messages: Any) -> str:
    pieces: list[str] = []
    for message in messages if isinstance(messages, list) else ():
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role in _TEXT_ROLES or role == "assistant":
            pieces.append(_content_text(message.get("content")))
        if role == "assistant" and isinstance(message.get("reasoning_content"), str):
            pieces.append(message["reasoning_content"])
        if role == "function" and isinstance(message.get("content"), str):
            pieces.append(message["content"])
    return " ".join(p for p in pieces if p)
