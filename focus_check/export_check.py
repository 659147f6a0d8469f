"""costbench's FOCUS export checked by the FinOps Foundation's own validator (docs/warehouse.md, "The FOCUS export").

    make focus-check        # builds build/focus-venv once (focus_check/requirements.txt), then runs this
    python focus_check/export_check.py --focus-venv build/focus-venv [--warehouse warehouse] [--week 2026-11-30]

1. A warehouse of real replays, in a temporary folder: the first requests of three scenarios of
   workloads/scenarios.yaml (two on the chat fleet, one on R1), each replayed on its endpoint's twin on a virtual
   clock (endpoints/virtual_twin.py), written to the lake and refreshed as the weekly job does. With --warehouse,
   an existing one instead (the demo's: `warehouse`), read only.
2. The week's FOCUS export, written by warehouse/report/focus_export.py as the weekly_report asset writes it.
3. focus-validator (focus_check/validator_verdict.py) on it: FOCUS 1.2, the rules bundled in its package
   (--block-download), CLAIMED_CRITERIA's provider features claimed. A failed rule fails the check.
4. A negative control: the same rows, written by the same writer, with every row's ChargeCategory not one of
   FOCUS's values and the first row's ContractedUnitPrice negative. The validator must fail it on both columns'
   rules; if it does not, the check could not have failed the export, and itself fails.

Exits 0 when the export passes and the control fails, 1 otherwise; prints each run's counts and any failing rule
with what FOCUS asks of it."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Awaitable
from dataclasses import replace
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import orjson
import pyarrow as pa
from validator_verdict import FOCUS_VERSION, Validator, Verdict, judge, must_satisfy, read_report

from common.run_folder import SERVER_FACTS_FILE
from endpoints.running_endpoint import RunningEndpoint
from endpoints.spec import EndpointSpec, load_endpoint_specs
from endpoints.virtual_twin import VirtualTime, replay_on_virtual_twin
from replay.recording.records import RunInfo
from replay.recording.requests_reader import read_requests
from replay.runner import run_replay_async
from replay.scenario_config import replay_config_for
from warehouse.backends.store import Warehouse
from warehouse.marts.run_rows import RunContext, build_run_row
from warehouse.report.focus_export import focus_csv, focus_rows, write_focus_week
from workloads.scenario_workload import scenario_workload
from workloads.scenarios import Scenario, default_endpoints_path, default_scenarios_path, load_scenarios
from workloads.weekly_traffic import week_traffic

REPO = Path(__file__).resolve().parents[1]
# Two endpoints, one of them with two scenarios: the export's rows are per endpoint, its runs pooled.
SCENARIOS = ("chat-v3-h200", "chat-v3-h200-canary", "reasoning-r1-h200-canary")
MAX_REQUESTS = 40  # of each scenario's window: a few seconds of CPU each
# The provider features (the FOCUS model's applicability criteria) the export has, so the validator checks their
# columns too: BillingAccountName; ResourceType; ContractedUnitPrice apart from the list price; GPUs billed as held,
# not per call. Not claimed, though the export has their columns, as focus-validator 2.2.1 then asks for columns
# FOCUS does not: USAGE_MEASUREMENT_SUPPORTED (its ConsumedQuantity rules read CommitmentDiscountStatus, a column of
# commitment discounts, and error without it) and UNIT_PRICING_SUPPORTED or PUBLIC_PRICE_LIST_SUPPORTED (a rule under
# two criteria applies with either, so SkuPriceDetails and the virtual-currency PricingCurrency* columns become
# mandatory). A claimed feature whose columns the export drops fails the check.
CLAIMED_CRITERIA = (
    "ACCOUNT_NAMING_SUPPORTED",
    "RESOURCE_TYPE_ASSIGNMENT_SUPPORTED",
    "NEGOTIATED_PRICING_SUPPORTED",
    "BILLING_BASED_ON_PROVISIONED_RESOURCES_SUPPORTED",
)
# The control's faults, and the columns whose rules must then fail: every row's ChargeCategory not one of FOCUS's
# values (Usage, Purchase, Tax, Credit, Adjustment), and the first row's ContractedUnitPrice negative. Every row's,
# for the first: focus-validator 2.2.1 checks allowed values as an OR over the whole file, so a bad value passes
# while another row holds an allowed one.
BAD_CHARGE_CATEGORY = "Consumption"
BAD_UNIT_PRICE = -1.0
BROKEN_COLUMNS = ("ChargeCategory", "ContractedUnitPrice")


def replayed_warehouse(root: Path, week: date) -> Warehouse:
    """A warehouse at `root` holding the replays of SCENARIOS in the week of `week`, refreshed."""
    specs = load_endpoint_specs(default_endpoints_path())
    scenarios = load_scenarios(default_scenarios_path(), REPO, specs)
    store = Warehouse(root / "warehouse")
    for name in SCENARIOS:
        scenario, spec = scenarios[name], specs[scenarios[name].endpoint]
        run_dir = root / "runs" / f"{name}-{week.isoformat()}"
        info = replayed_run(scenario, spec, week, root / "workloads", run_dir)
        run_row = build_run_row(info, spec, name, week, RunContext.of_scenario(scenario))
        store.write_partition("runs", week, name, run_row)
        store.write_partition("requests", week, name, read_requests(run_dir / "replay"))
        print(f"replayed {name} on {spec.name} (twin, virtual clock): {info.requests_ok}/{info.requests_total} ok")
    store.refresh()
    return store


def replayed_run(scenario: Scenario, spec: EndpointSpec, week: date, workloads_dir: Path, run_dir: Path) -> RunInfo:
    """The first MAX_REQUESTS of the scenario's window of the week, replayed on its twin; what the run recorded, with
    the served configuration's fingerprint, as the replay step's finish_replay records it."""
    traffic = week_traffic(scenario, week, workloads_dir)
    workload = scenario_workload(scenario, traffic)

    def replay(endpoint: RunningEndpoint, clock: VirtualTime) -> Awaitable[RunInfo]:
        config = replay_config_for(scenario, traffic, url=endpoint.url, api_key_env=None, run_id=run_dir.name)
        config = replace(config, max_requests=MAX_REQUESTS)
        return run_replay_async(workload, config, run_dir / "replay", clock, exchange=endpoint.exchange)

    info = replay_on_virtual_twin(spec, run_dir, run_dir.name, scenario.cold_start, replay)
    facts = orjson.loads((run_dir / SERVER_FACTS_FILE).read_bytes())
    return replace(info, config_fingerprint=facts.get("config_fingerprint"))


def broken_rows(table: pa.Table) -> pa.Table:
    """`table` with the control's faults."""
    prices = table.column("ContractedUnitPrice").to_pylist()
    prices[0] = BAD_UNIT_PRICE
    for column, values in (("ChargeCategory", [BAD_CHARGE_CATEGORY] * table.num_rows), ("ContractedUnitPrice", prices)):
        index = table.column_names.index(column)
        table = table.set_column(index, column, pa.array(values, table.schema.field(column).type))
    return table


def validated(validator: Validator, model: dict, data_file: Path) -> Verdict:
    started = time.monotonic()
    report = data_file.with_suffix(".junit.xml")
    validator.run(data_file, report, CLAIMED_CRITERIA)
    verdict = judge(read_report(report), model)
    print(f"  {data_file.name}: {verdict.summary()} ({time.monotonic() - started:.1f} s)")
    for rule_id in verdict.failing:
        print(f"    {rule_id} {verdict.statuses[rule_id]}: {must_satisfy(model, rule_id)}")
    return verdict


def this_weeks_monday() -> date:
    today = datetime.now(timezone.utc).date()
    return today - timedelta(days=today.weekday())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--focus-venv", type=Path, required=True, help="focus-validator's environment")
    parser.add_argument("--warehouse", type=Path, help="check this warehouse's export instead of replaying")
    parser.add_argument("--week", type=date.fromisoformat, help="its traffic week (default: its latest)")
    args = parser.parse_args()
    validator = Validator.of_venv(args.focus_venv)
    model = validator.model()
    details = model.get("Details", {})
    print(f"focus-validator {validator.version}: FOCUS {FOCUS_VERSION} (model {details.get('ModelVersion')}, "
          f"bundled; --block-download)")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="costbench-focus-") as tmp:
        work = Path(tmp)
        started = time.monotonic()
        if args.warehouse is None:
            week = args.week or this_weeks_monday()
            store = replayed_warehouse(work, week)
        else:
            store = Warehouse(args.warehouse)
            week = args.week or max(row.week_start for row in store.run_summary())
        export = write_focus_week(store, week, work)
        rows = focus_rows(store, week)
        print(f"{export.name}: {rows.num_rows} rows ({time.monotonic() - started:.1f} s)")
        if rows.num_rows == 0:
            print(f"the week of {week} has no runs: nothing to check")
            return 1
        control = work / f"control_{export.name}"
        control.write_text(focus_csv(broken_rows(rows)), encoding="utf-8")
        verdict = validated(validator, model, export)
        caught = validated(validator, model, control)
    flagged = {column for column in BROKEN_COLUMNS if any(r.startswith(f"{column}-") for r in caught.failing)}
    if verdict.ok and flagged == set(BROKEN_COLUMNS):
        print(f"FOCUS {FOCUS_VERSION}: the export passes; the broken control fails on {', '.join(BROKEN_COLUMNS)}")
        return 0
    if not verdict.ok:
        print(f"FOCUS {FOCUS_VERSION}: the export fails {len(verdict.failing)} rule(s)")
    if flagged != set(BROKEN_COLUMNS):
        missed = ", ".join(c for c in BROKEN_COLUMNS if c not in flagged)
        print(f"the control passed {missed}'s rules: this check could not have failed the export on them")
    return 1


if __name__ == "__main__":
    sys.exit(main())
