"""Which warehouse costbench uses, chosen in one place: a location string, usually $COSTBENCH_WAREHOUSE.

- a plain path (the default, `warehouse/` in the repository): the local folder backend, a Parquet lake and a
  DuckDB file beside it (warehouse/backends/store.py);
- `ducklake:postgresql://USER@HOST:PORT/DB?data_path=/abs/path`: the shared DuckLake backend, catalog in
  PostgreSQL, data files under data_path (warehouse/backends/ducklake_store.py, spelling in
  warehouse/backends/ducklake_url.py).

Both satisfy WarehouseBackend, so the pipeline, the checks and the reports need not know which one runs.
A backend is registered by its URL scheme; anything without a registered `<scheme>:` prefix is a path.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from datetime import date
from pathlib import Path
from typing import Protocol

import duckdb
import pyarrow as pa

from warehouse.backends.store import RefreshResult, Warehouse
from warehouse.marts.mart_rows import (
    CostAttributionRow,
    DiagnosisRow,
    FleetPlanRow,
    LakeMissingRow,
    LakeQuarantineRow,
    RunSummaryRow,
    RunWorkerRow,
    TtftPartsRow,
    TwinErrorBand,
    WeeklyTrendRow,
)

WAREHOUSE_ENV = "COSTBENCH_WAREHOUSE"
# With a URL-backed warehouse: the local folder for run folders, leases, spooled workloads and reports (on
# Kubernetes the shared volume every pod mounts), else the caller's default (warehouse/ in the repository).
LOCAL_DIR_ENV = "COSTBENCH_LOCAL_DIR"
_URL_LIKE = re.compile(r"^[a-z][a-z0-9+.-]*:(?!\\)")  # a scheme, not a Windows drive letter


class WarehouseBackend(Protocol):
    """What the pipeline, checks and reports use of a warehouse."""

    root: Path  # a local folder for run directories, spooled workloads and reports

    @property
    def location(self) -> str: ...  # how messages name it (never with a password)

    def write_partition(self, table: str, week_start: date, scenario: str, data: pa.Table) -> str: ...

    def read_partition(self, table: str, week_start: date, scenario: str) -> pa.Table: ...

    # Computes the week tables for the weeks whose lake changed and `weeks`, or for every week (`full`).
    def refresh(self, weeks: Iterable[date] = (), full: bool = False) -> RefreshResult: ...

    def cleanup(self, min_age_s: float) -> list[str]: ...  # removes what killed writers left; returns the paths

    def connect(self, read_only: bool = True) -> AbstractContextManager[duckdb.DuckDBPyConnection]: ...

    def run_summary(self) -> list[RunSummaryRow]: ...

    def run_workers(self) -> list[RunWorkerRow]: ...

    def ttft_parts(self) -> list[TtftPartsRow]: ...

    def fleet_plans(self) -> list[FleetPlanRow]: ...

    def twin_error_band(self, week_start: date, disaggregated: bool = False) -> TwinErrorBand | None: ...

    def weekly_trends(self) -> list[WeeklyTrendRow]: ...

    def cost_attribution(self) -> list[CostAttributionRow]: ...

    def diagnoses(self) -> list[DiagnosisRow]: ...

    def lake_quarantine(self) -> list[LakeQuarantineRow]: ...

    def lake_missing(self) -> list[LakeMissingRow]: ...


def _ducklake(location: str, root: Path) -> WarehouseBackend:
    from warehouse.backends.ducklake_store import DuckLakeWarehouse  # loads no extension until first used

    return DuckLakeWarehouse.from_url(location, root)


# URL scheme -> factory(location, local scratch folder).
BACKENDS: dict[str, Callable[[str, Path], WarehouseBackend]] = {"ducklake": _ducklake}


class WarehouseLocationError(ValueError):
    pass


def open_warehouse(location: str | Path | None, default_root: Path) -> WarehouseBackend:
    """The warehouse at `location` (None or empty: $COSTBENCH_WAREHOUSE, else `default_root`).

    A URL-backed warehouse keeps its local scratch (runs/, workloads/, reports/) in $COSTBENCH_LOCAL_DIR, else
    `default_root`.
    Raises WarehouseLocationError for a URL whose scheme no backend has, or a malformed DuckLake URL.
    """
    text = str(location) if location not in (None, "") else os.environ.get(WAREHOUSE_ENV) or str(default_root)
    scheme = scheme_of(text)
    if scheme is None:
        return Warehouse(Path(text))
    factory = BACKENDS.get(scheme)
    if factory is None:
        raise WarehouseLocationError(
            f"warehouse location {_shown(text)!r}: no backend for {scheme!r}: (known: {sorted(BACKENDS)}; "
            "a plain path means the local folder backend)"
        )
    from warehouse.backends.ducklake_url import WarehouseUrlError

    try:
        return factory(text, local_root(text, default_root))
    except WarehouseUrlError as exc:
        raise WarehouseLocationError(str(exc)) from None


def scheme_of(text: str) -> str | None:
    """The URL scheme of a warehouse location, or None for a path."""
    if not _URL_LIKE.match(text):
        return None
    return text.split(":", 1)[0]


def local_root(location: str | Path | None, default_root: Path) -> Path:
    """The local folder a location keeps its scratch in, without opening anything."""
    text = str(location) if location not in (None, "") else os.environ.get(WAREHOUSE_ENV) or str(default_root)
    return Path(os.environ.get(LOCAL_DIR_ENV) or default_root) if scheme_of(text) else Path(text)


def _shown(text: str) -> str:
    return re.sub(r"(://[^:/@?#]*):[^@/?#]*@", r"\1:***@", text)


__all__ = [
    "BACKENDS",
    "LOCAL_DIR_ENV",
    "WAREHOUSE_ENV",
    "WarehouseBackend",
    "WarehouseLocationError",
    "local_root",
    "open_warehouse",
]
