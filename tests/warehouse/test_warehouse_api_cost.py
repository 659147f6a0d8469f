"""The API-equivalent cost applies the API's own prefix cache to the traffic: turning the endpoint's cache off
makes self-hosting dearer against the API, never the API dearer to match."""

from __future__ import annotations

from datetime import date

import pytest

from warehouse.backends.store import Warehouse
from warehouse.marts.run_rows import RunContext
from warehouse_builders import endpoint, request, run_info, write_run

WEEK = date(2026, 11, 16)
# deepseek-chat (warehouse/prices.yaml), USD per million tokens
CACHED, UNCACHED, OUTPUT = 0.07, 0.27, 1.10


def _run(store: Warehouse, scenario: str, cached: int, reuse: float | None) -> None:
    run_id = f"{scenario}-run"
    records = [request(run_id, f"q{i}", 100.0, 300.0, prompt_tokens=1000, cached_tokens=cached,
                       completion_tokens=100) for i in range(10)]  # fmt: skip
    info = run_info(run_id, 20.0, requests_total=10, requests_recorded=10, requests_ok=10)
    write_run(store.lake_root, WEEK, scenario, info, endpoint(), records, RunContext(prefix_reuse_share=reuse))


def test_the_api_bills_the_traffics_reuse_whatever_the_endpoints_cache_realised(tmp_path):
    store = Warehouse(tmp_path / "wh")
    _run(store, "cache-on", cached=500, reuse=0.6)
    _run(store, "cache-off", cached=0, reuse=0.6)  # the same traffic, the endpoint's radix cache off
    _run(store, "unrecorded", cached=500, reuse=None)  # no offered reuse recorded: the endpoint's own hits
    store.refresh()
    rows = {r.scenario: r for r in store.run_summary()}
    per_request = (600 * CACHED + 400 * UNCACHED + 100 * OUTPUT) / 1e6
    assert rows["cache-on"].api_cost_per_request_usd == pytest.approx(per_request)
    assert rows["cache-off"].api_cost_per_request_usd == pytest.approx(per_request)
    assert rows["unrecorded"].api_cost_per_request_usd == pytest.approx(
        (500 * CACHED + 500 * UNCACHED + 100 * OUTPUT) / 1e6
    )
