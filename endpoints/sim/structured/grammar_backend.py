"""Constrained decoding's backend, as SGLang runs it: compile a constraint once, then mask every token.

`compile` does what SGLang's grammar manager does with a request's constraint, with its error texts: under
`--grammar-backend none` it refuses ("Grammar-based generation ... --grammar-backend none"); a schema that
is not JSON, not a JSON Schema, or (xgrammar) uses a keyword xgrammar would silently ignore fails with
"Failed to compile json grammar: <why>" (the JSON error is Python's json text, as SGLang's; for a schema that
is JSON but not a valid JSON Schema the reason is jsonschema's meta-schema error, where SGLang would give
xgrammar's own). A constraint the twin cannot answer (answer_skeleton.Unsupported) fails too, saying so.
Results are cached by the constraint's text (invalid ones too, as SGLang caches them).

Time, on the engine's clock: the first request with a new constraint waits `compile_s` before it is
scheduled (SGLang compiles it on a thread pool while the request sits in its grammar queue; requests that
arrive while it compiles compile it again, as SGLang's cache is filled only when a compile ends); every
token sampled under the grammar costs `mask_s_per_token` in its step (cost_model.GrammarCostModel). Both
figures are published assumptions (cost_model.GRAMMAR_COSTS), not fitted.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterator

from jsonschema import exceptions as jsonschema_exceptions
from jsonschema import validators

from endpoints.sim.cost.cost_model import GRAMMAR_COSTS, GrammarCosts
from endpoints.sim.structured.answer_skeleton import (
    RegexError,
    Skeleton,
    Unsupported,
    json_schema_skeleton,
    regex_skeleton,
)
from endpoints.sim.structured.output_constraint import ConstraintKind, OutputConstraint

NONE_BACKEND_MESSAGE = (
    "Grammar-based generation (json_schema, regex, ebnf, structural_tag) is not supported when the server is "
    "launched with --grammar-backend none"
)
CACHE_ENTRIES = 4096  # constraints kept (SGLang's dict is unbounded; a bound keeps a long replay's memory flat)
# Keywords xgrammar accepts but does not enforce; SGLang refuses a schema using them (json_schema_validation).
XGRAMMAR_IGNORED_KEYWORDS = frozenset(
    {"contains", "dependentRequired", "dependentSchemas", "else", "if", "maxContains", "minContains", "multipleOf",
     "not", "then", "uniqueItems"}
)  # fmt: skip
XGRAMMAR_FORMATS = frozenset(
    {"date", "date-time", "duration", "email", "hostname", "ipv4", "ipv6", "json-pointer", "relative-json-pointer",
     "time", "uri", "uri-reference", "uri-template", "uuid"}
)  # fmt: skip
_ONE_SUBSCHEMA = ("additionalItems", "additionalProperties", "contains", "contentSchema", "else", "if", "items",
                  "not", "propertyNames", "then", "unevaluatedItems", "unevaluatedProperties")  # fmt: skip
_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SUBSCHEMA_MAPS = ("$defs", "definitions", "dependentSchemas", "patternProperties", "properties")


class GrammarError(ValueError):
    """The request's constraint cannot be used; the message is SGLang's abort message (HTTP 400)."""


def _subschemas(schema: object, pointer: str = "#") -> Iterator[tuple[dict, str]]:
    """Every schema object inside `schema` with its JSON pointer (instance data such as enum is not walked)."""
    if not isinstance(schema, dict):
        return
    yield schema, pointer
    for key in _ONE_SUBSCHEMA:
        child = schema.get(key)
        if isinstance(child, list) and key == "items":
            for i, item in enumerate(child):
                yield from _subschemas(item, f"{pointer}/{key}/{i}")
        else:
            yield from _subschemas(child, f"{pointer}/{key}")
    for key in _SUBSCHEMA_LISTS:
        if isinstance(schema.get(key), list):
            for i, child in enumerate(schema[key]):
                yield from _subschemas(child, f"{pointer}/{key}/{i}")
    for key in _SUBSCHEMA_MAPS:
        if isinstance(schema.get(key), dict):
            for name, child in schema[key].items():
                yield from _subschemas(child, f"{pointer}/{key}/{name.replace('~', '~0').replace('/', '~1')}")


_STRING_GROUPS = (
    ("format", ("format",)),
    ("pattern", ("pattern",)),
    ("minLength/maxLength", ("minLength", "maxLength")),
)


def xgrammar_refusal(schema: object) -> str | None:
    """Why SGLang refuses `schema` under xgrammar (a constraint it would not enforce), or None."""
    for sub, pointer in _subschemas(schema):
        at = f"JSON Schema at {pointer} is not supported by xgrammar: "
        ignored = sorted(XGRAMMAR_IGNORED_KEYWORDS.intersection(sub))
        if ignored:
            return at + f"keyword(s) {', '.join(ignored)} would be ignored"
        kind = sub.get("type")
        if not (kind is None or kind == "string" or (isinstance(kind, list) and "string" in kind)):
            continue
        if "format" in sub and (not isinstance(sub["format"], str) or sub["format"] not in XGRAMMAR_FORMATS):
            return at + f"string format {sub['format']!r} is not implemented"
        groups = [name for name, keys in _STRING_GROUPS if any(k in sub for k in keys)]
        if len(groups) > 1:
            return at + f"constraints {', '.join(groups)} cannot be enforced together"
    return None


def skeleton_for(constraint: OutputConstraint, backend: str = "xgrammar") -> Skeleton:
    """The smallest answer the constraint admits; raises GrammarError with SGLang's message (or the twin's)."""
    failed = f"Failed to compile {constraint.kind.value} grammar: "
    try:
        if constraint.kind is ConstraintKind.REGEX:
            return regex_skeleton(constraint.text)
        if constraint.kind is ConstraintKind.EBNF:
            raise Unsupported("ebnf grammars are accepted but the twin cannot write answers for them")
        try:
            schema = json.loads(constraint.text)
        except json.JSONDecodeError as exc:
            raise GrammarError(failed + str(exc)) from None
        refusal = xgrammar_refusal(schema) if backend == "xgrammar" else None
        if refusal:
            raise GrammarError(failed + refusal)
        try:
            validators.validator_for(schema if isinstance(schema, dict) else {}).check_schema(schema)
        except jsonschema_exceptions.SchemaError as exc:
            raise GrammarError(failed + f"not a valid JSON Schema: {exc.message}") from None
        return json_schema_skeleton(schema)
    except RegexError as exc:
        raise GrammarError(failed + str(exc)) from None
    except Unsupported as exc:
        kind = constraint.kind.value
        raise GrammarError(f"The twin cannot write an answer for this {kind} constraint: {exc}") from None


class GrammarBackend:
    """One server's grammar backend: the compiled constraints, when each compile ends, and what it costs."""

    def __init__(self, name: str, cache_entries: int = CACHE_ENTRIES) -> None:
        self.name = name
        self.costs: GrammarCosts | None = GRAMMAR_COSTS.get(name)
        self._cache_entries = cache_entries
        self._compiled: OrderedDict[tuple[str, str], Skeleton | GrammarError] = OrderedDict()
        self._ready_s: OrderedDict[tuple[str, str], float] = OrderedDict()  # when each compile ends (engine clock)
        self.requests = 0  # SGLang's num_grammar_total
        self.cache_hits = 0  # num_grammar_cache_hit_total
        self.aborted = 0  # num_grammar_aborted_total
        self.compile_times_s: list[float] = []  # grammar_compilation_time_seconds' observations

    def _lookup(self, constraint: OutputConstraint) -> Skeleton | GrammarError:
        key = constraint.key
        found = self._compiled.get(key)
        if found is None:
            try:
                found = skeleton_for(constraint, self.name)
            except GrammarError as exc:
                found = exc
            self._compiled[key] = found
            if len(self._compiled) > self._cache_entries:
                self._compiled.popitem(last=False)
        else:
            self._compiled.move_to_end(key)
        return found

    def compile(self, constraint: OutputConstraint) -> Skeleton:
        """The constraint's skeleton, or GrammarError (SGLang aborts the request with its message)."""
        if self.costs is None:
            raise GrammarError(NONE_BACKEND_MESSAGE)
        found = self._lookup(constraint)
        if isinstance(found, GrammarError):
            self.requests += 1
            self.aborted += 1
            raise found
        return found

    def prompt_skeleton(self, constraint: OutputConstraint) -> Skeleton | None:
        """The answer a schema given only in the prompt asks for (no grammar involved); None: the twin cannot
        write one (the answer is then free-form)."""
        found = self._lookup(constraint)
        return None if isinstance(found, GrammarError) else found

    def reset(self) -> None:
        """/flush_cache: every constraint compiles again (the twin keeps its own answer skeletons)."""
        self._ready_s.clear()

    def wait_s(self, key: tuple[str, str], now_s: float) -> float:
        """How long a request with this (valid) constraint waits for its grammar, from `now_s`."""
        assert self.costs is not None
        self.requests += 1
        ready = self._ready_s.get(key)
        if ready is not None and ready <= now_s:
            self._ready_s.move_to_end(key)
            self.cache_hits += 1
            return 0.0
        compile_s = self.costs.compile_s
        self._ready_s[key] = now_s + compile_s if ready is None else min(ready, now_s + compile_s)
        if len(self._ready_s) > self._cache_entries:
            self._ready_s.popitem(last=False)
        self.compile_times_s.append(compile_s)
        return compile_s
