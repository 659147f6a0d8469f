"""The marts as rows, read the same way from either backend (warehouse/backends/store.py,
warehouse/backends/ducklake_store.py)."""

from __future__ import annotations

from contextlib import AbstractContextManager

import duckdb

from warehouse.backends import schema_migrations
from warehouse.errors import WarehouseError


class MartReaders:
    """Mixed into a backend that has `connect(read_only=True)` and `location`; raises `missing_error` (its own
    WarehouseError) when a mart has not been built yet."""

    @property
    def location(self) -> str:
        raise NotImplementedError

    def connect(self, read_only: bool = True) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
        raise NotImplementedError

    def diagnoses(self) -> list[dict]:
        """Every diagnoses row (the four-numbers verdict per run), ordered by week, scenario, run."""
        return self._rows("diagnoses", "week_start, scenario, run_id")

    def weekly_trends(self) -> list[dict]:
        """Every weekly_trends row (columns: warehouse/schema.sql), ordered by week, scenario, endpoint."""
        return self._rows("weekly_trends", "week_start, scenario, endpoint, backend, config_fingerprint")

    def run_summary(self) -> list[dict]:
        """Every run_summary row, ordered by week, scenario, run."""
        return self._rows("run_summary", "week_start, scenario, run_id")

    def cost_attribution(self) -> list[dict]:
        """Every cost_attribution row (why cost per request moved against the baseline), ordered like weekly_trends."""
        return self._rows("cost_attribution", "week_start, scenario, endpoint, backend, config_fingerprint")

    def lake_quarantine(self) -> list[dict]:
        """Every quarantined lake file, with its partition, reason and whether it was written again since."""
        return self._rows("lake_quarantine", "quarantined_wall_s, quarantined_path")

    def _rows(self, table: str, order_by: str) -> list[dict]:
        with self.connect(read_only=True) as con:
            if not schema_migrations.has_table(con, table):
                raise WarehouseError(f"{self.location}: no {table} table yet: refresh the warehouse first")
            cursor = con.execute(f"SELECT * FROM {table} ORDER BY {order_by}")
            columns = [d[0] for d in cursor.description]
            return [dict(zip(columns, row)) for row in cursor.fetchall()]
