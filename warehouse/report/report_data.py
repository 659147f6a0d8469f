"""What a weekly report shows, read from the marts up to and including its week (no metric math here:
every number is a column of weekly_trends, run_summary, diagnoses, cost_attribution, fleet_plans or ttft_parts,
defined in the dbt models' YAML, warehouse/dbt/models/marts/_marts.yml)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

import pandas as pd

from warehouse.backends.backend import WarehouseBackend
from warehouse.marts.mart_readers import MartNotBuiltError
from warehouse.marts.mart_rows import CostAttributionRow, FleetPlanRow, MartRow, TtftPartsRow, TwinErrorBand, as_frame


@dataclass(frozen=True, slots=True)
class ReportData:
    week_start: date
    trends: pd.DataFrame  # weekly_trends rows up to week_start
    runs: pd.DataFrame  # run_summary rows up to week_start
    diagnoses: pd.DataFrame  # diagnoses rows of week_start
    attribution: pd.DataFrame  # cost_attribution rows up to week_start (empty for a database built before it)
    plans: pd.DataFrame  # fleet_plans rows of week_start, every price (empty for a database built before it)
    error_band: TwinErrorBand | None = None  # the twin's validation error up to week_start (None: never computed)
    ttft_parts: pd.DataFrame | None = None  # ttft_parts rows up to week_start (None or empty: built before the mart)
    pd_error_band: TwinErrorBand | None = None  # the same over disaggregated deployments' points

    @property
    def this_week(self) -> pd.DataFrame:
        return self.trends[self.trends["week_start"] == self.week_start]

    @property
    def waterfalls(self) -> pd.DataFrame:
        """This week's cost_attribution rows with a baseline: one waterfall each."""
        week = self.attribution
        if week.empty:
            return week
        return week[(week["week_start"] == self.week_start) & week["baseline_realised_cost_per_request_usd"].notna()]


def load_report_data(store: WarehouseBackend, week_start: date) -> ReportData:
    def frame(rows: Sequence[MartRow]) -> pd.DataFrame:
        data = as_frame(rows)
        if not data.empty:
            data["week_start"] = pd.to_datetime(data["week_start"]).dt.date
            data = data[data["week_start"] <= week_start]
        return data

    def of_week(rows: Sequence[MartRow]) -> pd.DataFrame:
        data = frame(rows)
        return data[data["week_start"] == week_start] if not data.empty else data

    return ReportData(
        week_start,
        frame(store.weekly_trends()),
        frame(store.run_summary()),
        of_week(store.diagnoses()),
        frame(_attribution(store)),
        of_week(_plans(store)),
        store.twin_error_band(week_start),
        frame(_ttft_parts(store)),
        store.twin_error_band(week_start, disaggregated=True),
    )


def _attribution(store: WarehouseBackend) -> list[CostAttributionRow]:
    try:
        return store.cost_attribution()
    except MartNotBuiltError:
        return []  # a database refreshed before the mart existed: the next refresh builds it


def _ttft_parts(store: WarehouseBackend) -> list[TtftPartsRow]:
    try:
        return store.ttft_parts()
    except MartNotBuiltError:
        return []  # as _attribution: refreshed before the mart existed


def _plans(store: WarehouseBackend) -> list[FleetPlanRow]:
    try:
        return store.fleet_plans()
    except MartNotBuiltError:
        return []  # as _attribution: refreshed before the mart existed
