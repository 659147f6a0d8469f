"""The demo's fleet-routing table: a fleet that ran twice in a week (a canary's repeats, each on new ports) reads
as its own workers, not as one worker per URL the week saw."""

from __future__ import annotations

from datetime import date

from pipelines.demo.fleet_routing import fleet_routing
from warehouse.backends.store import Warehouse
from warehouse_builders import endpoint, request, run_info, write_runs

WEEK = date(2026, 11, 23)


def test_a_two_replica_fleet_that_ran_twice_is_two_workers(tmp_path):
    store = Warehouse(tmp_path / "wh")
    runs = []
    for run, ports in (("run-a", (41001, 41002)), ("run-b", (52001, 52002))):
        records = [
            request(run, f"q{i}", 100.0, 300.0, cached_tokens=500 if i % 2 else 0,
                    worker=f"http://127.0.0.1:{ports[i % 2]}")
            for i in range(10)
        ]  # fmt: skip
        runs.append((run_info(run, 20.0, requests_total=10, requests_recorded=10, requests_ok=10), records))
    write_runs(store.lake_root, WEEK, "chat-canary", runs, endpoint())
    store.refresh()
    rows = fleet_routing(store, WEEK)
    assert [(r.worker, r.requests) for r in rows] == [("worker 0", 10), ("worker 1", 10)]
    assert [r.prefix_cache_hit_rate for r in rows] == [0.0, 0.5] and rows[0].fleet_hit_rate == 0.25
    assert sum(r.request_share for r in rows) == 1.0
