"""YAML configuration read through declared models: scenarios.yaml, endpoints.yaml, prices.yaml.

Each file is parsed by a pydantic model (`ConfigModel`: unknown keys forbidden, strict types, no
NaN or infinity) at the boundary, then turned into the frozen dataclasses the code uses. Every
problem is reported as `<file>: <key path>: <reason>`, e.g.
`workloads/scenarios.yaml: scenarios[2].slo.ttft_ms: must be > 0, got 0 (scenario 'chat-v3')`,
one line per problem, before anything is started. Lives in `common` so every layer can share it.

A file is read with bounded work whatever it holds: past MAX_CONFIG_BYTES it is not parsed, aliases (`*name`)
count every time they are used, so an "anchor bomb" is refused after MAX_YAML_VALUES values instead of expanding
to billions, nesting is limited to MAX_YAML_DEPTH levels, and a key written twice in one mapping is an error naming
its line (YAML would keep the last one without a word). A byte that is not UTF-8 or a NUL is named with its line.
"""

from __future__ import annotations

import difflib
import re
import reprlib
import types
import typing
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Annotated, TypeVar

import yaml
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, ValidationError
from pydantic_core import ErrorDetails

# A name that becomes one path component (a folder, a log file name): no '/', no leading dot or dash.
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_MAX_REPORTED = 10
# Far above any real configuration (the bundled files: 222 values at most, under 10 KB), far below a hang.
MAX_YAML_VALUES = 20_000
MAX_YAML_DEPTH = 50
MAX_CONFIG_BYTES = 1_048_576  # PyYAML reads about a megabyte a second
_MERGE_TAG = "tag:yaml.org,2002:merge"
_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"

M = TypeVar("M", bound=BaseModel)


class ConfigFileError(ValueError):
    """A configuration file that does not parse; the message is `<file>: <key path>: <reason>` lines."""


E = TypeVar("E", bound=ConfigFileError)


class ConfigModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)


def _safe_name(value: str) -> str:
    if not SAFE_NAME.match(value):
        raise ValueError(f"must match {SAFE_NAME.pattern} (it becomes a folder and a file name), got {value!r}")
    return value


def _non_empty(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


def _iso_date(value: object) -> object:
    # YAML reads 2026-11-16 as a date; a quoted "2026-11-16" is the same date, anything else is not one.
    if isinstance(value, str):
        try:
            return date.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{value!r} is not a date (YYYY-MM-DD)") from None
    return value


SafeName = Annotated[str, AfterValidator(_safe_name)]
NonEmptyStr = Annotated[str, AfterValidator(_non_empty)]
IsoDate = Annotated[date, BeforeValidator(_iso_date)]


def key_path(loc: Sequence[str | int]) -> str:
    """('scenarios', 2, 'slo', 'ttft_ms') -> 'scenarios[2].slo.ttft_ms'."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def config_error(error: type[E], path: Path, loc: Sequence[str | int], reason: str, entry: str = "") -> E:
    """One problem found after parsing (a rule across keys), in the same form; `entry` like "scenario 'x'"."""
    return error(f"{path}: {key_path(loc)}: {reason}{f' ({entry})' if entry else ''}")


def read_yaml(path: Path, error: type[ConfigFileError]) -> object:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)  # a larger file is never read whole
    except OSError as exc:
        raise error(f"{path}: cannot read the file: {exc.strerror or exc}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise error(f"{path}: over {MAX_CONFIG_BYTES:,} bytes, the bound of a configuration file; not read")
    try:
        text = data.decode("utf-8")
        loader = _BoundedLoader(text, path, error)  # checks every character first
    except (UnicodeDecodeError, yaml.reader.ReaderError) as exc:
        if isinstance(exc, UnicodeDecodeError):
            line, what = data[: exc.start].count(b"\n") + 1, f"byte 0x{data[exc.start]:02x} is not UTF-8 text"
        else:
            line, what = text[: exc.position].count("\n") + 1, f"character U+{exc.character:04X} not allowed in YAML"
        raise error(f"{path}: line {line}: {what}") from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_nodes(node, path, error, loader)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise error(f"{path}: invalid YAML: {exc}") from None
    finally:
        loader.dispose()


class _BoundedLoader(yaml.SafeLoader):
    """Stops while it composes, past MAX_YAML_VALUES nodes or MAX_YAML_DEPTH levels (then _check_nodes counts the
    aliases expanded): a file of small values costs that many nodes at most, however long."""

    def __init__(self, text: str, path: Path, error: type[ConfigFileError]) -> None:
        super().__init__(text)
        self.where, self.error, self.nodes, self.depth = path, error, 0, 0

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node | None:
        self.nodes, self.depth = self.nodes + 1, self.depth + 1
        if self.nodes > MAX_YAML_VALUES or self.depth > MAX_YAML_DEPTH:
            many = self.nodes > MAX_YAML_VALUES
            why = f"more than {MAX_YAML_VALUES:,} values" if many else f"nested deeper than {MAX_YAML_DEPTH} levels"
            raise self.error(f"{self.where}: line {self.peek_event().start_mark.line + 1}: {why}")
        node = super().compose_node(parent, index)  # type: ignore[arg-type]  # PyYAML passes any index
        self.depth -= 1
        return node


def _check_nodes(root: yaml.Node, path: Path, error: type[ConfigFileError], loader: yaml.SafeLoader) -> None:
    """Walks the composed document as construction would, aliases expanded, with bounded work; a date that
    does not exist (2026-02-30) is named with its line here, where construction would only say ValueError."""
    values = 0
    stack: list[tuple[yaml.Node, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        values += 1
        if values > MAX_YAML_VALUES:
            raise error(
                f"{path}: more than {MAX_YAML_VALUES:,} values once its aliases (*name) are expanded; "
                "a configuration file is far smaller (an alias used inside an alias, over and over?)"
            )
        if depth > MAX_YAML_DEPTH:
            raise error(f"{path}: line {node.start_mark.line + 1}: nested deeper than {MAX_YAML_DEPTH} levels")
        if isinstance(node, yaml.MappingNode):
            seen: dict[tuple[str, str], int] = {}
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.tag != _MERGE_TAG:
                    name, line = (key.tag, key.value), key.start_mark.line + 1
                    if name in seen:
                        raise error(
                            f"{path}: line {line}: key {key.value!r} is written twice in one mapping "
                            f"(first at line {seen[name]}); keep one"
                        )
                    seen[name] = line
                stack.append((key, depth + 1))
                stack.append((value, depth + 1))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, depth + 1) for item in node.value)
        elif node.tag == _TIMESTAMP_TAG and isinstance(node, yaml.ScalarNode):
            try:
                loader.construct_yaml_timestamp(node)
            except ValueError as exc:
                raise error(f"{path}: line {node.start_mark.line + 1}: {node.value!r} is not a date: {exc}") from None


def parse_config(model: type[M], raw: object, path: Path, error: type[ConfigFileError], entry_kind: str = "entry") -> M:
    """`raw` (what read_yaml returned) as `model`, or `error` naming the file, key path and reason of
    each problem. `entry_kind` names the list items in messages ("scenario 'chat-v3'")."""
    try:
        return model.model_validate(raw if raw is not None else {})
    except ValidationError as exc:
        problems = config_problems(model, exc, raw, path, entry_kind)
        lines = [line for _, line in problems[:_MAX_REPORTED]]
        if len(problems) > _MAX_REPORTED:
            lines.append(f"{path}: ... and {len(problems) - _MAX_REPORTED} more problems")
        raise error("\n".join(lines)) from None


def config_problems(
    model: type[BaseModel], exc: ValidationError, raw: object, path: Path, entry_kind: str = "entry"
) -> list[tuple[tuple[str | int, ...], str]]:
    """Each problem of a failed validation as (its key path, its line), for a caller that sets a bad list entry
    aside and keeps the others (workloads/scenarios.py's load_scenario_file)."""
    return [
        (tuple(p["loc"]), f"{path}: {key_path(p['loc'])}: {_reason(model, p)}{_entry_name(raw, p['loc'], entry_kind)}")
        for p in exc.errors()
    ]


def _entry_name(raw: object, loc: Sequence[str | int], entry_kind: str) -> str:
    """' (scenario 'chat-v3')' when the problem is inside a named list entry."""
    if len(loc) < 2 or not isinstance(raw, dict) or not isinstance(loc[1], int):
        return ""
    entries = raw.get(loc[0])
    if not isinstance(entries, list) or loc[1] >= len(entries) or not isinstance(entries[loc[1]], dict):
        return ""
    name = entries[loc[1]].get("name")
    return f" ({entry_kind} {name!r})" if isinstance(name, str) and loc[2:] != ("name",) else ""


_SHORT_REPR = reprlib.Repr()
_SHORT_REPR.maxlevel, _SHORT_REPR.maxlist, _SHORT_REPR.maxdict = 3, 4, 4
_SHORT_REPR.maxstring = _SHORT_REPR.maxother = 60


def _got(problem: ErrorDetails) -> str:
    # reprlib stops early, so a huge bad value is never formatted whole only to be cut.
    text = _SHORT_REPR.repr(problem.get("input"))
    return f", got {text if len(text) <= 80 else text[:77] + '...'}"


def _reason(model: type[BaseModel], problem: ErrorDetails) -> str:
    kind, ctx = problem["type"], problem.get("ctx") or {}
    if kind == "missing":
        return "required key is missing"
    if kind == "extra_forbidden":
        return _unknown_key(model, problem["loc"])
    if kind == "value_error":
        return str(ctx.get("error", problem["msg"]))
    simple = {
        "bool_type": "must be true or false",
        "int_type": "must be a whole number",
        "float_type": "must be a number",
        "finite_number": "must be a finite number",
        "string_type": "must be a string",
        "list_type": "must be a list",
        "dict_type": "must be a mapping",
        "model_type": "must be a mapping",
        "model_attributes_type": "must be a mapping",
        "date_type": "must be a date (YYYY-MM-DD)",
        "string_too_short": "must not be empty",
        "too_short": "must not be empty",
    }
    if kind in simple:
        return simple[kind] + _got(problem)
    bounds = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<", "less_than_equal": "<="}
    if kind in bounds:
        limit = next(iter(ctx.values()))
        return f"must be {bounds[kind]} {limit:g}" + _got(problem)
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')}" + _got(problem)
    if kind == "string_pattern_mismatch":
        return f"must match {ctx.get('pattern')}" + _got(problem)
    return problem["msg"] + _got(problem)


def _unknown_key(model: type[BaseModel], loc: Sequence[str | int]) -> str:
    key = str(loc[-1])
    owner = _model_at(model, loc[:-1])
    if owner is None:
        return "unknown key"
    known = list(owner.model_fields)
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(known)}"
    return f"unknown key ({hint})"


def _model_at(model: type[BaseModel], loc: Sequence[str | int]) -> type[BaseModel] | None:
    """The model class that validates the value at `loc` (following fields, lists and optionals)."""
    current: object = model
    for part in loc:
        current = _unwrap(current)
        if isinstance(part, int):
            args = typing.get_args(current)
            current = args[0] if args else None
        elif isinstance(current, type) and issubclass(current, BaseModel) and part in current.model_fields:
            current = current.model_fields[part].annotation
        else:
            return None
    current = _unwrap(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(annotation: object) -> object:
    """`X | None` and `Annotated[X, ...]` -> X."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
        else:
            return annotation
