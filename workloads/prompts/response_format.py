"""Response formats: what shape a request asks its answer to have (docs/workloads.md, "Structured output").

A format is one of OpenAI's `response_format` shapes, or costbench's own spelling of SGLang's regex
constraint, and is stored in the canonical workload as canonical JSON (sorted keys, compact):

    {"type":"json_schema","json_schema":{"name":"<name>","schema":{...},"strict":true}}
    {"type":"json_object"}
    {"type":"regex","regex":"<pattern>"}

Every format is checked where it enters (a scenario, a captured log, a canonical file): a JSON Schema
must pass Draft 2020-12's meta-schema (`check_schema`), a regex must compile, so a bad one fails before
t0, never as a stream of failed requests. A scenario gives a deterministic share of its requests a
format (`with_structured_output`): a request is chosen by a hash of its request_id, so the same
requests carry it every week. `constrained` says whether the replay sends the constraint to the server
or only writes the schema into the prompt (`prompt_marker`), as many applications do.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, replace
from enum import Enum

import orjson
import pyarrow as pa
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from workloads.workload import WORKLOAD_SCHEMA, Workload


class FormatKind(str, Enum):
    JSON_SCHEMA = "json_schema"
    JSON_OBJECT = "json_object"
    REGEX = "regex"


# The text a prompt-only request ends with (docs/workloads.md; the twin recognises it in the prompt).
JSON_MARKER = "\n\nAnswer with JSON only, matching this JSON Schema:\n"
REGEX_MARKER = "\n\nAnswer only with text matching this regular expression:\n"
# What SGLang's OpenAI adapters send for json_object (serving_completions / serving_chat).
JSON_OBJECT_SCHEMA = '{"type": "object"}'


def _compact(value: object) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


@dataclass(frozen=True, slots=True)
class ResponseFormat:
    """One checked format. `text` is the canonical JSON the workload stores; the rest is derived from it."""

    kind: FormatKind
    text: str
    schema_json: str | None = None  # json_schema: the schema alone, compact with sorted keys
    pattern: str | None = None  # regex

    @property
    def sglang_json_schema(self) -> str | None:
        """`sampling_params.json_schema` of SGLang's native API (a JSON string), None for a regex."""
        if self.kind is FormatKind.JSON_OBJECT:
            return JSON_OBJECT_SCHEMA
        return self.schema_json

    @property
    def openai_response_format(self) -> str | None:
        """The OpenAI `response_format` value as JSON text, None for a regex (sent as SGLang's `regex`)."""
        return None if self.kind is FormatKind.REGEX else self.text

    def prompt_marker(self) -> str:
        """What a prompt-only request appends to its prompt."""
        if self.kind is FormatKind.REGEX:
            assert self.pattern is not None
            return REGEX_MARKER + self.pattern
        return JSON_MARKER + (self.schema_json or JSON_OBJECT_SCHEMA)


def _json_path(parts: object) -> str:
    path = "$"
    for part in parts:  # type: ignore[attr-defined]
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def check_json_schema(schema: object) -> None:
    """ValueError when `schema` is not valid JSON Schema (Draft 2020-12), naming where in it."""
    if not isinstance(schema, dict | bool):
        raise ValueError(f"a JSON Schema is an object, got {type(schema).__name__}")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise ValueError(f"not valid JSON Schema (Draft 2020-12) at {_json_path(exc.path)}: {exc.message}") from None


def check_regex(pattern: object) -> None:
    if not isinstance(pattern, str) or not pattern:
        raise ValueError(f"regex must be a non-empty string, got {pattern!r}")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"regex {pattern!r} does not compile: {exc}") from None


def parse_response_format(value: object) -> ResponseFormat:
    """`value` (a decoded response_format) checked and made canonical; ValueError naming what is wrong."""
    if not isinstance(value, dict):
        raise ValueError(f"response_format must be an object, got {type(value).__name__}")
    kind_text = value.get("type")
    try:
        kind = FormatKind(kind_text)
    except ValueError:
        known = ", ".join(k.value for k in FormatKind)
        raise ValueError(f"response_format.type must be one of {known}, got {kind_text!r}") from None
    allowed = {"type", kind.value} if kind is not FormatKind.JSON_OBJECT else {"type"}
    extra = sorted(set(value) - allowed)
    if extra:
        raise ValueError(f"response_format of type {kind.value} has unknown key(s) {', '.join(extra)}")
    if kind is FormatKind.JSON_OBJECT:
        return ResponseFormat(kind, _compact({"type": "json_object"}))
    if kind is FormatKind.REGEX:
        pattern = value.get("regex")
        check_regex(pattern)
        assert isinstance(pattern, str)
        return ResponseFormat(kind, _compact({"type": "regex", "regex": pattern}), pattern=pattern)
    spec = value.get("json_schema")
    if not isinstance(spec, dict):
        raise ValueError("response_format.json_schema must be an object with name and schema")
    extra = sorted(set(spec) - {"name", "schema", "strict", "description"})
    if extra:
        raise ValueError(f"response_format.json_schema has unknown key(s) {', '.join(extra)}")
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"response_format.json_schema.name must be a non-empty string, got {name!r}")
    if "schema" not in spec:
        raise ValueError("response_format.json_schema.schema is required")
    if "strict" in spec and not isinstance(spec["strict"], bool):
        raise ValueError(f"response_format.json_schema.strict must be true or false, got {spec['strict']!r}")
    check_json_schema(spec["schema"])
    return ResponseFormat(
        kind, _compact({"type": "json_schema", "json_schema": spec}), schema_json=_compact(spec["schema"])
    )


def load_response_format(text: str) -> ResponseFormat:
    """A stored format (the workload column) back; ValueError when the text is not a valid format."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"response_format is not JSON: {exc}") from None
    return parse_response_format(value)


def json_schema_format(name: str, schema: object) -> ResponseFormat:
    """The strict json_schema format of a schema file's contents."""
    return parse_response_format(
        {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}
    )


@dataclass(frozen=True, slots=True)
class StructuredOutput:
    """A scenario's `structured_output`: which share of its requests asks for which format, and how."""

    share: float  # 0 < share <= 1 of the requests that had no format of their own
    response_format: ResponseFormat
    constrain: bool  # True: the constraint goes to the server; False: only into the prompt (prompt_marker)
    min_valid_rate: float | None = None  # the warehouse's check fails the week below this valid-answer rate


def chosen(request_id: str, share: float) -> bool:
    """Whether `request_id` falls in `share`: sha256 of the id as a number in [0, 1), stable everywhere."""
    point = int.from_bytes(hashlib.sha256(request_id.encode()).digest()[:8], "big") / 2**64
    return point < share


def with_structured_output(workload: Workload, structured: StructuredOutput | None) -> Workload:
    """`workload` with the scenario's format on its chosen share of requests. A request that already has
    a format (a captured one) keeps it; the others are chosen by `chosen(request_id, share)`."""
    if structured is None:
        return workload
    if not (0 < structured.share <= 1 and math.isfinite(structured.share)):
        raise ValueError(f"structured_output.share must be in (0, 1], got {structured.share!r}")
    table = workload.table
    formats = table.column("response_format").to_pylist()
    constrained = table.column("constrained").to_pylist()
    for row, request_id in enumerate(table.column("request_id").to_pylist()):
        if formats[row] is None and chosen(request_id, structured.share):
            formats[row] = structured.response_format.text
            constrained[row] = structured.constrain
    for name, values, kind in (("response_format", formats, pa.string()), ("constrained", constrained, pa.bool_())):
        at = WORKLOAD_SCHEMA.get_field_index(name)
        table = table.set_column(at, WORKLOAD_SCHEMA.field(name), pa.array(values, kind))
    mode = "constrained" if structured.constrain else "prompt-only"
    suffix = f"+{structured.response_format.kind.value}{structured.share:g}-{mode}"
    return replace(workload, name=f"{workload.name}{suffix}", table=table)
