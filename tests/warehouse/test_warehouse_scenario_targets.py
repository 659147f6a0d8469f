"""A scenario's target_rps and budget_usd_per_request, from scenarios.yaml to run_summary, diagnoses
and the weekly report: the documented keys do what docs/workloads.md says (fleet sizing, the budget verdict)."""

from __future__ import annotations

import json
from datetime import date

import pytest
import yaml

from warehouse.backends.store import Warehouse
from warehouse.marts.mart_rows import MartRow
from warehouse.marts.run_rows import RunContext
from warehouse.report.weekly_report import write_weekly_report
from warehouse_builders import endpoint, request, run_info, server_sample, write_run
from workloads.scenarios import load_scenarios

WEEK = date(2026, 11, 16)
BASE = {
    "trace": "workloads/traces/mooncake_conversation.jsonl",
    "format": "mooncake",
    "start_s": 0,
    "duration_s": 30,
    "speedup": 1,
    "endpoint": "v3-8xh200",
    "slo": {"ttft_ms": 1000, "tpot_ms": 100},
}
SCENARIOS = [
    # 40 requests in a 30 s window at $2/GPU-hour on 8 GPUs: $0.1333 / 40 = $0.00333 a request.
    {**BASE, "name": "sized", "target_rps": 10, "budget_usd_per_request": 0.01},
    {**BASE, "name": "tight", "budget_usd_per_request": 0.001},
    {**BASE, "name": "plain"},
]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("targets")
    path = root / "scenarios.yaml"
    path.write_text(yaml.safe_dump({"scenarios": SCENARIOS}))
    scenarios = load_scenarios(path, root)
    store = Warehouse(root / "wh")
    for name, scenario in scenarios.items():
        run_id = f"{name}-1"
        records = [request(run_id, f"q{i}", 200.0, 2000.0, sent_mono_s=1 + i * 0.5) for i in range(40)]
        info = run_info(run_id, 30.0, requests_total=40, requests_recorded=40, requests_ok=40,
                        server_info={"version": "0.5.4", "tp_size": 8, "max_running_requests": 10})  # fmt: skip
        # The same function the runs_lake asset uses: what the scenario says about its runs.
        context = RunContext.of_scenario(scenario, prefix_reuse_share=None)
        samples = [server_sample(run_id, at_s, m, v) for at_s in (0.5, 10, 20, 29)
                   for m, v in (("sglang:num_running_reqs", 8.0), ("sglang:token_usage", 0.8))]  # fmt: skip
        write_run(store.lake_root, WEEK, name, info, endpoint(), records, context, server_samples=samples)
    store.refresh()
    return store


def _by_scenario(rows: list[MartRow]) -> dict[str, MartRow]:
    return {row.scenario: row for row in rows}


def test_target_rps_sizes_the_fleet(store):
    rows = _by_scenario(store.run_summary())
    sized = rows["sized"]
    assert sized.target_rps == 10.0
    # 40 requests inside the SLO over the 30 s window: 4/3 req/s a replica; 10 req/s needs 8 replicas.
    assert sized.goodput_rps == pytest.approx(40 / 30)
    assert sized.replicas_for_target == 8
    assert sized.fleet_usd_per_hour == pytest.approx(8 * 8 * 2.0)
    assert rows["plain"].target_rps is None and rows["plain"].replicas_for_target is None


def test_the_scenario_budget_decides_the_verdict(store):
    rows = _by_scenario(store.run_summary())
    assert rows["sized"].realised_cost_per_request_usd == pytest.approx(8 * 2.0 * 30 / 3600 / 40)
    found = _by_scenario(store.diagnoses())
    assert found["sized"].verdict == "healthy"
    assert found["sized"].budget_usd_per_request == pytest.approx(0.01)
    assert json.loads(found["sized"].reasons) == [
        "realised cost per request (no capacity known) 0.00333333 USD is within the scenario budget of 0.01 USD"
    ]
    assert found["tight"].verdict == "model_candidate"
    assert (
        json.loads(found["tight"].reasons)[0]
        == "realised cost per request (no capacity known) 0.00333333 USD is above the scenario budget of 0.001 USD"
    )
    # Without a budget the same run is judged against the API's price for the same tokens.
    assert found["plain"].budget_usd_per_request == pytest.approx(rows["plain"].api_cost_per_request_usd)
    assert "the API-equivalent cost of" in json.loads(found["plain"].reasons)[0]


def test_the_report_shows_the_fleet_and_the_budget(store, tmp_path):
    page = write_weekly_report(store, WEEK, tmp_path).html_path.read_text()
    fleet = page[page.index("<h2>Fleet sizing and budget</h2>") :]
    assert (
        "<td>sized</td><td>v3-8xh200</td><td>sized-1</td><td>10 req/s</td><td>1.333 req/s</td><td>8 (goodput)</td><td>$128.00</td>"
        in fleet
    )
    assert "<td>tight</td>" in fleet and "<td>$0.00100</td>" in fleet
    assert "<td>plain</td>" not in fleet  # sets neither
    assert "within the scenario budget of 0.01 USD" in page and "above the scenario budget of 0.001 USD" in page
