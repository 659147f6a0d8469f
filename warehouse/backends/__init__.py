"""The two catalogs the lake is read through: a DuckDB file and DuckLake on PostgreSQL, and migrations."""
