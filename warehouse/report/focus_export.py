"""The week's cost in the shape FinOps tools read: FOCUS 1.2 cost and usage rows (warehouse/sql/focus_export.sql), one
CSV file per week beside the weekly report. Only columns FOCUS defines, plus costbench's own with FOCUS's `x_`
prefix for custom columns; FOCUS_COLUMNS is the file's header, and the query must produce exactly it."""

from __future__ import annotations

import os
import uuid
from datetime import date
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pa_csv

from warehouse.backends.backend import WarehouseBackend
from warehouse.sql_files import read_sql

FOCUS_VERSION = "1.2"
# FOCUS's columns this export fills, in the file's order (FOCUS orders none; alphabetical here, as its tables are).
FOCUS_COLUMNS = (
    "BilledCost", "BillingAccountId", "BillingAccountName", "BillingAccountType", "BillingCurrency",
    "BillingPeriodEnd", "BillingPeriodStart", "ChargeCategory", "ChargeClass", "ChargeDescription", "ChargeFrequency",
    "ChargePeriodEnd", "ChargePeriodStart", "ContractedCost", "ContractedUnitPrice", "ConsumedQuantity",
    "ConsumedUnit", "EffectiveCost", "InvoiceIssuerName", "ListCost", "ListUnitPrice", "PricingCategory",
    "PricingQuantity", "PricingUnit", "ProviderName", "PublisherName", "ResourceId", "ResourceName", "ResourceType",
    "ServiceCategory", "ServiceName", "ServiceSubcategory", "SkuId", "SkuPriceId", "SkuMeter", "SubAccountId",
    "SubAccountName",
)  # fmt: skip
# costbench's own, x_-prefixed as FOCUS asks of columns it does not define: the tokens by kind, the two costs per
# request and the idle part of the billed cost, the API's price for the same tokens, and which run and configuration
# the row is.
CUSTOM_COLUMNS = (
    "x_InputTokens", "x_CachedInputTokens", "x_OutputTokens", "x_ReasoningTokens", "x_CompletedRequests",
    "x_RealisedCostPerRequest", "x_EfficiencyCostPerRequest", "x_IdleCost", "x_LoadState", "x_CapacitySource",
    "x_ApiEquivalentCost", "x_ApiPriceName", "x_TrafficWeekStart", "x_RunId", "x_Backend", "x_ConfigFingerprint",
)  # fmt: skip


def focus_rows(store: WarehouseBackend, week_start: date) -> pa.Table:
    """The week's rows (none when the week has no runs)."""
    with store.connect() as con:
        table = con.execute(read_sql("sql/focus_export.sql"), [week_start]).fetch_arrow_table()
    if tuple(table.column_names) != FOCUS_COLUMNS + CUSTOM_COLUMNS:
        raise AssertionError(f"focus_export.sql columns {table.column_names} != FOCUS_COLUMNS + CUSTOM_COLUMNS")
    return table


def write_focus_week(store: WarehouseBackend, week_start: date, reports_dir: Path | None = None) -> Path:
    """Writes reports/focus_week=<Monday>.csv (replacing an earlier one atomically); returns its path."""
    reports_dir = Path(reports_dir or store.root / "reports")
    reports_dir.mkdir(parents=True, exist_ok=True)
    path = reports_dir / f"focus_week={week_start.isoformat()}.csv"
    tmp = path.with_suffix(f".csv.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")  # concurrent builds of one week
    pa_csv.write_csv(focus_rows(store, week_start), tmp)
    os.replace(tmp, path)
    return path
