"""A fleet plan in one line: the cheapest shape that held the target, and what each other routing policy needed
for it, from one run's fleet_plans rows at one price. The weekly report and the demo's console print the same
line. No metric math but one ratio, named in the line: the other policy's fleet $/hour against the chosen one's."""

from __future__ import annotations

from collections.abc import Sequence

from warehouse.marts.mart_rows import FleetPlanRow


def run_price_rows(rows: Sequence[FleetPlanRow]) -> list[FleetPlanRow]:
    """The rows priced as their run was, by scenario, run, policy and replicas."""
    return sorted((r for r in rows if r.run_price), key=lambda r: (r.scenario, r.run_id, r.router_policy, r.replicas))


def plan_comparison(shapes: Sequence[FleetPlanRow]) -> str:
    """'cheapest: 4 x cache_aware (32 GPUs, $64.00/h); round_robin needs 5 replicas ($80.00/h, +25%)' for one run's
    shapes at one price; 'no round_robin count tried held the target' where none did."""
    chosen = next((s for s in shapes if s.chosen), None)
    if chosen is None:
        most = max(s.replicas for s in shapes)
        return f"no shape tried (up to {most} replicas) held {shapes[0].target_rps:,.4g} req/s inside the SLO"
    shape = f"{chosen.replicas} x {chosen.router_policy}"
    text = f"cheapest: {shape} ({chosen.gpus} GPUs, ${chosen.fleet_usd_per_hour:,.2f}/h)"
    for policy in sorted({s.router_policy for s in shapes} - {chosen.router_policy}):
        holding = [s for s in shapes if s.router_policy == policy and s.holds_target]
        if not holding:
            text += f"; no {policy} count tried held the target"
            continue
        other = min(holding, key=lambda s: (s.fleet_usd_per_hour, s.replicas))
        extra_pct = (other.fleet_usd_per_hour / chosen.fleet_usd_per_hour - 1) * 100
        text += f"; {policy} needs {other.replicas} replicas (${other.fleet_usd_per_hour:,.2f}/h, {extra_pct:+.0f}%)"
    return text


def plan_comparisons(rows: Sequence[FleetPlanRow]) -> dict[tuple[str, str], str]:
    """(scenario, run_id) -> plan_comparison of that run's shapes at the run's own price."""
    runs: dict[tuple[str, str], list[FleetPlanRow]] = {}
    for row in run_price_rows(rows):
        runs.setdefault((row.scenario, row.run_id), []).append(row)
    return {key: plan_comparison(shapes) for key, shapes in runs.items()}
