"""Every column's definition as warehouse/schema.sql states it, for whoever shows columns to people
(Dagster's asset column schemas): the one-line comment is the documentation, kept in one place."""

from __future__ import annotations

import re
from dataclasses import dataclass

from warehouse.store import read_sql

_CREATE = re.compile(r"^CREATE (?:OR REPLACE )?(TABLE|VIEW)(?: IF NOT EXISTS)? (\w+)\b")
_TABLE_COLUMN = re.compile(r"^\s*(\w+)\s+([A-Z]+(?:\[\])?)\b.*?--\s*(.+)$")
_VIEW_COLUMN = re.compile(r"^\s*(?:.*\bAS\s+)?(\w+),?\s*--\s*(.+)$")


@dataclass(frozen=True, slots=True)
class ColumnDoc:
    name: str
    sql_type: str  # empty for view columns, whose type comes from the lake files
    description: str


def column_docs(table: str) -> list[ColumnDoc]:
    """The documented columns of `table` (a table or view of schema.sql), in order."""
    lines = read_sql("schema.sql").splitlines()
    for start, line in enumerate(lines):
        created = _CREATE.match(line)
        if not created or created.group(2) != table:
            continue
        is_view = created.group(1) == "VIEW"
        docs = []
        for body_line in lines[start + 1 :]:
            code = body_line.split("--", 1)[0]
            match = (_VIEW_COLUMN if is_view else _TABLE_COLUMN).match(body_line)
            if match:
                column, *rest = match.groups()
                docs.append(ColumnDoc(column, "" if is_view else rest[0], rest[-1].strip()))
            if ";" in code or code.lstrip().startswith("FROM "):
                break
        return docs
    raise KeyError(f"warehouse/schema.sql defines no table or view named {table!r}")
