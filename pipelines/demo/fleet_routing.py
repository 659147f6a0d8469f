"""The demo's routing table: per fleet scenario and worker, the share of the week's completed requests its
router sent there and the prefix-cache hit rate each worker and the fleet realised (fleet_routing.sql)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from pathlib import Path

from warehouse.backends.store import Warehouse

_SQL = Path(__file__).with_name("fleet_routing.sql")


@dataclass(frozen=True, slots=True)
class FleetRoutingRow:
    scenario: str
    worker: str  # "worker k": its place in its run's fleet (the URLs change from run to run)
    requests: int  # completed requests it served (count)
    request_share: float  # of the scenario's completed requests that named a worker (ratio 0-1)
    prefix_cache_hit_rate: float | None  # cached / prompt tokens of its requests (ratio; None: not reported)
    fleet_hit_rate: float | None  # the same over every worker of the scenario (ratio)
    router_requests: float | None  # the router's own count for this worker, warm-up included (None: not scraped)


def fleet_routing(store: Warehouse, week: date) -> list[FleetRoutingRow]:
    with store.connect() as con:
        rows = con.execute(_SQL.read_text(), {"week": week}).fetchall()
    return [FleetRoutingRow(*row) for row in rows]
