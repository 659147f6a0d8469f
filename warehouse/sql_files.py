"""The warehouse's SQL text outside dbt: warehouse/schema.sql and warehouse/sql/*.sql, read from the package, and
the one substitution the backends make in them (schema.sql's @<table>_source@, what each view reads)."""

from __future__ import annotations

import re
from importlib import resources

from warehouse.errors import WarehouseError

_PLACEHOLDER = re.compile(r"@([a-z_]+)@")


def read_sql(name: str) -> str:
    """The text of a SQL file of the package, by its path under warehouse/ (e.g. "sql/interval_block_totals.sql")."""
    return resources.files("warehouse").joinpath(name).read_text()


def render_sql(template: str, values: dict[str, str], where: str) -> str:
    """Replace every @name@ with values[name]; each name must be used and every placeholder known."""
    used = set(_PLACEHOLDER.findall(template))
    if used != set(values):
        raise WarehouseError(f"{where}: placeholders {sorted(used)} do not match the values {sorted(values)}")
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)
