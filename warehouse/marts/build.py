"""The marts' build, one order for both backends: each mart after the ones it reads.

run_workers and ttft_parts read the lake's views; run_summary them and run_workers; fleet_plans run_summary;
cost_intervals (warehouse/marts/bootstrap_interval.py) run_summary and requests; weekly_trends both, and its drift
verdicts (warehouse/marts/change_points.py) weekly_trends itself; cost_attribution weekly_trends and run_summary;
diagnoses run_summary. weekly_trends and cost_attribution name a change of configuration with one macro,
config_changes (warehouse/sql/config_changes.sql). The caller has created the schema (warehouse/schema.sql) and
loaded the prices, in the transaction it commits.
"""

from __future__ import annotations

import duckdb

from warehouse.marts.bootstrap_interval import rebuild_intervals
from warehouse.marts.change_points import mark_drift
from warehouse.sql_files import read_sql


def build_marts(con: duckdb.DuckDBPyConnection) -> None:
    """Fill every mart from the views, in order, on `con` (inside the caller's transaction)."""
    con.execute(read_sql("sql/config_changes.sql"))  # a macro weekly_trends and cost_attribution both call
    con.execute(read_sql("sql/run_workers.sql"))
    con.execute(read_sql("sql/ttft_parts.sql"))
    con.execute(read_sql("sql/run_summary.sql"))
    con.execute(read_sql("sql/fleet_plans.sql"))
    rebuild_intervals(con, read_sql("sql/interval_blocks.sql"))
    con.execute(read_sql("sql/weekly_trends.sql"))
    mark_drift(con)  # the change points over each canary's weeks (warehouse/marts/change_points.py)
    con.execute(read_sql("sql/cost_attribution.sql"))
    con.execute(read_sql("sql/diagnoses.sql"))
