"""One definition per column: name, Arrow type, unit and one-line meaning, next to each record.

Each record module lists its columns once as a ColumnList (replay/recording/records.py,
endpoints/probes/probe_records.py, warehouse/parquet/run_columns.py). Everything else is derived from that list
or checked against it: the Arrow schema of the Parquet files (`ColumnList.schema()`), the record dataclass's
fields (`field_drift`), the lake views and their comments in warehouse/schema.sql, and the column schemas
Dagster shows (tests/test_column_definitions.py fails when any of them drifts).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass, fields, replace
from datetime import date
from enum import Enum

import pyarrow as pa


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    arrow_type: pa.DataType
    unit: str  # "s from t0", "ms", "tokens", "count", "ratio 0-1", ...; "" for names, ids, flags and enums
    meaning: str  # one line, lower case, no trailing period
    nullable: bool = True
    note: str = ""  # what a null (or an older file) means, e.g. "null = not reported"

    @property
    def doc(self) -> str:
        """The one-line definition people read (warehouse/schema.sql comments, Dagster's column schemas)."""
        detail = "; ".join(part for part in (self.unit, self.note) if part)
        return f"{self.meaning} ({detail})" if detail else self.meaning

    def field(self) -> pa.Field:
        return pa.field(self.name, self.arrow_type, nullable=self.nullable)

    def as_(self, name: str | None = None, nullable: bool | None = None, note: str | None = None) -> Column:
        """The same quantity stored under another name or nullability (e.g. a RunInfo field in `runs`)."""
        return replace(
            self,
            name=self.name if name is None else name,
            nullable=self.nullable if nullable is None else nullable,
            note=self.note if note is None else note,
        )


@dataclass(frozen=True, slots=True)
class ColumnList:
    columns: tuple[Column, ...]

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for column in self.columns:
            if column.name in seen:
                raise ValueError(f"column {column.name!r} is defined twice")
            seen.add(column.name)

    def __iter__(self) -> Iterator[Column]:
        return iter(self.columns)

    def __len__(self) -> int:
        return len(self.columns)

    def __getitem__(self, name: str) -> Column:
        for column in self.columns:
            if column.name == name:
                return column
        raise KeyError(name)

    def __contains__(self, name: object) -> bool:
        return any(column.name == name for column in self.columns)

    @property
    def names(self) -> list[str]:
        return [column.name for column in self.columns]

    def schema(self) -> pa.Schema:
        return pa.schema([column.field() for column in self.columns])


# Python types a record field may have for each Arrow type (enums of str are stored as their value,
# tuples as lists, dicts as JSON text).
_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "bool": (bool,),
    "int32": (int,),
    "int64": (int,),
    "double": (float,),
    "date32[day]": (date,),
}


def field_drift(record: type, column_list: ColumnList, json_fields: tuple[str, ...] = ()) -> list[str]:
    """How the dataclass `record` disagrees with `column_list` (empty when it agrees): field names and
    order, optionality (a field that may be None needs a nullable column) and Python type for the column's Arrow type.
    `json_fields` name dict fields whose column holds their JSON text."""
    problems: list[str] = []
    names = [f.name for f in fields(record)]
    if names != column_list.names:
        problems.append(f"{record.__name__} fields {names} != columns {column_list.names}")
    hints = typing.get_type_hints(record)
    for name in names:
        if name not in column_list:
            continue
        column = column_list[name]
        base, optional = _unwrap_optional(hints[name])
        if optional and not column.nullable:
            problems.append(f"{record.__name__}.{name} may be None but its column is not nullable")
        if not _python_type_fits(base, column.arrow_type, name in json_fields):
            problems.append(f"{record.__name__}.{name}: {base} does not fit column type {column.arrow_type}")
    return problems


def _unwrap_optional(hint: object) -> tuple[object, bool]:
    args = typing.get_args(hint)
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        rest = [a for a in args if a is not type(None)]
        return (rest[0] if len(rest) == 1 else hint), len(rest) < len(args)
    return hint, False


def _python_type_fits(hint: object, arrow_type: pa.DataType, json_text: bool) -> bool:
    if json_text:
        return typing.get_origin(hint) is dict or hint is dict
    if pa.types.is_list(arrow_type):
        args = typing.get_args(hint)
        return (
            typing.get_origin(hint) is tuple
            and len(args) == 2
            and args[1] is Ellipsis
            and _python_type_fits(args[0], arrow_type.value_type, False)
        )
    allowed = _PYTHON_TYPES.get(str(arrow_type), ())
    if isinstance(hint, type) and issubclass(hint, Enum):
        return pa.types.is_string(arrow_type) and issubclass(hint, str)
    return hint in allowed
