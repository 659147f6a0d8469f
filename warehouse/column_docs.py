"""Every column's definition, for whoever shows columns to people (Dagster's asset column schemas).

A column the lake stores is defined once, next to its record (warehouse/parquet/lake_columns.py): its type and
one-line definition come from there. A mart's columns are defined in its dbt model's YAML
(warehouse/dbt/models/*/*.yml: type and definition). Columns only a view has (partition keys, derived metrics)
are defined by their one-line comment in warehouse/schema.sql. The schema.sql comments of
stored columns restate the definitions for readers of the SQL; tests/test_column_definitions.py keeps
them equal."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from warehouse.marts.dbt_build import project_dir
from warehouse.parquet.lake_columns import LAKE_COLUMNS, PATH_COLUMNS, duckdb_type
from warehouse.sql_files import read_sql

_CREATE = re.compile(r"^CREATE (?:OR REPLACE )?(TABLE|VIEW)(?: IF NOT EXISTS)? (\w+)\b")
_TABLE_COLUMN = re.compile(r"^\s*(\w+)\s+([A-Z]+(?:\[\])?)(?=[\s,]).*?--\s*(.+)$")
_VIEW_COLUMN = re.compile(r"^\s*(?:.*\bAS\s+)?(\w+),?\s*--\s*(.+)$")


@dataclass(frozen=True, slots=True)
class ColumnDoc:
    name: str
    sql_type: str  # empty for view columns that are not stored in the lake (derived in the view)
    description: str


def column_docs(table: str) -> list[ColumnDoc]:
    """The columns of `table` (a dbt model, or a table or view of schema.sql), in order, with their definitions."""
    modelled = dbt_model_docs().get(table)
    if modelled is not None:
        return modelled
    stored = LAKE_COLUMNS.get(table)
    if stored is None:
        return schema_sql_docs(table)
    docs = []
    for doc in schema_sql_docs(table):
        if doc.name in stored:
            column = stored[doc.name]
            description = doc.description if doc.name in PATH_COLUMNS else column.doc
            doc = ColumnDoc(doc.name, duckdb_type(column.arrow_type), description)
        docs.append(doc)
    return docs


def schema_sql_docs(table: str) -> list[ColumnDoc]:
    """The columns of `table` as warehouse/schema.sql's one-line comments state them, in order."""
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


# libyaml's safe loader where PyYAML was built with it (its wheels are), the same documents as yaml.safe_load: 10x
# faster on the models' 66 KB, which every process that loads the code location reads (0.13 -> 0.012 s of CPU).
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@cache
def dbt_model_docs() -> dict[str, list[ColumnDoc]]:
    """Each dbt model's documented columns (warehouse/dbt/models/*/*.yml), in order, by model name."""
    models: dict[str, list[ColumnDoc]] = {}
    for path in sorted(Path(project_dir(), "models").rglob("*.yml")):
        for model in (yaml.load(path.read_text(), Loader=_SAFE_LOADER) or {}).get("models", []):
            models[model["name"]] = [
                ColumnDoc(c["name"], c.get("data_type", ""), c.get("description", "")) for c in model.get("columns", [])
            ]
    return models


def column_doc(table: str, column: str) -> str:
    """One column's definition (column_docs)."""
    [doc] = [doc.description for doc in column_docs(table) if doc.name == column]
    return doc
