"""Console exporter: the weekly trend table and check verdicts, printed with rich."""

from __future__ import annotations

import sys
from dataclasses import asdict

import orjson
from rich.console import Console
from rich.table import Table

from warehouse.marts.judged_metrics import REGRESSED_VERDICTS
from warehouse.marts.mart_rows import CostAttributionRow, DiagnosisRow, FleetPlanRow, WeeklyTrendRow, as_frame
from warehouse.report.fleet_plan_summary import plan_comparisons, run_price_rows
from warehouse.report.structured_output import (
    PER_STRUCTURED,
    comparison_sentence,
    comparisons,
    retries_per_structured,
    structured_rows,
)
from warehouse.report.verdict_words import what_to_do, why_in_words


def _console() -> Console:
    # Off a terminal (CI logs, pipes) rich would wrap at 80 columns; the tables need more.
    return Console() if sys.stdout.isatty() else Console(width=140)


def _fmt(value, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def _usd_1k(value) -> str:
    return "—" if value is None else f"${1000 * value:,.2f}"


def _ms(value) -> str:
    return "—" if value is None else f"{value:,.1f} ms"


def print_weekly_trends(rows: list[WeeklyTrendRow], console: Console | None = None) -> None:
    console = console or _console()
    table = Table(
        title="Weekly trends (warehouse table weekly_trends), USD per 1,000 requests: efficiency (at the SLO capacity, "
        "what the runtime costs; judged on canaries) and realised (the window's GPU cost, moves with volume too)"
    )
    for column in (
        "week",
        "scenario",
        "efficiency",
        "vs baseline",
        "realised",
        "idle",
        "p95 TTFT",
        "p95 e2e",
        "cache hit",
        "ok",
        "failed",
    ):
        table.add_column(column, justify="left" if column in ("week", "scenario") else "right")
    for row in rows:
        change = row.efficiency_cost_change_pct
        table.add_row(
            str(row.week_start),
            row.scenario,
            _usd_1k(row.efficiency_cost_per_request_usd),
            "—" if change is None else f"{change:+.1f}%",
            _usd_1k(row.realised_cost_per_request_usd),
            "overloaded" if row.load_state == "overloaded" else _usd_1k(row.idle_cost_per_request_usd),
            _fmt(row.p95_ttft_ms, ",.0f") + " ms",
            _fmt(row.p95_e2e_ms, ",.0f") + " ms",
            _fmt(row.prefix_cache_hit_rate, ".1%"),
            str(row.completed_requests),
            str(row.failed_requests),
        )
    console.print(table)
    print_structured_output(rows, console)


def print_structured_output(rows: list[WeeklyTrendRow], console: Console | None = None) -> None:
    """The weekly_trends rows with structured requests: how often answers parsed and what a valid one cost,
    with the constraint on the server or only in the prompt (nothing printed when no row has any)."""
    structured = [r for r in rows if r.structured_requests]
    if not structured:
        return
    console = console or _console()
    table = Table(title="Structured output (weekly_trends: answers validated against their response format)")
    columns = (
        "week",
        "scenario",
        "sent as",
        "valid",
        f"retries/{PER_STRUCTURED:,}",
        "realised/req",
        "realised/valid",
        "TPOT constr.",
        "TPOT other",
    )
    for column in columns:
        table.add_column(column, justify="left" if column in ("week", "scenario", "sent as") else "right", no_wrap=True)
    for row in structured:
        rate, floor = row.valid_answer_rate, row.min_valid_rate
        below = rate is not None and floor is not None and rate < floor
        table.add_row(
            str(row.week_start),
            row.scenario,
            "constraint" if row.constrained_requests else "prompt only",
            ("[red]" if below and row.constrained_requests else "") + _fmt(rate, ".1%"),
            _fmt(retries_per_structured(row.retries, row.structured_requests), ",.1f"),
            "$" + _fmt(row.realised_cost_per_request_usd, ".5f"),
            "$" + _fmt(row.usd_per_valid_request, ".5f"),
            _ms(row.tpot_constrained_ms),
            _ms(row.tpot_unconstrained_ms),
        )
    console.print(table)
    latest = max(row.week_start for row in structured)
    for pair in comparisons(structured_rows(as_frame(structured), latest)):
        console.print(f"Week of {latest}: {comparison_sentence(pair)}", highlight=False)


def _usd_per_1k(value) -> str:
    return "—" if value is None else f"{1000 * value:+.3f}"


# The runtime's levers as the console names them (cost_attribution columns), after price and traffic.
_LEVERS = (
    ("cache", "prefix_cache_usd"),
    ("batching", "batching_usd"),
    ("spec. dec.", "speculative_decoding_usd"),
    ("routing", "routing_usd"),
    ("structured", "structured_output_usd"),
)


def print_cost_attribution(rows: list[CostAttributionRow], console: Console | None = None) -> None:
    """Why the realised cost per request moved against the baseline (warehouse table cost_attribution): its parts add
    up to the change; shown per 1,000 requests so the digits are readable."""
    rows = [r for r in rows if r.change_usd is not None]
    if not rows:
        return
    console = console or _console()
    table = Table(
        title="Why the realised cost moved, USD per 1,000 requests vs baseline (warehouse table cost_attribution): "
        "price, traffic (of it the idle share) and the runtime's levers"
    )
    parts = ("change", "price", "traffic", "of it idle", "runtime", *(name for name, _ in _LEVERS), "unattributed")
    for column in ("week", "scenario", *parts):
        table.add_column(column, justify="left" if column in ("week", "scenario") else "right")
    for row in rows:
        values = (row.change_usd, row.price_usd, row.traffic_usd, row.traffic_volume_usd, row.runtime_usd,
                  *(getattr(row, column) for _, column in _LEVERS), row.unattributed_usd)  # fmt: skip
        table.add_row(str(row.week_start), row.scenario, *(_usd_per_1k(value) for value in values))
    console.print(table)


def print_diagnoses(rows: list[DiagnosisRow], console: Console | None = None) -> None:
    """Each run's four-numbers verdict (warehouse table diagnoses) with its reasons."""
    if not rows:
        return
    console = console or _console()
    table = Table(
        title="Diagnoses, last week (warehouse table diagnoses: tune the runtime, shrink the fleet, or the model)"
    )
    for column in ("scenario", "verdict", "occupancy", "hit rate", "why", "what to do"):
        table.add_column(column, justify="right" if column in ("occupancy", "hit rate") else "left")
    for row in rows:
        why = "; ".join(orjson.loads(row.reasons))
        numbers = (_fmt(row.batch_occupancy, ".2f"), _fmt(row.prefix_cache_hit_rate, ".3f"))
        table.add_row(row.scenario, row.verdict, *numbers, why, "; ".join(what_to_do([asdict(row)])))
    console.print(table)


def print_week_spend(rows: list[WeeklyTrendRow], console: Console | None = None) -> None:
    """What the last week's endpoints cost for the whole week (weekly_trends.week_spend_usd, once per endpoint: it
    repeats on each of the endpoint's scenarios), apart from what the replays held of them."""
    if not rows:
        return
    console = console or _console()
    week = max(r.week_start for r in rows)
    spend: dict[str, float] = {}
    for row in rows:
        if row.week_start == week and row.week_spend_usd is not None:
            spend[row.endpoint] = max(spend.get(row.endpoint, 0.0), row.week_spend_usd)
    if spend:
        each = ", ".join(f"{endpoint} ${usd:,.2f}" for endpoint, usd in sorted(spend.items()))
        console.print(f"GPU spend, week of {week}: ${sum(spend.values()):,.2f} ({each}; each endpoint's GPUs for the "
                      "hours a week it holds them, not the replays' minutes)")  # fmt: skip


def print_check_verdicts(verdicts: list[tuple[str, str, str, bool, str]], console: Console | None = None) -> None:
    """One line of counts per check, then every failed evaluation (passing ones add nothing to read)."""
    console = console or _console()
    by_check: dict[str, list[bool]] = {}
    for _, _, check, passed, _ in verdicts:
        by_check.setdefault(check, []).append(passed)
    summary = ", ".join(f"{check} {sum(results)}/{len(results)} passed" for check, results in sorted(by_check.items()))
    console.print(f"Asset checks: {summary or 'none ran'}")
    failed = [v for v in verdicts if not v[3]]
    if not failed:
        return
    table = Table(title="Failed asset checks")
    for column in ("week", "scenario", "check", "severity"):
        table.add_column(column)
    for week, scenario, check, _, severity in failed:
        table.add_row(week, scenario, f"[red]{check}[/]", severity)
    console.print(table)


def print_regression_verdicts(rows: list[WeeklyTrendRow], console: Console | None = None) -> None:
    """Every week that was not plainly ok, with the reasons weekly_trends gives."""
    console = console or _console()
    # Live rows are not judged (their traffic moved too): only canary verdicts are flagged.
    flagged = [r for r in rows if r.regression_verdict not in ("ok", "no_baseline", "not_judged")]
    if not flagged:
        console.print("Regression verdicts: every week ok against its baseline.")
        return
    table = Table(title="Regression verdicts (weekly_trends.regression_verdict)")
    for column in ("week", "scenario", "verdict", "why"):
        table.add_column(column)
    for row in flagged:
        colour = "red" if row.regression_verdict in REGRESSED_VERDICTS else "yellow"
        why = why_in_words(asdict(row))  # the words the report's first screen uses
        table.add_row(str(row.week_start), row.scenario, f"[{colour}]{row.regression_verdict}[/]", why)
    console.print(table)


def print_fleet_routing(rows, policies: dict[str, str], console: Console | None = None) -> None:
    """Per fleet scenario (rows: pipelines/demo/fleet_routing.FleetRoutingRow), its router's policy, each worker's
    share of the completed requests and hit rate, and the fleet's hit rate (nothing printed without a fleet)."""
    if not rows:
        return
    console = console or _console()
    table = Table(title="Fleet routing, last week (requests.worker, server_samples role router)")
    for column in ("scenario", "router", "worker", "requests", "share", "router count", "hit rate", "fleet hit"):
        table.add_column(column, justify="left" if column in ("scenario", "router", "worker") else "right")
    for row in rows:
        table.add_row(
            row.scenario,
            policies.get(row.scenario, "—"),
            row.worker,
            str(row.requests),
            f"{row.request_share:.1%}",
            _fmt(row.router_requests, ",.0f"),
            _fmt(row.prefix_cache_hit_rate, ".1%"),
            _fmt(row.fleet_hit_rate, ".1%"),
        )
    console.print(table)


def print_fleet_plans(rows: list[FleetPlanRow], console: Console | None = None) -> None:
    """One week's fleet plans at each run's own price: every shape tried, and per scenario the cheapest shape
    holding the target beside what the other policy needs (nothing printed without a plan)."""
    if not rows:
        return
    console = console or _console()
    table = Table(title="Fleet plan, last week (warehouse table fleet_plans; each shape one replay at the target rate)")
    for column in ("scenario", "router", "workers", "GPUs", "holds", "in SLO", "p95 TTFT", "hit rate", "fleet $/h",
                   "$/request", "capacity"):  # fmt: skip
        table.add_column(column, justify="left" if column in ("scenario", "router", "holds") else "right")
    for r in run_price_rows(rows):
        table.add_row(
            r.scenario,
            r.router_policy + (" (chosen)" if r.chosen else ""),
            r.workers,
            str(r.gpus),
            "yes" if r.holds_target else "no",
            f"{r.good_share:.1%}",
            _ms(r.p95_ttft_ms),
            f"{r.hit_rate:.1%}",
            f"{r.fleet_usd_per_hour:,.2f}",
            f"{r.usd_per_request_at_target:.5f}",
            _fmt(r.capacity_rps_at_slo, ".3g"),
        )
    console.print(table)
    for (scenario, _), line in plan_comparisons(rows).items():
        console.print(f"{scenario}: {line}")
