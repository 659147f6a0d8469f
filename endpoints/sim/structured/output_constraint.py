"""Which output constraint a request carries, read from its body the way SGLang 0.5.23 reads it.

Native /generate: `sampling_params.json_schema` (a JSON Schema as a *string*), `.regex`, `.ebnf`.
/v1/chat/completions: `response_format` (`json_schema` with `json_schema.schema`; `json_object`, which SGLang
turns into the schema `{"type": "object"}`; `text`: none) and SGLang's extra top-level `regex` / `ebnf`.
/v1/completions: the same plus a top-level `json_schema` string (a `response_format` overrides it, as in
SGLang's serving_completions). More than one at once is refused with SamplingParams.verify's message. An
empty string means unset, as SGLang normalizes it.

Without a constraint, a prompt whose text ends with costbench's prompt-only marker and a schema (what the
replay appends for a scenario with `constrain: false`) gives a PromptSchema: the model read the schema in
its prompt, and nothing enforces it (grammar.py decides how often it is followed).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum

import orjson

from endpoints.sim.bad_request import BadRequest

MULTIPLE_CONSTRAINTS = "Only one of json_schema, regex, ebnf, or structural_tag can be set."
JSON_OBJECT_SCHEMA = '{"type": "object"}'  # what SGLang sends for response_format json_object
# The replay's prompt-only suffix (the issue-15 contract): the schema (compact JSON) or pattern follows it.
PROMPT_SCHEMA_MARKER = "\n\nAnswer with JSON only, matching this JSON Schema:\n"
PROMPT_REGEX_MARKER = "\n\nAnswer only with text matching this regular expression:\n"


class ConstraintKind(str, Enum):
    JSON_SCHEMA = "json"  # SGLang's grammar key names, used in its "Failed to compile ..." messages
    REGEX = "regex"
    EBNF = "ebnf"


@dataclass(frozen=True, slots=True)
class OutputConstraint:
    """A constraint as SGLang's grammar backend keys it: the kind and the text exactly as sent."""

    kind: ConstraintKind
    text: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.kind.value, self.text)


@dataclass(frozen=True, slots=True)
class PromptSchema:
    """A schema or pattern the prompt asks for, with no constraint sent (the answer may not follow it)."""

    constraint: OutputConstraint


def _string(value: object, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        # SGLang's contract gate (native) and pydantic (OpenAI) refuse a non-string with a 400.
        raise BadRequest(f"{field}: invalid type: {type(value).__name__}, expected a string")
    return value or None  # SGLang: an empty constraint means unset


def _one(found: list[OutputConstraint]) -> OutputConstraint | None:
    if len(found) > 1:
        raise BadRequest(MULTIPLE_CONSTRAINTS)
    return found[0] if found else None


def _collect(values: dict[ConstraintKind, str | None]) -> list[OutputConstraint]:
    return [OutputConstraint(kind, text) for kind, text in values.items() if text is not None]


def from_sampling_params(params: dict) -> OutputConstraint | None:
    """Native /generate's sampling_params."""
    if params.get("structural_tag") is not None:
        raise BadRequest("sampling_params.structural_tag is not supported by the twin")
    return _one(
        _collect(
            {
                ConstraintKind.JSON_SCHEMA: _string(params.get("json_schema"), "sampling_params.json_schema"),
                ConstraintKind.REGEX: _string(params.get("regex"), "sampling_params.regex"),
                ConstraintKind.EBNF: _string(params.get("ebnf"), "sampling_params.ebnf"),
            }
        )
    )


def _response_format_schema(body: dict) -> str | None:
    """The json_schema string SGLang derives from `response_format` (None: no constraint from it)."""
    response_format = body.get("response_format")
    if response_format is None:
        return None
    if not isinstance(response_format, dict):
        raise BadRequest("response_format must be a JSON object")
    kind = response_format.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return JSON_OBJECT_SCHEMA
    if kind == "structural_tag":
        raise BadRequest("response_format structural_tag is not supported by the twin")
    if kind != "json_schema":
        raise BadRequest(
            f"response_format.type must be one of 'text', 'json_object', 'json_schema', got {kind!r} "
            "(a regex goes in the top-level `regex` field)"
        )
    spec = response_format.get("json_schema")
    if spec is None and isinstance(response_format.get("schema"), dict):
        spec = {"schema": response_format["schema"]}  # SGLang's chat validator accepts a bare `schema` too
    if not isinstance(spec, dict):
        raise BadRequest("response_format.json_schema must be an object with a `schema`")
    if "name" not in spec and isinstance(response_format.get("schema"), dict):
        spec = {**spec, "name": "Schema"}  # SGLang names a bare schema after its title, or "Schema"
    if not isinstance(spec.get("name"), str):
        raise BadRequest("response_format.json_schema.name is required and must be a string")
    if spec.get("strict") is not None and not isinstance(spec["strict"], bool):
        raise BadRequest("response_format.json_schema.strict must be true or false")  # SGLang's StrictBool
    schema = spec.get("schema")
    if schema is None:
        raise BadRequest("schema_ is required for json_schema response format request.")
    if not isinstance(schema, dict):
        raise BadRequest("response_format.json_schema.schema must be a JSON object")  # pydantic's Dict
    # SGLang serializes the schema with json.dumps's defaults (", " and ": "): the grammar cache's key.
    return json.dumps(schema)


def from_openai_body(body: dict, completions: bool) -> OutputConstraint | None:
    """Chat or completions body: response_format plus SGLang's extra fields (completions also `json_schema`)."""
    json_schema = _string(body.get("json_schema"), "json_schema") if completions else None
    derived = _response_format_schema(body)
    if derived is not None:
        json_schema = derived  # serving_completions lets response_format override the field
    return _one(
        _collect(
            {
                ConstraintKind.JSON_SCHEMA: json_schema,
                ConstraintKind.REGEX: _string(body.get("regex"), "regex"),
                ConstraintKind.EBNF: _string(body.get("ebnf"), "ebnf"),
            }
        )
    )


def prompt_schema(text: str | None) -> PromptSchema | None:
    """The schema (or pattern) at the end of a prompt, after the replay's prompt-only marker."""
    if not text:
        return None
    markers = ((PROMPT_SCHEMA_MARKER, ConstraintKind.JSON_SCHEMA), (PROMPT_REGEX_MARKER, ConstraintKind.REGEX))
    for marker, kind in markers:
        at = text.rfind(marker)
        if at < 0:
            continue
        tail = text[at + len(marker) :]
        if kind is ConstraintKind.JSON_SCHEMA:
            try:
                orjson.loads(tail)
            except orjson.JSONDecodeError:
                return None  # the marker, but no schema after it: an ordinary prompt
        return PromptSchema(OutputConstraint(kind, tail)) if tail else None
    return None
