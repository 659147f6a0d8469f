"""What a weekly report shows, read from the marts up to and including its week (no metric math here:
every number is a column of weekly_trends, run_summary, diagnoses or cost_attribution, defined in
warehouse/schema.sql)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

import duckdb
import pandas as pd

from warehouse.backends.store import Warehouse


@dataclass(frozen=True, slots=True)
class ReportData:
    week_start: date
    trends: pd.DataFrame  # weekly_trends rows up to week_start
    runs: pd.DataFrame  # run_summary rows up to week_start
    diagnoses: pd.DataFrame  # diagnoses rows of week_start
    attribution: pd.DataFrame  # cost_attribution rows up to week_start (empty for a database built before it)

    @property
    def this_week(self) -> pd.DataFrame:
        return self.trends[self.trends["week_start"] == self.week_start]


def load_report_data(store: Warehouse, week_start: date) -> ReportData:
    def frame(rows: list[dict]) -> pd.DataFrame:
        data = pd.DataFrame(rows)
        if not data.empty:
            data["week_start"] = pd.to_datetime(data["week_start"]).dt.date
            data = data[data["week_start"] <= week_start]
        return data

    diagnoses = frame(store.diagnoses())
    if not diagnoses.empty:
        diagnoses = diagnoses[diagnoses["week_start"] == week_start]
    return ReportData(
        week_start, frame(store.weekly_trends()), frame(store.run_summary()), diagnoses, frame(_attribution(store))
    )


def _attribution(store: Warehouse) -> list[dict]:
    with store.connect() as con:
        try:
            cursor = con.execute("SELECT * FROM cost_attribution ORDER BY week_start, scenario, endpoint")
        except duckdb.CatalogException:
            return []  # a database refreshed before the mart existed: the next refresh builds it
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row)) for row in cursor.fetchall()]
