"""Column schemas for Dagster's UI, from the definitions in warehouse/schema.sql."""

import dagster as dg

from warehouse.column_docs import column_docs


def column_schema(table: str) -> dict:
    """Asset metadata that makes the UI show `table`'s columns with their schema.sql definitions."""
    columns = [dg.TableColumn(doc.name, doc.sql_type or "from the lake", doc.description) for doc in column_docs(table)]
    return {"dagster/column_schema": dg.TableSchema(columns=columns)}
