"""Stage 4, after the marts (assets/mart_assets.py): the week's report built from them, and what the weekly_trends
asset and the checks read of one partition."""

from typing import TypeVar

import dagster as dg

from assets.partitions import WeekScenario
from assets.resources import WarehouseResource
from warehouse.backends.backend import WarehouseBackend
from warehouse.marts.mart_rows import (
    CostAttributionRow,
    LakeMissingRow,
    LakeQuarantineRow,
    RunSummaryRow,
    WeeklyTrendRow,
    as_dict,
)
from warehouse.report.focus_export import write_focus_week
from warehouse.report.weekly_report import write_weekly_report

CONFIRMS_TAG = "costbench/confirms"  # on a confirmation run: the Dagster run whose regression it checks
CONFIRMS_METADATA = "confirms"  # the same, on the weekly report that run built (pipelines/regression_notice.py)

# Plotted by Dagster's UI over time, per partition.
_TREND_METADATA = (
    "efficiency_cost_per_request_usd",
    "realised_cost_per_request_usd",
    "idle_cost_per_request_usd",
    "p95_ttft_ms",
    "prefix_cache_hit_rate",
    "completed_requests",
    "failed_requests",
)


Row = TypeVar("Row", WeeklyTrendRow, RunSummaryRow, LakeQuarantineRow, LakeMissingRow, CostAttributionRow)


def _of_partition(rows: list[Row], part: WeekScenario) -> list[Row]:
    return [r for r in rows if r.week_start == part.week_start and r.scenario == part.scenario]


def partition_trend_rows(store: WarehouseBackend, part: WeekScenario) -> list[WeeklyTrendRow]:
    """The weekly_trends rows of one (week, scenario) partition (one per endpoint configuration)."""
    return _of_partition(store.weekly_trends(), part)


def partition_run_rows(store: WarehouseBackend, part: WeekScenario) -> list[RunSummaryRow]:
    """The run_summary rows of one (week, scenario) partition."""
    return _of_partition(store.run_summary(), part)


def partition_quarantine_rows(store: WarehouseBackend, part: WeekScenario) -> list[LakeQuarantineRow]:
    """The lake_quarantine rows of one (week, scenario) partition: its lake files a refresh took out (a file
    outside any partition has no week and belongs to none)."""
    return _of_partition(store.lake_quarantine(), part)


def partition_missing_rows(store: WarehouseBackend, part: WeekScenario) -> list[LakeMissingRow]:
    """The lake_missing rows of one (week, scenario) partition: its partitions the lake's manifest says were written
    and the refresh did not find."""
    return _of_partition(store.lake_missing(), part)


def partition_attribution(store: WarehouseBackend, part: WeekScenario) -> dict[str, float]:
    """The partition's cost_attribution totals (USD per request): the change against the baseline and its
    price, traffic and runtime parts; empty without a baseline (one configuration per partition is usual:
    with several, the last one's)."""
    figures: dict[str, float] = {}
    for row in _of_partition(store.cost_attribution(), part):
        if row.change_usd is None:
            continue
        parts = {
            "realised_cost_change_usd": row.change_usd,
            "realised_cost_change_price_usd": row.price_usd,
            "realised_cost_change_traffic_usd": row.traffic_usd,
            "realised_cost_change_idle_share_usd": row.traffic_volume_usd,
            "realised_cost_change_runtime_usd": row.runtime_usd,
            "realised_cost_change_prefix_cache_usd": row.prefix_cache_usd,
        }
        figures.update({name: value for name, value in parts.items() if value is not None})
    return figures


def partition_trend_metadata(store: WarehouseBackend, part: WeekScenario) -> dict:
    """What the weekly_trends asset shows of one partition after a refresh: its trend figures (plotted over time by the
    UI), verdict, cost attribution, capacity, occupancy and diagnoses."""
    metadata: dict = {}
    for row in partition_trend_rows(store, part):
        values = as_dict(row)
        metadata.update({key: values[key] for key in _TREND_METADATA if values[key] is not None})
        metadata["regression_verdict"] = row.regression_verdict
    metadata.update(partition_attribution(store, part))
    runs = partition_run_rows(store, part)
    capacity = [r.capacity_rps_at_slo for r in runs if r.capacity_rps_at_slo is not None]
    if capacity:
        metadata["capacity_rps_at_slo"] = min(capacity)
    occupancy = [r.batch_occupancy for r in runs if r.batch_occupancy is not None]
    if occupancy:
        metadata["batch_occupancy"] = sum(occupancy) / len(occupancy)
    run_ids = {r.run_id for r in runs}
    verdicts = sorted({d.verdict for d in store.diagnoses() if d.run_id in run_ids})
    if verdicts:
        metadata["diagnosis"] = ", ".join(verdicts)
    return metadata


def build_trend_assets(partitions: dg.PartitionsDefinition) -> list[dg.AssetsDefinition]:
    @dg.asset(
        partitions_def=partitions,
        group_name="marts",
        kinds={"html"},
        deps=["weekly_trends"],
        description="The week's HTML report (warehouse/reports/week=YYYY-MM-DD.html), cost-trend PNG and FOCUS 1.2 "
        "cost rows (focus_week=YYYY-MM-DD.csv), over every scenario materialized so far that week. Not built when an "
        "ERROR check failed upstream.",
    )
    def weekly_report(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> None:
        store, week_start = warehouse.warehouse(), WeekScenario.of(context).week_start
        report = write_weekly_report(store, week_start)
        focus_csv = write_focus_week(store, week_start)  # the week's cost as FinOps tools read it (FOCUS 1.2)
        confirms = context.run.tags.get(CONFIRMS_TAG)
        context.add_output_metadata(
            {
                **({CONFIRMS_METADATA: confirms} if confirms else {}),
                "report": dg.MetadataValue.path(str(report.html_path)),
                "focus_csv": dg.MetadataValue.path(str(focus_csv)),
                "cost_trend_png": dg.MetadataValue.path(str(report.cost_png_path)),
                "plots": report.plots,
                "regressions": report.regressions,
            }
        )

    return [weekly_report]
