"""The week's spend in the shape FinOps tools read: FOCUS 1.2 cost and usage rows (warehouse/sql/focus_export.sql), one
CSV file per week beside the weekly report: a row per endpoint billing its GPUs for the whole week, what its replays
measured beside it. Only columns FOCUS defines, plus costbench's own with FOCUS's `x_` prefix for custom columns;
FOCUS_COLUMNS + CUSTOM_COLUMNS is the file's header, and the query must produce exactly it.

The CSV is written here, not by Arrow's writer, for its numbers: a decimal is in plain notation with the shortest
digits that read back as the same double (0.0000000000038, never 3.8e-12, which FinOps tools may read as text),
strings are quoted, a null (or a non-finite number) is an empty field."""

from __future__ import annotations

import math
import os
import uuid
from datetime import date
from decimal import Decimal
from pathlib import Path

import pyarrow as pa

from warehouse.backends.backend import WarehouseBackend
from warehouse.sql_files import read_sql

FOCUS_VERSION = "1.2"
# FOCUS's columns this export fills, in the file's order (FOCUS orders none; alphabetical here, as its tables are).
FOCUS_COLUMNS = (
    "BilledCost", "BillingAccountId", "BillingAccountName", "BillingAccountType", "BillingCurrency",
    "BillingPeriodEnd", "BillingPeriodStart", "ChargeCategory", "ChargeClass", "ChargeDescription", "ChargeFrequency",
    "ChargePeriodEnd", "ChargePeriodStart", "ContractedCost", "ContractedUnitPrice", "ConsumedQuantity",
    "ConsumedUnit", "EffectiveCost", "InvoiceId", "InvoiceIssuerName", "ListCost", "ListUnitPrice",
    "PricingCategory", "PricingQuantity", "PricingUnit", "ProviderName", "PublisherName", "ResourceId", "ResourceName",
    "ResourceType", "ServiceCategory", "ServiceName", "ServiceSubcategory", "SkuId", "SkuPriceId", "SkuMeter",
)  # fmt: skip
# costbench's own, x_-prefixed as FOCUS asks of columns it does not define: the hours a week the GPUs are held, and
# what the endpoint's replays of the week measured: their GPU-hours and cost, the tokens by kind, the two costs per
# request and the idle part of the replay cost, the API's price for the same tokens, and which scenarios, runs and
# configurations they were.
CUSTOM_COLUMNS = (
    "x_HoursPerWeek", "x_ReplayGpuHours", "x_ReplayCost", "x_InputTokens", "x_CachedInputTokens", "x_OutputTokens",
    "x_ReasoningTokens", "x_CompletedRequests", "x_RealisedCostPerRequest", "x_EfficiencyCostPerRequest",
    "x_ReplayIdleCost", "x_LoadState", "x_CapacitySource", "x_ApiEquivalentCost", "x_ApiPriceName",
    "x_TrafficWeekStart", "x_Scenarios", "x_RunIds", "x_Backend", "x_ConfigFingerprint",
)  # fmt: skip


def focus_rows(store: WarehouseBackend, week_start: date) -> pa.Table:
    """The week's rows, one per endpoint that ran in it (none when the week has no runs)."""
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
    tmp.write_text(focus_csv(focus_rows(store, week_start)), encoding="utf-8")
    os.replace(tmp, path)
    return path


def focus_csv(table: pa.Table) -> str:
    """The rows as CSV text: a quoted header, then a line per row (numbers bare and in plain notation)."""
    lines = [",".join(_quoted(name) for name in table.column_names)]
    lines += [",".join(_field(value) for value in row.values()) for row in table.to_pylist()]
    return "\n".join(lines) + "\n"


def _field(value: object) -> str:
    if value is None or isinstance(value, bool):  # the export has no boolean column
        return "" if value is None else str(value).lower()
    if isinstance(value, float):
        return plain_decimal(value)
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, int):
        return str(value)
    return _quoted(str(value))


def plain_decimal(value: float) -> str:
    """`value` in plain notation with repr's digits (the shortest that read back the same): 3.8e-12 ->
    '0.0000000000038', 1e+22 -> '10000000000000000000000'; '' for a NaN or an infinity (null in FOCUS)."""
    if not math.isfinite(value):
        return ""
    return format(Decimal(repr(value)), "f")


def _quoted(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'
