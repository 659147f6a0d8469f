"""The smallest answer a constraint admits, with the places it can grow: what the twin's model "writes".

A Skeleton is text parts and padding slots. `json_schema_skeleton` walks a JSON Schema (object properties
and required, type, enum, const, array items/prefixItems with minItems/maxItems, string minLength/maxLength,
a simple pattern, format, number ranges, anyOf/oneOf, $ref within the document) to its smallest conforming
value: required properties only, the first anyOf branch that validates, the bound nearest zero. Whitespace
may grow inside every object and array (SGLang's xgrammar allows any whitespace there by default), and a
plain string (no enum, const, pattern or format) may grow up to its maxLength. `regex_skeleton` walks a
simple regex (literals, classes, `.`, groups, alternation, repeats) to its shortest match; a repeat below
its maximum can grow. Anything else raises Unsupported: the twin refuses a request it cannot answer
correctly rather than send a wrong answer. Every skeleton is checked once (jsonschema, re.fullmatch).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from re import _parser as sre_parse  # type: ignore[attr-defined]  # the stdlib's regex parser

import orjson
from jsonschema import validators

MAX_DEPTH = 32  # deeper than any real answer schema; stops a schema that requires itself
PAD_WORDS = "lorem ipsum dolor sit amet "  # what a padded string says (ASCII: one char is one byte)
STRING_FORMATS = {  # a fixed value for each string format xgrammar implements
    "date": "2024-01-01", "date-time": "2024-01-01T00:00:00Z", "time": "00:00:00Z", "duration": "P1D",
    "email": "a@example.com", "hostname": "example.com", "ipv4": "127.0.0.1", "ipv6": "::1",
    "uri": "https://example.com", "uri-reference": "/", "uri-template": "/", "json-pointer": "",
    "relative-json-pointer": "0", "uuid": "00000000-0000-0000-0000-000000000000",
}  # fmt: skip


class Unsupported(ValueError):
    """The twin cannot write an answer that conforms (a limit of the twin, not of SGLang)."""


@dataclass(frozen=True, slots=True)
class Slot:
    """Where padding may go: `fill` repeated (whitespace, string words, a regex repeat's unit), at most
    `room` characters (None: unbounded); `whole`: only whole repeats of `fill` (a regex repeat)."""

    fill: str
    room: int | None
    whole: bool = False


Part = str | Slot


@dataclass(frozen=True, slots=True)
class Skeleton:
    parts: tuple[Part, ...]

    @property
    def text(self) -> str:
        return "".join(p for p in self.parts if isinstance(p, str))

    @property
    def growable(self) -> bool:
        return any(isinstance(p, Slot) for p in self.parts)

    def padded(self, extra_chars: int) -> str:
        """The answer with `extra_chars` more characters where the slots allow (a regex repeat grows by
        whole units, so by up to one unit more), the first slots filled first."""
        out: list[str] = []
        left = max(extra_chars, 0)
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
                continue
            take = left if part.room is None else min(left, part.room)
            if take <= 0:
                continue
            reps = -(-take // len(part.fill))
            if part.whole:
                if part.room is not None:
                    reps = min(reps, part.room // len(part.fill))
                grown = part.fill * reps
            else:
                grown = (part.fill * reps)[:take]
            out.append(grown)
            left -= len(grown)
        return "".join(out)


# -- JSON Schema ---------------------------------------------------------------------------------


class _SchemaWalker:
    def __init__(self, root: object) -> None:
        self.root = root
        self.validator_class = validators.validator_for(root if isinstance(root, dict) else {})

    def valid(self, schema: object, value: object) -> bool:
        return self.validator_class(schema).is_valid(value) if isinstance(schema, (dict, bool)) else False

    def resolve(self, ref: str) -> object:
        if not ref.startswith("#"):
            raise Unsupported(f"$ref {ref!r} points outside the schema")
        node = self.root
        for token in [t for t in ref[1:].split("/") if t]:
            token = token.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                raise Unsupported(f"$ref {ref!r} does not resolve within the schema")
        return node

    def value(self, schema: object, depth: int, where: str) -> list[Part]:
        if depth > MAX_DEPTH:
            raise Unsupported(f"{where}: nested deeper than {MAX_DEPTH} levels (a schema that requires itself?)")
        if schema is True or schema == {}:
            return ["null"]
        if schema is False:
            raise Unsupported(f"{where}: the schema `false` admits no value")
        if not isinstance(schema, dict):
            raise Unsupported(f"{where}: a schema must be an object or a boolean")
        if "$ref" in schema:
            siblings = set(schema) - {"$ref", "$defs", "definitions", "$schema", "$id", "title", "description"}
            if siblings:
                raise Unsupported(f"{where}: $ref next to {sorted(siblings)} is not supported by the twin")
            return self.value(self.resolve(schema["$ref"]), depth + 1, where)
        if "const" in schema:
            return [_dump(schema["const"])]
        if "enum" in schema:
            values = schema["enum"]
            if not isinstance(values, list) or not values:
                raise Unsupported(f"{where}: enum must be a non-empty list")
            return [_dump(values[0])]
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return self.branch(schema, key, depth, where)
        if "allOf" in schema:
            raise Unsupported(f"{where}: allOf is not supported by the twin")
        kind = schema.get("type")
        if isinstance(kind, list):
            if not kind:
                raise Unsupported(f"{where}: type is an empty list")
            kind = kind[0]
        if kind is None:
            if "properties" in schema or "required" in schema:
                kind = "object"
            elif "items" in schema or "prefixItems" in schema:
                kind = "array"
        if kind is None:
            return ["null"]
        if kind == "object":
            return self.object(schema, depth, where)
        if kind == "array":
            return self.array(schema, depth, where)
        if kind == "string":
            return self.string(schema, where)
        if kind in ("integer", "number"):
            return [self.number(schema, kind == "integer", where)]
        if kind == "boolean":
            return ["false"]
        if kind == "null":
            return ["null"]
        raise Unsupported(f"{where}: unknown type {kind!r}")

    def branch(self, schema: dict, key: str, depth: int, where: str) -> list[Part]:
        options = schema[key]
        if not isinstance(options, list) or not options:
            raise Unsupported(f"{where}: {key} must be a non-empty list")
        rest = {k: v for k, v in schema.items() if k != key}
        reasons = []
        for i, option in enumerate(options):
            merged = option if not rest or not isinstance(option, dict) else {**rest, **option}
            try:
                parts = self.value(merged, depth + 1, f"{where}/{key}/{i}")
            except Unsupported as exc:
                reasons.append(str(exc))
                continue
            if self.valid(schema, orjson.loads(Skeleton(tuple(parts)).text)):
                return parts
            reasons.append(f"{where}/{key}/{i}: its smallest value does not validate against the whole schema")
        raise Unsupported("; ".join(reasons))

    def object(self, schema: dict, depth: int, where: str) -> list[Part]:
        properties = schema.get("properties") or {}
        required = list(schema.get("required") or [])
        names = [n for n in properties if n in required] + [n for n in required if n not in properties]
        for name in properties:  # minProperties: optional ones, in order, until there are enough
            if len(names) >= schema.get("minProperties", 0):
                break
            if name not in names:
                names.append(name)
        if len(names) < schema.get("minProperties", 0):
            raise Unsupported(f"{where}: minProperties needs properties the schema does not name")
        extra = schema.get("additionalProperties", True)
        parts: list[Part] = ["{"]
        for i, name in enumerate(names):
            if name in properties:
                sub = properties[name]
            elif extra is False:
                raise Unsupported(f"{where}: {name!r} is required but not allowed (additionalProperties false)")
            else:
                sub = extra
            parts += ["," if i else "", _dump(name), ":", *self.value(sub, depth + 1, f"{where}/properties/{name}")]
        return [*parts, Slot(" ", None), "}"]

    def array(self, schema: dict, depth: int, where: str) -> list[Part]:
        prefix = schema.get("prefixItems") or []
        items = schema.get("items", True)
        if isinstance(items, list):  # draft-07 tuple form
            prefix, items = items, schema.get("additionalItems", True)
        count = max(schema.get("minItems", 0), 0)
        if schema.get("maxItems") is not None and count > schema["maxItems"]:
            raise Unsupported(f"{where}: minItems {count} > maxItems {schema['maxItems']}")
        parts: list[Part] = ["["]
        for i in range(count):
            sub = prefix[i] if i < len(prefix) else items
            if sub is False:
                raise Unsupported(f"{where}: minItems needs more items than the schema allows")
            parts += ["," if i else "", *self.value(sub, depth + 1, f"{where}/items/{i}")]
        return [*parts, Slot(" ", None), "]"]

    def string(self, schema: dict, where: str) -> list[Part]:
        low, high = schema.get("minLength", 0), schema.get("maxLength")
        if high is not None and low > high:
            raise Unsupported(f"{where}: minLength {low} > maxLength {high}")
        if "pattern" in schema:
            text = regex_skeleton(schema["pattern"], search=True).text
            if not low <= len(text) <= (high if high is not None else len(text)):
                raise Unsupported(f"{where}: pattern together with minLength/maxLength is not supported by the twin")
            return [_dump(text)]
        if "format" in schema:
            fixed = STRING_FORMATS.get(schema["format"])
            if fixed is None:
                raise Unsupported(f"{where}: string format {schema['format']!r} is not supported by the twin")
            return [_dump(fixed)]
        body = (PAD_WORDS * (low // len(PAD_WORDS) + 1))[:low]
        return ['"' + body, Slot(PAD_WORDS, None if high is None else high - low), '"']

    def number(self, schema: dict, integer: bool, where: str) -> str:
        """The value nearest zero among 0, the bounds and (exclusive ones) just inside them, and midpoints."""
        bounds = {k: schema[k] for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum") if k in schema}
        if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in bounds.values()):
            raise Unsupported(f"{where}: number bounds must be numbers (draft-04 boolean exclusives are not supported)")
        lows = [v for k, v in bounds.items() if k in ("minimum", "exclusiveMinimum")]
        highs = [v for k, v in bounds.items() if k in ("maximum", "exclusiveMaximum")]
        candidates: list[float] = [0, *bounds.values()]
        candidates += [math.floor(v) + 1 for v in lows] + [math.ceil(v) - 1 for v in highs]
        candidates += [(low + high) / 2 for low in lows for high in highs]
        if integer:
            candidates = [c for c in candidates if float(c).is_integer()]
        checked = {k: v for k, v in schema.items() if k != "type"}
        for value in sorted(candidates, key=abs):
            value = int(value) if integer or float(value).is_integer() else value
            if self.valid(checked, value):
                return _dump(value)
        raise Unsupported(f"{where}: no {'integer' if integer else 'number'} fits its bounds")


def _dump(value: object) -> str:
    return orjson.dumps(value).decode()


def json_schema_skeleton(schema: object) -> Skeleton:
    """The smallest answer `schema` admits; raises Unsupported when the twin cannot write one."""
    walker = _SchemaWalker(schema)
    skeleton = Skeleton(tuple(p for p in walker.value(schema, 0, "#") if p != ""))
    value = orjson.loads(skeleton.text)
    if not walker.valid(schema, value):
        raise Unsupported("the twin's smallest answer does not validate against the schema")
    if skeleton.growable and not walker.valid(schema, orjson.loads(skeleton.padded(64))):
        raise Unsupported("the twin's padded answer does not validate against the schema")
    return skeleton


# -- regex ---------------------------------------------------------------------------------------

_CATEGORY_CHAR = {"CATEGORY_DIGIT": "0", "CATEGORY_WORD": "a", "CATEGORY_SPACE": " "}
_CANDIDATES = "a0 Z_-.b1"


def _class_char(items: list, where: str) -> str:
    negate = bool(items) and str(items[0][0]) == "NEGATE"
    if negate:
        items = items[1:]

    def member(c: str) -> bool:
        for op, arg in items:
            name = str(op)
            if name == "LITERAL" and ord(c) == arg:
                return True
            if name == "RANGE" and arg[0] <= ord(c) <= arg[1]:
                return True
            if name == "CATEGORY":
                probe = re.compile({"CATEGORY_DIGIT": r"\d", "CATEGORY_WORD": r"\w", "CATEGORY_SPACE": r"\s",
                                    "CATEGORY_NOT_DIGIT": r"\D", "CATEGORY_NOT_WORD": r"\W",
                                    "CATEGORY_NOT_SPACE": r"\S"}.get(str(arg), r"(?!)"))  # fmt: skip
                if probe.fullmatch(c):
                    return True
        return False

    if not negate:
        for op, arg in items:
            name = str(op)
            if name == "LITERAL":
                return chr(arg)
            if name == "RANGE":
                return chr(arg[0])
            if name == "CATEGORY" and str(arg) in _CATEGORY_CHAR:
                return _CATEGORY_CHAR[str(arg)]
    for c in _CANDIDATES:
        if member(c) != negate:
            return c
    raise Unsupported(f"regex {where}: a character class the twin cannot pick a character from")


def _regex_parts(pattern, where: str) -> list[Part]:
    parts: list[Part] = []
    for op, arg in pattern:
        name = str(op)
        if name == "LITERAL":
            parts.append(chr(arg))
        elif name == "NOT_LITERAL":
            parts.append("a" if arg != ord("a") else "b")
        elif name == "ANY":
            parts.append("a")
        elif name == "IN":
            parts.append(_class_char(list(arg), where))
        elif name == "CATEGORY":
            if str(arg) not in _CATEGORY_CHAR:
                raise Unsupported(f"regex {where}: {arg} is not supported by the twin")
            parts.append(_CATEGORY_CHAR[str(arg)])
        elif name == "SUBPATTERN":
            parts += _regex_parts(arg[-1], where)
        elif name == "BRANCH":
            parts += _regex_parts(arg[1][0], where)
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, high, body = arg
            unit = _regex_parts(body, where)
            if any(isinstance(p, Slot) for p in unit):
                if low or high:
                    unit = [p for p in unit if isinstance(p, str)]  # nested repeats grow only at this level
            text = "".join(p for p in unit if isinstance(p, str))
            parts.append(text * low)
            if high != low and text:
                room = None if high == sre_parse.MAXREPEAT else (high - low) * len(text)
                parts.append(Slot(text, room, whole=True))
        elif name == "AT" and str(arg) in ("AT_BEGINNING", "AT_BEGINNING_STRING", "AT_END", "AT_END_STRING"):
            continue
        else:
            raise Unsupported(f"regex {where}: {name} is not supported by the twin")
    return parts


def regex_skeleton(pattern: str, search: bool = False) -> Skeleton:
    """The shortest text `pattern` matches in full (JSON Schema's `pattern`: a search, `search=True`)."""
    try:
        compiled = re.compile(pattern)
        parsed = sre_parse.parse(pattern)
    except re.error as exc:
        raise RegexError(str(exc)) from None
    skeleton = Skeleton(tuple(p for p in _regex_parts(parsed, repr(pattern)) if p != ""))
    match = compiled.search if search else compiled.fullmatch
    if match(skeleton.text) is None or (skeleton.growable and match(skeleton.padded(16)) is None):
        raise Unsupported(f"regex {pattern!r}: the twin's answer would not match it")
    return skeleton


class RegexError(ValueError):
    """The pattern does not compile."""
