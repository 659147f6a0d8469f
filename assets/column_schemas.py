"""Column schemas for Dagster's UI, from the column definitions (warehouse/column_docs.py): stored columns
from their records' column lists, view-only and mart columns from warehouse/schema.sql."""

import dagster as dg

from warehouse.column_docs import column_docs


def column_schema(table: str) -> dict:
    """Asset metadata that makes the UI show `table`'s columns with their types and definitions."""
    columns = [
        dg.TableColumn(doc.name, doc.sql_type or "computed in the view", doc.description) for doc in column_docs(table)
    ]
    return {"dagster/column_schema": dg.TableSchema(columns=columns)}
