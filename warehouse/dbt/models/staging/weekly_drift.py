"""The weekly_trends rows that drifted (warehouse/marts/change_points.py): each one's key and what the drift sets
there. weekly_trends applies them to weekly_trends_undrifted, whose verdicts they read."""

import pyarrow as pa

from warehouse.marts.change_points import DRIFT_COLUMNS, drift_rows


def model(dbt, session):
    dbt.config(materialized="table")
    dbt.ref("weekly_trends_undrifted").create_view("weekly_trends_undrifted_rows", replace=True)
    rows = drift_rows(session, "weekly_trends_undrifted_rows")
    return pa.table({name: pa.array([row[i] for row in rows]) for i, name in enumerate(DRIFT_COLUMNS)})
