"""The DuckDB configuration every costbench connection that may meet an extension gets: no extension is installed
from the network or loaded implicitly (warehouse/backends/duckdb_extensions.py loads them from their PyPI packages).
Its own module so the marts' build (warehouse/marts/dbt_build.py), which hands the same configuration to dbt, and
the backends share it without importing each other."""

OFFLINE_CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
