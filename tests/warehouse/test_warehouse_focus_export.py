"""The FOCUS export (warehouse/report/focus_export.py): a week's GPU spend as FOCUS 1.2 cost and usage rows in a CSV a
FinOps tool reads. A row per endpoint bills its GPUs for the whole week (run_summary.week_spend_usd), never the
replayed minutes, which ride along in x_ columns beside the tokens; the periods are the week, ISO 8601 in UTC; every
column is FOCUS's or x_-prefixed, and the rows of another week stay out."""

from __future__ import annotations

import csv
import re
from datetime import date

import pyarrow as pa
import pyarrow.csv as pcsv
import pytest

from warehouse.backends.store import Warehouse
from warehouse.marts.run_rows import RunContext
from warehouse.report.focus_export import CUSTOM_COLUMNS, FOCUS_COLUMNS, write_focus_week
from warehouse_builders import endpoint, request, run_info, write_run

WEEKS = (date(2026, 11, 16), date(2026, 11, 23))
# The chat endpoint (8 GPUs at $2/h, around the clock) carries two scenarios; the reasoning one (16 GPUs) is held
# 40 hours a week.
CHAT, REASONING = endpoint(), endpoint(name="r1-16xh200", gpu_count=16, hours_per_week=40.0)
SCENARIOS = (("chat", CHAT, None), ("chat-canary", CHAT, None), ("reasoning", REASONING, 40))
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
        for scenario, spec, reasoning in SCENARIOS:
            run_id = f"{scenario}-{week.isoformat()}"
            records = [
                request(run_id, f"q{i}", 100.0, 900.0, prompt_tokens=1000 + i, cached_tokens=400, completion_tokens=120,
                        reasoning_tokens=reasoning, sent_mono_s=1.0 + i)
                for i in range(5)
            ] + [request(run_id, "warm", 100.0, 900.0, is_warmup=True, sent_mono_s=0.1)]  # fmt: skip
            info = run_info(run_id, 3600.0, requests_total=6, requests_recorded=6, requests_ok=6)
            write_run(store.lake_root, week, scenario, info, spec, records, RunContext(slo_ttft_ms=1000.0))
    store.refresh()
    path = write_focus_week(store, WEEKS[1])
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    return store, path, {row["ResourceId"]: row for row in rows}


def test_one_usage_row_per_endpoint_of_the_week_and_only_that_week(exported):
    _, path, rows = exported
    assert path.name == "focus_week=2026-11-23.csv"
    assert sorted(rows) == ["r1-16xh200", "v3-8xh200"]  # the chat endpoint's two scenarios are one fleet, one bill
    assert rows["v3-8xh200"]["x_Scenarios"] == "chat,chat-canary"
    assert rows["v3-8xh200"]["x_RunIds"] == "chat-2026-11-23,chat-canary-2026-11-23"
    assert {r["ChargeCategory"] for r in rows.values()} == {"Usage"}
    assert {r["BillingCurrency"] for r in rows.values()} == {"USD"}


def test_every_column_is_focus_s_or_x_prefixed_and_the_mandatory_ones_are_there(exported):
    _, path, rows = exported
    header = path.read_text().splitlines()[0].replace('"', "").split(",")
    assert tuple(header) == FOCUS_COLUMNS + CUSTOM_COLUMNS
    assert FOCUS_MANDATORY <= set(header)
    assert all(c.startswith("x_") for c in CUSTOM_COLUMNS) and not any(c.startswith("x_") for c in FOCUS_COLUMNS)
    for row in rows.values():  # a mandatory column is null only where FOCUS allows it (ChargeClass: not a correction)
        assert all(row[c] != "" for c in FOCUS_MANDATORY - {"ChargeClass"}), row


def test_the_bill_is_the_week_s_spend_not_the_replayed_minutes(exported):
    store, _, rows = exported
    chat, reasoning = rows["v3-8xh200"], rows["r1-16xh200"]
    # 8 GPUs x $2 x 168 h; 16 GPUs x $2 x 40 h: whatever the two one-hour replays of the chat fleet cost ($32).
    assert (float(chat["BilledCost"]), float(reasoning["BilledCost"])) == (2688.0, 1280.0)
    spend = {(t.endpoint, t.scenario): t.week_spend_usd for t in store.weekly_trends() if t.week_start == WEEKS[1]}
    assert spend == {("v3-8xh200", "chat"): 2688.0, ("v3-8xh200", "chat-canary"): 2688.0,
                     ("r1-16xh200", "reasoning"): 1280.0}  # fmt: skip
    for row in (chat, reasoning):
        assert float(row["EffectiveCost"]) == float(row["ContractedCost"]) == float(row["BilledCost"])
        quantity = float(row["PricingQuantity"])  # GPU-hours
        assert float(row["ContractedCost"]) == pytest.approx(float(row["ContractedUnitPrice"]) * quantity)
        assert float(row["ListCost"]) == pytest.approx(float(row["ListUnitPrice"]) * quantity)
        assert row["PricingUnit"] == row["ConsumedUnit"] == "GPU-Hours" and float(row["ConsumedQuantity"]) == quantity
        assert row["SkuId"] == "H200-gpu-hour" and row["SkuPriceId"] == "endpoint:H200"
    assert (float(chat["PricingQuantity"]), float(reasoning["PricingQuantity"])) == (1344.0, 640.0)  # GPU-hours
    assert (float(chat["x_HoursPerWeek"]), float(reasoning["x_HoursPerWeek"])) == (168.0, 40.0)


def test_what_the_replays_measured_rides_along(exported):
    store, _, rows = exported
    chat = rows["v3-8xh200"]
    summary = [r for r in store.run_summary() if r.week_start == WEEKS[1] and r.endpoint == "v3-8xh200"]
    assert float(chat["x_ReplayGpuHours"]) == pytest.approx(16.0)  # two one-hour windows of 8 GPUs
    assert float(chat["x_ReplayCost"]) == pytest.approx(sum(r.run_cost_usd for r in summary)) == pytest.approx(32.0)
    assert int(chat["x_CompletedRequests"]) == 10
    assert float(chat["x_RealisedCostPerRequest"]) == pytest.approx(32.0 / 10)
    assert float(chat["x_ApiEquivalentCost"]) == pytest.approx(sum(r.api_cost_usd for r in summary))


def test_tokens_are_the_completed_requests_by_kind_warm_up_left_out(exported):
    _, _, rows = exported
    chat, reasoning = rows["v3-8xh200"], rows["r1-16xh200"]
    assert int(chat["x_InputTokens"]) == 2 * sum(1000 + i for i in range(5))  # both scenarios of the endpoint
    assert int(chat["x_CachedInputTokens"]) == 2 * 5 * 400 and int(chat["x_OutputTokens"]) == 2 * 5 * 120
    assert (int(chat["x_ReasoningTokens"]), int(reasoning["x_ReasoningTokens"])) == (0, 5 * 40)


def test_the_charge_and_billing_periods_are_the_traffic_week_in_utc(exported):
    _, _, rows = exported
    for row in rows.values():
        assert all(ISO_UTC.match(row[c]) for c in ("ChargePeriodStart", "ChargePeriodEnd", "BillingPeriodStart",
                                                   "BillingPeriodEnd"))  # fmt: skip
        assert row["ChargePeriodStart"] == row["BillingPeriodStart"] == "2026-11-23T00:00:00Z"  # a Monday
        assert row["ChargePeriodEnd"] == row["BillingPeriodEnd"] == "2026-11-30T00:00:00Z"
        assert row["x_TrafficWeekStart"] == "2026-11-23"


def test_a_row_from_the_twin_says_its_replays_are_modelled(exported):
    _, _, rows = exported
    assert all(r["x_Backend"] == "sim" and r["ChargeDescription"].endswith("modelled by the SGLang twin, not measured")
               for r in rows.values())  # fmt: skip
    assert rows["r1-16xh200"]["ChargeDescription"].startswith("640.00 GPU-hours: 16 x H200 (1 replica(s)) held 40 h")


def test_the_provider_issues_the_bill_and_no_invoice(exported):
    # FOCUS reads an issuer other than the provider as a third party paid instead (a marketplace): BilledCost 0.
    _, path, rows = exported
    assert all(r["InvoiceIssuerName"] == r["ProviderName"] == "self-hosted" for r in rows.values())
    # An empty field, which a CSV reader takes as null; a quoted "" would be an empty string.
    options = pcsv.ConvertOptions(
        column_types={"InvoiceId": pa.string()}, strings_can_be_null=True, quoted_strings_can_be_null=False
    )
    invoice_ids = pcsv.read_csv(path, convert_options=options).column("InvoiceId")
    assert invoice_ids.null_count == len(invoice_ids) == len(rows)


PLAIN_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")
DECIMAL_COLUMNS = (
    "BilledCost", "ContractedCost", "ContractedUnitPrice", "ConsumedQuantity", "EffectiveCost", "ListCost",
    "ListUnitPrice", "PricingQuantity", "x_ReplayCost", "x_RealisedCostPerRequest", "x_ApiEquivalentCost",
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
    assert row["ContractedUnitPrice"] == "0.000000001"
    assert row["BilledCost"].startswith("0.000001344") and float(row["BilledCost"]) == pytest.approx(8 * 168 * 1e-9)
    assert row["x_ReplayCost"] == "0.000000008" and float(row["x_RealisedCostPerRequest"]) == pytest.approx(8e-9 / 5)
    decimals = {c: row[c] for c in DECIMAL_COLUMNS}
    assert all(PLAIN_NUMBER.match(v) for v in decimals.values()), decimals
