"""Strict JSON: a key written twice in one object is an error, never a silent "the last one wins".

orjson (like most decoders) keeps the last of two equal keys, so `{"input_length": 600, "input_length": 6}`
would quietly read as 6. Readers decode with orjson first (its error messages name the column) and then
ask `duplicate_key_reason` about the text. That second pass runs the standard library's C decoder with a
hook that only compares each object's keys and builds nothing, so it costs about one more decode; a flat
object whose bytes already prove its keys distinct (`surely_unique_keys`) skips it.
"""

from __future__ import annotations

import json

# Deeper than this, the standard library's decoder runs out of C stack before orjson's limit (1024).
MAX_DEPTH_REASON = "JSON nested too deeply to check its keys"


class DuplicateKeyError(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(f"duplicate key {key!r} in a JSON object")
        self.key = key


def _refuse_duplicates(pairs: list[tuple[str, object]]) -> None:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise DuplicateKeyError(key)
        seen.add(key)


_CHECKER = json.JSONDecoder(object_pairs_hook=_refuse_duplicates)


def surely_unique_keys(text: bytes, decoded: object) -> bool:
    """True when `text`, which decoded to `decoded`, cannot hold a duplicate key, by counting bytes: with a
    single `{` there is one object, every key written in it is followed by its own `:`, and if there are
    only as many `:` as it has distinct keys, no key was written twice. False means "check it"."""
    return isinstance(decoded, dict) and text.count(b"{") == 1 and text.count(b":") == len(decoded)


def duplicate_key_reason(text: str | bytes) -> str | None:
    """Why `text` (one JSON value that orjson accepted) is ambiguous: a duplicate key; None when it is not."""
    try:
        _CHECKER.decode(text.decode("utf-8") if isinstance(text, bytes) else text)
    except DuplicateKeyError as exc:
        return str(exc)
    except RecursionError:
        return MAX_DEPTH_REASON
    return None


def first_ambiguous_element(text: str) -> tuple[int, int, str] | None:
    """(index, character offset where it starts, reason) of the first element of the JSON array `text`
    (valid JSON) holding a duplicate key, or None. For the error path of a whole-document reader."""
    position = _skip_space(text, 0)
    if not text.startswith("[", position):
        return None
    position = _skip_space(text, position + 1)
    index = 0
    while position < len(text) and text[position] != "]":
        try:
            _, end = _CHECKER.raw_decode(text, position)
        except DuplicateKeyError as exc:
            return index, position, str(exc)
        except RecursionError:
            return index, position, MAX_DEPTH_REASON
        position = _skip_space(text, end)
        if text.startswith(",", position):
            position = _skip_space(text, position + 1)
        index += 1
    return None


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position] in " \t\r\n":
        position += 1
    return position
