"""Asset checks built on the Great Expectations suites of warehouse/quality.py.

Data-quality failures on requests are ERROR and block the marts; a quarantined or missing lake file fails its week
(ERROR, blocking the report: the week's marts lack that file); a fleet that lost a worker or its router mid-run
warns, as a cost regression does; a constrained scenario's answers parsing below its threshold fails the week
(ERROR) without blocking the report."""

from collections.abc import Callable

import dagster as dg

from assets.partitions import WeekScenario
from assets.resources import WarehouseResource
from assets.trend_assets import (
    partition_missing_rows,
    partition_quarantine_rows,
    partition_run_rows,
    partition_trend_rows,
)
from warehouse.marts.mart_rows import as_frame
from warehouse.quality import (
    QualityResult,
    check_fleet,
    check_lake_quarantine,
    check_requests,
    check_runs,
    check_structured_output,
    check_weekly_trends,
)
from workloads.scenarios import DEFAULT_MAX_SCHEDULE_LAG_P99_MS


def _result(result: QualityResult, severity: dg.AssetCheckSeverity) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        passed=result.success,
        severity=severity,
        metadata={
            "evaluated_expectations": result.evaluated,
            "failed_expectations": len(result.failures),
            "failures": dg.MetadataValue.json([failure.to_dict() for failure in result.failures]),
        },
    )


def build_quality_checks(
    partitions: dg.PartitionsDefinition,
    lag_bound_of: Callable[[str], float] = lambda _scenario: DEFAULT_MAX_SCHEDULE_LAG_P99_MS,
) -> list[dg.AssetChecksDefinition]:
    """`lag_bound_of(scenario name)`: the schedule lag p99 its runs may have (ms; default: the scenarios' default)."""

    @dg.asset_check(
        asset="requests_lake",
        partitions_def=partitions,
        blocking=True,
        description="GE suite: request records are well-formed (counts, cached <= prompt, timing order).",
    )
    def requests_quality(context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource) -> dg.AssetCheckResult:
        part = WeekScenario.of(context)
        table = warehouse.warehouse().read_partition("requests", part.week_start, part.scenario)
        return _result(check_requests(table.to_pandas()), dg.AssetCheckSeverity.ERROR)

    @dg.asset_check(
        asset="weekly_trends",
        partitions_def=partitions,
        blocking=True,
        description="GE suite: the runs are trustworthy (completion rate, schedule lag p99 within the scenario's "
        "max_schedule_lag_p99_ms, server samples present).",
    )
    def runs_quality(context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource) -> dg.AssetCheckResult:
        part = WeekScenario.of(context)
        rows = partition_run_rows(warehouse.warehouse(), part)
        bound_ms = lag_bound_of(part.scenario)
        return _result(check_runs(as_frame(rows), max_schedule_lag_p99_ms=bound_ms), dg.AssetCheckSeverity.ERROR)

    @dg.asset_check(
        asset="weekly_trends",
        partitions_def=partitions,
        description="GE suite: no run's fleet lost a worker or its router for part of the measured window (the probes' "
        "answered scrapes, warehouse/marts/fleet_health.py); the run, the worker, when and for how long are in the "
        "metadata. Not blocking: the week is reported, with the run flagged degraded.",
    )
    def fleet_intact(context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource) -> dg.AssetCheckResult:
        rows = partition_run_rows(warehouse.warehouse(), WeekScenario.of(context))
        return _result(check_fleet(as_frame(rows)), dg.AssetCheckSeverity.WARN)

    @dg.asset_check(
        asset="weekly_trends",
        partitions_def=partitions,
        description="GE suite: the regression rule (cost +10%, p95 TTFT +20%, hit rate -10 points, outside "
        "this week's bootstrap interval) against the baseline.",
    )
    def cost_regression(context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource) -> dg.AssetCheckResult:
        rows = partition_trend_rows(warehouse.warehouse(), WeekScenario.of(context))
        return _result(check_weekly_trends(as_frame(rows)), dg.AssetCheckSeverity.WARN)

    @dg.asset_check(
        asset="weekly_trends",
        partitions_def=partitions,
        blocking=True,
        description="GE suite: no lake file of this week and scenario was quarantined by the refresh (unreadable, "
        "a row group that does not decode, or a column of another type) or is missing (the lake's manifest says it "
        "was written, and its file or partition folder is gone); the file, table and reason are in the metadata.",
    )
    def lake_intact(context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource) -> dg.AssetCheckResult:
        store, part = warehouse.warehouse(), WeekScenario.of(context)
        quarantined, missing = partition_quarantine_rows(store, part), partition_missing_rows(store, part)
        return _result(check_lake_quarantine(as_frame(quarantined), as_frame(missing)), dg.AssetCheckSeverity.ERROR)

    @dg.asset_check(
        asset="weekly_trends",
        partitions_def=partitions,
        description="GE suite: a scenario whose response format is a server-side constraint gets answers that parse "
        "at least at its structured_output.min_valid_rate (the week's pooled valid_answer_rate); not blocking, so "
        "the report still shows the week.",
    )
    def structured_output(context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource) -> dg.AssetCheckResult:
        rows = partition_trend_rows(warehouse.warehouse(), WeekScenario.of(context))
        return _result(check_structured_output(as_frame(rows)), dg.AssetCheckSeverity.ERROR)

    return [requests_quality, runs_quality, fleet_intact, cost_regression, lake_intact, structured_output]
