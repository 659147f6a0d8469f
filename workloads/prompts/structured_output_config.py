"""A scenario's `structured_output` key: declared here, checked with the scenarios file, before anything starts.

    structured_output:
      share: 0.5                  # of the requests without a format of their own
      response_format: {type: json_schema, json_schema: {name: ticket, schema: {...}}}
      # or schema_file: path/to/schema.json (relative to the repository root), a json_schema named by its stem
      constrain: true             # false: the schema goes only into the prompt
      min_valid_rate: 0.99        # the warehouse's check fails the week below this valid-answer rate

A format that is not one (a schema that is not valid JSON Schema, a regex that does not compile, a schema
file that is not JSON) fails the file as `<file>:<line>: <key path>: <reason> (scenario '<name>')`, the line
being that of the key in scenarios.yaml (for a schema file's JSON syntax, the schema file's own line).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, model_validator

from common.config_file import ConfigFileError, ConfigModel, NonEmptyStr, key_path
from workloads.prompts.response_format import StructuredOutput, json_schema_format, parse_response_format


class StructuredOutputEntry(ConfigModel):
    share: float = Field(gt=0, le=1)
    response_format: dict[str, Any] | None = None
    schema_file: NonEmptyStr | None = None
    constrain: bool = True
    min_valid_rate: float | None = Field(None, ge=0, le=1)

    @model_validator(mode="after")
    def _one_format(self) -> StructuredOutputEntry:
        if (self.response_format is None) == (self.schema_file is None):
            raise ValueError("give exactly one of response_format and schema_file")
        return self


def yaml_line(path: Path, loc: Sequence[str | int]) -> int | None:
    """1-based line of the value at `loc` in the YAML file `path` (None when it cannot be found). Only on
    the error path: the file is composed again, with positions."""
    try:
        node = yaml.compose(Path(path).read_text())
    except (OSError, yaml.YAMLError):
        return None
    line = None
    for part in loc:
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            pair = next(((key, value) for key, value in node.value if key.value == part), None)
            if pair is None:
                return None
            line, node = pair[0].start_mark.line + 1, pair[1]  # a key's line: where a block value starts
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            return None
    return line


def structured_output(
    entry: StructuredOutputEntry,
    path: Path,
    loc: Sequence[str | int],
    repo_root: Path,
    error: type[ConfigFileError],
    scenario: str,
) -> StructuredOutput:
    """The checked StructuredOutput of `entry` (found at `loc` in the file `path`), or `error` naming file and line."""

    def fail(key: str, reason: str) -> ConfigFileError:
        where = (*loc, key)
        line = yaml_line(path, where)
        return error(f"{path}{f':{line}' if line else ''}: {key_path(where)}: {reason} (scenario {scenario!r})")

    if entry.response_format is not None:
        try:
            response_format = parse_response_format(entry.response_format)
        except ValueError as exc:
            raise fail("response_format", str(exc)) from None
    else:
        assert entry.schema_file is not None
        schema_path = Path(entry.schema_file)
        schema_path = schema_path if schema_path.is_absolute() else repo_root / schema_path
        try:
            schema = json.loads(schema_path.read_text())
        except OSError as exc:
            raise fail("schema_file", f"cannot read {schema_path}: {exc.strerror or exc}") from None
        except json.JSONDecodeError as exc:
            raise fail("schema_file", f"{schema_path}:{exc.lineno}: not JSON: {exc.msg}") from None
        try:
            response_format = json_schema_format(schema_path.stem, schema)
        except ValueError as exc:
            raise fail("schema_file", f"{schema_path}: {exc}") from None
    return StructuredOutput(entry.share, response_format, entry.constrain, entry.min_valid_rate)
