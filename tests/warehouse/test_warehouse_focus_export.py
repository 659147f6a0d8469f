"""The FOCUS export (warehouse/report/focus_export.py): a week's runs as FOCUS 1.2 cost and usage rows in a CSV a
FinOps tool reads. The costs reconcile with run_summary to the cent, the tokens with the requests, the periods are
ISO 8601 in UTC, every column is FOCUS's or x_-prefixed, and the rows of another week stay out."""

from __future__ import annotations

import csv
import re
from datetime import date, datetime, timedelta, timezone

import pytest

from warehouse.backends.store import Warehouse
from warehouse.marts.run_rows import RunContext
from warehouse.report.focus_export import CUSTOM_COLUMNS, FOCUS_COLUMNS, write_focus_week
from warehouse_builders import T0_WALL_S, endpoint, request, run_info, write_run

WEEKS = (date(2026, 11, 16), date(2026, 11, 23))
# What FOCUS 1.2 requires of every row (its Mandatory columns); the rest this export fills are conditional ones.
FOCUS_MANDATORY = {
    "BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency", "BillingPeriodEnd",
    "BillingPeriodStart", "ChargeCategory", "ChargeClass", "ChargeDescription", "ChargePeriodEnd",
    "ChargePeriodStart", "ContractedCost", "EffectiveCost", "InvoiceIssuerName", "ListCost", "PricingQuantity",
    "PricingUnit", "ProviderName", "PublisherName", "ServiceCategory", "ServiceName",
}  # fmt: skip
ISO_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    store = Warehouse(tmp_path_factory.mktemp("focus") / "wh")
    for week in WEEKS:
        for scenario, reasoning in (("chat", None), ("reasoning", 40)):
            run_id = f"{scenario}-{week.isoformat()}"
            records = [
                request(run_id, f"q{i}", 100.0, 900.0, prompt_tokens=1000 + i, cached_tokens=400, completion_tokens=120,
                        reasoning_tokens=reasoning, sent_mono_s=1.0 + i)
                for i in range(5)
            ] + [request(run_id, "warm", 100.0, 900.0, is_warmup=True, sent_mono_s=0.1)]  # fmt: skip
            info = run_info(run_id, 3600.0, requests_total=6, requests_recorded=6, requests_ok=6)
            write_run(store.lake_root, week, scenario, info, endpoint(), records, RunContext(slo_ttft_ms=1000.0))
    store.refresh()
    path = write_focus_week(store, WEEKS[1])
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    return store, path, rows


def test_one_usage_row_per_run_of_the_week_and_only_that_week(exported):
    store, path, rows = exported
    assert path.name == "focus_week=2026-11-23.csv"
    assert sorted(r["x_RunId"] for r in rows) == ["chat-2026-11-23", "reasoning-2026-11-23"]
    assert {r["ChargeCategory"] for r in rows} == {"Usage"} and {r["BillingCurrency"] for r in rows} == {"USD"}


def test_every_column_is_focus_s_or_x_prefixed_and_the_mandatory_ones_are_there(exported):
    _, path, rows = exported
    header = path.read_text().splitlines()[0].replace('"', "").split(",")
    assert tuple(header) == FOCUS_COLUMNS + CUSTOM_COLUMNS
    assert FOCUS_MANDATORY <= set(header)
    assert all(c.startswith("x_") for c in CUSTOM_COLUMNS) and not any(c.startswith("x_") for c in FOCUS_COLUMNS)
    for row in rows:  # a mandatory column is null only where FOCUS allows it (ChargeClass: not a correction)
        assert all(row[c] != "" for c in FOCUS_MANDATORY - {"ChargeClass"}), row


def test_costs_reconcile_with_run_summary_and_quantities_are_gpu_hours(exported):
    store, _, rows = exported
    summary = {r.run_id: r for r in store.run_summary()}
    for row in rows:
        run = summary[row["x_RunId"]]
        assert float(row["BilledCost"]) == pytest.approx(run.run_cost_usd, abs=0.005)  # 8 GPUs x $2 x 1 h = $16
        assert float(row["EffectiveCost"]) == float(row["ContractedCost"]) == float(row["BilledCost"])
        assert float(row["PricingQuantity"]) == pytest.approx(8.0) and row["PricingUnit"] == "GPU-Hours"
        assert float(row["ContractedUnitPrice"]) == pytest.approx(2.0)
        assert float(row["ListCost"]) == pytest.approx(float(row["ListUnitPrice"]) * 8.0)
        assert row["SkuId"] == "H200-gpu-hour" and row["SkuPriceId"] == "endpoint:H200"
        assert float(row["x_ApiEquivalentCost"]) == pytest.approx(run.api_cost_usd)


def test_tokens_are_the_completed_requests_by_kind_warm_up_left_out(exported):
    _, _, rows = exported
    by_run = {r["x_RunId"]: r for r in rows}
    chat, reasoning = by_run["chat-2026-11-23"], by_run["reasoning-2026-11-23"]
    assert int(chat["x_InputTokens"]) == sum(1000 + i for i in range(5))
    assert int(chat["x_CachedInputTokens"]) == 5 * 400 and int(chat["x_OutputTokens"]) == 5 * 120
    assert (int(chat["x_ReasoningTokens"]), int(reasoning["x_ReasoningTokens"])) == (0, 5 * 40)
    assert float(chat["ConsumedQuantity"]) == int(chat["x_InputTokens"]) + int(chat["x_OutputTokens"])
    assert chat["ConsumedUnit"] == "Tokens" and int(chat["x_CompletedRequests"]) == 5


def _utc(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)


def test_periods_are_iso_8601_utc_the_charge_when_the_gpus_ran_inside_its_billing_week(exported):
    _, _, rows = exported
    for row in rows:
        assert all(ISO_UTC.match(row[c]) for c in ("ChargePeriodStart", "ChargePeriodEnd", "BillingPeriodStart",
                                                   "BillingPeriodEnd"))  # fmt: skip
        start, end = _utc(row["ChargePeriodStart"]), _utc(row["ChargePeriodEnd"])
        assert start == datetime.fromtimestamp(T0_WALL_S, timezone.utc).replace(microsecond=0)  # no warm-up here
        assert end - start == timedelta(hours=1)
        billing_start, billing_end = _utc(row["BillingPeriodStart"]), _utc(row["BillingPeriodEnd"])
        assert billing_start.weekday() == 0 and billing_end - billing_start == timedelta(days=7)
        assert billing_start <= start < end <= billing_end
        assert row["x_TrafficWeekStart"] == "2026-11-23"  # the replayed traffic's week, the file's


def test_a_row_from_the_twin_says_it_is_modelled(exported):
    _, _, rows = exported
    assert all(r["x_Backend"] == "sim" and r["ChargeDescription"].endswith("modelled by the SGLang twin, not measured")
               for r in rows)  # fmt: skip


PLAIN_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")
DECIMAL_COLUMNS = (
    "BilledCost", "ContractedCost", "ContractedUnitPrice", "ConsumedQuantity", "EffectiveCost", "ListCost",
    "ListUnitPrice", "PricingQuantity", "x_RealisedCostPerRequest", "x_ApiEquivalentCost",
)  # fmt: skip


def test_decimals_are_in_plain_notation_however_small_or_large(tmp_path):
    # A run priced at a millionth of a cent per GPU-hour: Arrow's CSV writer would print 8e-09 and the like.
    store = Warehouse(tmp_path / "wh")
    week, run_id = date(2026, 11, 30), "tiny-2026-11-30"
    records = [request(run_id, f"q{i}", 100.0, 900.0, prompt_tokens=1000, completion_tokens=120, sent_mono_s=1.0 + i)
               for i in range(5)]  # fmt: skip
    info = run_info(run_id, 3600.0, requests_total=5, requests_recorded=5, requests_ok=5)
    write_run(store.lake_root, week, "chat", info, endpoint(usd_per_gpu_hour=1e-9), records, RunContext())
    store.refresh()
    text = write_focus_week(store, week).read_text()
    [row] = list(csv.DictReader(text.splitlines()))
    assert row["BilledCost"] == "0.000000008" and row["ContractedUnitPrice"] == "0.000000001"
    assert float(row["x_RealisedCostPerRequest"]) == pytest.approx(8e-9 / 5)
    decimals = {c: row[c] for c in DECIMAL_COLUMNS}
    assert all(PLAIN_NUMBER.match(v) for v in decimals.values()), decimals
