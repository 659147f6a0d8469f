"""The fleet plan in words: per scenario, the cheapest shape that holds the target and what the other routing
policy needs for it, from fleet_plans rows at the run's own price (no metric math: every figure is a column)."""

from __future__ import annotations

from collections.abc import Sequence

from warehouse.marts.mart_rows import FleetPlanRow


def run_price_rows(rows: Sequence[FleetPlanRow]) -> list[FleetPlanRow]:
    """The rows priced as their run was, by scenario, policy and replicas."""
    return sorted((r for r in rows if r.run_price), key=lambda r: (r.scenario, r.run_id, r.router_policy, r.replicas))


def plan_sentences(rows: Sequence[FleetPlanRow]) -> dict[str, str]:
    """scenario -> 'cheapest: 4 x cache_aware (32 GPUs, $112.00/h at h200-reserved); round_robin needs 5 ($140.00/h,
    +25%)', from the rows at the run's own price."""
    sentences: dict[str, str] = {}
    by_scenario: dict[str, list[FleetPlanRow]] = {}
    for row in run_price_rows(rows):
        by_scenario.setdefault(row.scenario, []).append(row)
    for scenario, plan in by_scenario.items():
        target = f"{plan[0].target_rps:g} requests/s"
        chosen = next((r for r in plan if r.chosen), None)
        if chosen is None:
            tried = max(r.replicas for r in plan)
            sentences[scenario] = f"no shape tried (up to {tried} replicas) held {target} inside the SLO"
            continue
        text = (f"{target}: cheapest {chosen.replicas} x {chosen.router_policy} ({chosen.gpus} GPUs, "
                f"${chosen.fleet_usd_per_hour:,.2f}/h at {chosen.price_book}, ${chosen.usd_per_request_at_target:.5f} "
                "a request)")  # fmt: skip
        for policy in sorted({r.router_policy for r in plan} - {chosen.router_policy}):
            holding = [r for r in plan if r.router_policy == policy and r.holds_target]
            if not holding:
                most = max(r.replicas for r in plan if r.router_policy == policy)
                text += f"; {policy} did not hold it with up to {most} replicas"
                continue
            fewest = min(holding, key=lambda r: r.replicas)
            extra = fewest.fleet_usd_per_hour / chosen.fleet_usd_per_hour - 1
            text += (f"; {policy} needs {fewest.replicas} (${fewest.fleet_usd_per_hour:,.2f}/h, {extra:+.0%})"
                     if extra else f"; {policy} holds it with as many")  # fmt: skip
        sentences[scenario] = text
    return sentences
