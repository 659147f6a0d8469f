"""Whether an answer has the format its request asked for (docs/replay.md, "Structured output").

The answer is the text after reasoning: what `reasoning_content` separation leaves in `content` (chat
under --reasoning-parser), else the text after the first `</think>` where the reasoning is inline
(native /generate, completions), else the whole text; surrounding whitespace is not part of it.
json_schema: the answer parses as JSON and validates against the schema (jsonschema's Draft 2020-12
validator); json_object: it parses to a JSON object; regex: the pattern matches the whole answer.
The record keeps whether it did and the first error (`answer_valid`, `answer_error`).

Each format's validator is compiled once per run, before t0 (`compile_checks`), and shared by every
request with that format; checking an answer happens after its stream ended, off the timing path.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass

import orjson
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from replay.recording.error_kinds import stored_message
from replay.recording.records import RequestRecord, RequestStatus
from workloads.prompts.response_format import FormatKind, ResponseFormat, load_response_format

THINK_END = "</think>"


def answer_text(text: str) -> str:
    """The answer part of an output: after the first `</think>` when reasoning is inline, stripped."""
    at = text.find(THINK_END)
    return (text[at + len(THINK_END) :] if at >= 0 else text).strip()


def _json_path(parts: Iterable[object]) -> str:
    path = "$"
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


@dataclass(frozen=True, slots=True, eq=False)
class AnswerCheck:
    """One format with its compiled check."""

    response_format: ResponseFormat
    validator: Draft202012Validator | None = None  # json_schema
    pattern: re.Pattern[str] | None = None  # regex

    @classmethod
    def of(cls, response_format: ResponseFormat) -> AnswerCheck:
        if response_format.kind is FormatKind.JSON_SCHEMA:
            assert response_format.schema_json is not None
            return cls(response_format, validator=Draft202012Validator(orjson.loads(response_format.schema_json)))
        if response_format.kind is FormatKind.REGEX:
            assert response_format.pattern is not None
            return cls(response_format, pattern=re.compile(response_format.pattern))
        return cls(response_format)

    def first_error(self, answer: str) -> str | None:
        """None when `answer` (already the text after reasoning) has the format, else the first problem."""
        if self.pattern is not None:
            if self.pattern.fullmatch(answer) is None:
                return f"the answer does not match the regex (answer starts {answer[:40]!r})"
            return None
        try:
            document = orjson.loads(answer)
        except orjson.JSONDecodeError as exc:
            return f"not JSON: {exc}" if answer else "not JSON: the answer is empty"
        if self.validator is None:  # json_object
            return None if isinstance(document, dict) else f"not a JSON object: a {type(document).__name__}"
        error = best_match(self.validator.iter_errors(document))
        return None if error is None else f"{_json_path(error.absolute_path)}: {error.message}"


def compile_checks(texts: Iterable[str | None]) -> dict[str, AnswerCheck]:
    """One AnswerCheck per distinct stored format text; ValueError for a text that is not a valid format."""
    checks: dict[str, AnswerCheck] = {}
    for text in texts:
        if text is not None and text not in checks:
            checks[text] = AnswerCheck.of(load_response_format(text))
    return checks


def with_answer(record: RequestRecord, check: AnswerCheck, constrained: bool, output_text: str | None) -> RequestRecord:
    """`record` with its format facts, and with the verdict on `output_text` when the request completed."""
    valid: bool | None = None
    error: str | None = None
    if record.status is RequestStatus.OK and output_text is not None:
        error = check.first_error(answer_text(output_text))
        valid = error is None
    return dataclasses.replace(
        record,
        response_format_type=check.response_format.kind.value,
        constrained=constrained,
        answer_valid=valid,
        answer_error=stored_message(error) if error else None,
    )
