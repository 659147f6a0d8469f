"""The week's 95% intervals (warehouse/marts/bootstrap_interval.py), one row per weekly_trends grain, untyped:
cost_intervals types and documents them. Reads run_summary and the lake's requests (sql/interval_blocks.sql)."""

import pyarrow as pa

from warehouse.marts.bootstrap_interval import INTERVAL_COLUMNS, interval_rows
from warehouse.sql_files import read_sql


def model(dbt, session):
    dbt.config(materialized="table")
    dbt.ref("run_summary")  # what interval_blocks.sql reads, named for the lineage
    dbt.source("warehouse", "requests")
    rows = interval_rows(session, read_sql("sql/interval_blocks.sql"))
    return pa.table({name: pa.array([row[i] for row in rows]) for i, name in enumerate(INTERVAL_COLUMNS)})
