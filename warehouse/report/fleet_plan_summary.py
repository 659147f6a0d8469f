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
    shapes at one price, with the cheapest disaggregated shape of each decode kind (the endpoint's, each wide EP
    width) where the plan tried some; 'no round_robin count tried held the target' where none did."""
    chosen = next((s for s in shapes if s.chosen), None)
    if chosen is None:
        most = max(s.replicas for s in shapes)
        return f"no shape tried (up to {most} workers) held {shapes[0].target_rps:,.4g} req/s inside the SLO"
    text = f"cheapest: {chosen.label} ({chosen.gpus} GPUs, ${chosen.fleet_usd_per_hour:,.2f}/h)"
    aggregated = [s for s in shapes if not s.prefill_workers]
    others = {s.router_policy for s in aggregated} - ({chosen.router_policy} if not chosen.prefill_workers else set())
    for policy in sorted(others):
        holding = [s for s in aggregated if s.router_policy == policy and s.holds_target]
        if not holding:
            text += f"; no {policy} count tried held the target"
            continue
        other = min(holding, key=lambda s: (s.fleet_usd_per_hour, s.replicas))
        text += f"; {policy} needs {other.replicas} replicas ({_against(other, chosen)})"
    # Each family of disaggregated shapes (the endpoint's kind of decode worker, and each wide EP width) the chosen
    # shape is not from: its cheapest that held, against the chosen.
    for width in sorted({s.decode_ep_size for s in shapes if s.prefill_workers}):
        if chosen.prefill_workers and chosen.decode_ep_size == width:
            continue
        family = "disaggregated" + (f" with EP{width} decode" if width else "")
        holding = [s for s in shapes if s.prefill_workers and s.decode_ep_size == width and s.holds_target]
        if holding:
            other = min(holding, key=lambda s: (s.fleet_usd_per_hour, s.prefill_workers))
            text += f"; {family}, {other.label} ({_against(other, chosen)})"
        else:
            text += f"; no {family} shape tried held the target"
    return text


def _against(other: FleetPlanRow, chosen: FleetPlanRow) -> str:
    extra_pct = (other.fleet_usd_per_hour / chosen.fleet_usd_per_hour - 1) * 100
    return f"${other.fleet_usd_per_hour:,.2f}/h, {extra_pct:+.0f}%"


def plan_comparisons(rows: Sequence[FleetPlanRow]) -> dict[tuple[str, str], str]:
    """(scenario, run_id) -> plan_comparison of that run's shapes at the run's own price."""
    runs: dict[tuple[str, str], list[FleetPlanRow]] = {}
    for row in run_price_rows(rows):
        runs.setdefault((row.scenario, row.run_id), []).append(row)
    return {key: plan_comparison(shapes) for key, shapes in runs.items()}
