"""The week's 95% intervals (warehouse/marts/bootstrap_interval.py), one row per weekly_trends grain, untyped:
cost_intervals types and documents them. Reads run_summary and the arrival blocks of every week (interval_block_rows):
history-wide, since a week's interval widens by the run-to-run spread of its series' other weeks."""

import pyarrow as pa

from warehouse.marts.bootstrap_interval import INTERVAL_COLUMNS, interval_rows


def model(dbt, session):
    dbt.config(materialized="table")
    dbt.ref("run_summary")  # what interval_rows reads besides the blocks, named for the lineage
    dbt.ref("interval_block_rows").create_view("interval_block_rows", replace=True)
    rows = interval_rows(session)
    return pa.table({name: pa.array([row[i] for row in rows]) for i, name in enumerate(INTERVAL_COLUMNS)})
