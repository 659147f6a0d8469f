"""The marts as typed rows (warehouse/marts/mart_rows.py), read the same way from either backend
(warehouse/backends/store.py, warehouse/backends/ducklake_store.py)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import fields
from datetime import date
from typing import TypeVar

import duckdb

from warehouse import schema_migrations
from warehouse.errors import WarehouseError
from warehouse.marts.mart_rows import (
    CostAttributionRow,
    DiagnosisRow,
    FleetPlanRow,
    LakeMissingRow,
    LakeQuarantineRow,
    MartRow,
    RunSummaryRow,
    RunWorkerRow,
    TtftPartsRow,
    TwinErrorBand,
    WeeklyTrendRow,
)
from warehouse.sql_files import read_sql

R = TypeVar("R", bound=MartRow)
# The order weekly_trends and cost_attribution rows are read in: their grain.
_GRAIN_ORDER = "week_start, scenario, endpoint, backend, config_fingerprint"


class MartNotBuiltError(WarehouseError):
    """The warehouse has no such mart yet (never refreshed, or refreshed before the mart existed)."""


class MartReaders:
    """Mixed into a backend that has `connect(read_only=True)` and `location`."""

    @property
    def location(self) -> str:
        raise NotImplementedError

    def connect(self, read_only: bool = True) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
        raise NotImplementedError

    def diagnoses(self) -> list[DiagnosisRow]:
        """Every diagnoses row (the four-numbers verdict per run), ordered by week, scenario, run."""
        return self._rows(DiagnosisRow, "diagnoses", "week_start, scenario, run_id")

    def weekly_trends(self) -> list[WeeklyTrendRow]:
        """Every weekly_trends row (columns: warehouse/schema.sql), ordered by week, scenario, endpoint."""
        return self._rows(WeeklyTrendRow, "weekly_trends", _GRAIN_ORDER)

    def run_summary(self) -> list[RunSummaryRow]:
        """Every run_summary row, ordered by week, scenario, run."""
        return self._rows(RunSummaryRow, "run_summary", "week_start, scenario, run_id")

    def run_workers(self) -> list[RunWorkerRow]:
        """Every run_workers row (a run's completed requests per worker), ordered by week, scenario, run, worker."""
        return self._rows(RunWorkerRow, "run_workers", "week_start, scenario, run_id, worker NULLS FIRST")

    def ttft_parts(self) -> list[TtftPartsRow]:
        """Every ttft_parts row (where a week's TTFT goes for a scenario), ordered by week, scenario."""
        return self._rows(TtftPartsRow, "ttft_parts", "week_start, scenario")

    def fleet_plans(self) -> list[FleetPlanRow]:
        """Every fleet_plans row (a plan's shape at one price), by week, scenario, run, price, policy, replicas."""
        order = "week_start, scenario, run_id, NOT run_price, price_book, prefill_workers > 0, router_policy, "
        order += "decode_ep_size, replicas, prefill_workers"
        return self._rows(FleetPlanRow, "fleet_plans", order)

    def twin_error_band(self, week_start: date, disaggregated: bool = False) -> TwinErrorBand | None:
        """The twin's validation error of the latest week up to `week_start` the twin_calibration asset computed
        (warehouse/sql/twin_error_band.sql), over disaggregated points or single servers'; None when it has
        computed none."""
        with self.connect(read_only=True) as con:
            try:
                row = con.execute(read_sql("sql/twin_error_band.sql"), [week_start, disaggregated]).fetchone()
            except (duckdb.CatalogException, duckdb.BinderException):
                return None  # a database built before the twin_calibration view (or its disaggregated column)
        if row is None:
            return None
        week, figures, factor, low, high = row
        return TwinErrorBand(week, figures, factor, low, high, disaggregated)

    def cost_attribution(self) -> list[CostAttributionRow]:
        """Every cost_attribution row (why cost per request moved against the baseline), ordered like weekly_trends."""
        return self._rows(CostAttributionRow, "cost_attribution", _GRAIN_ORDER)

    def lake_quarantine(self) -> list[LakeQuarantineRow]:
        """Every quarantined lake file, with its partition, reason and whether it was written again since."""
        return self._rows(LakeQuarantineRow, "lake_quarantine", "quarantined_wall_s, quarantined_path")

    def lake_missing(self) -> list[LakeMissingRow]:
        """Every partition the lake's manifest says was written and the last refresh did not find."""
        return self._rows(LakeMissingRow, "lake_missing", "week_start, scenario, table_name")

    def _rows(self, record: type[R], table: str, order_by: str) -> list[R]:
        with self.connect(read_only=True) as con:
            if not schema_migrations.has_table(con, table):
                raise MartNotBuiltError(f"{self.location}: no {table} table yet: refresh the warehouse first")
            cursor = con.execute(f"SELECT * FROM {table} ORDER BY {order_by}")
            columns = [d[0] for d in cursor.description]
            expected = [f.name for f in fields(record)]
            if columns != expected:
                # A database built by another costbench of the same schema version: rebuilt, it matches.
                raise WarehouseError(
                    f"{self.location}: {table} has columns {columns}, this costbench reads {expected}: "
                    "refresh the warehouse"
                )
            return [record(*row) for row in cursor.fetchall()]  # type: ignore[misc]  # mypy 1 joins the TypeVar
