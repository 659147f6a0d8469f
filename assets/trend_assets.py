"""Stage 4: DuckDB marts (run_summary, weekly_trends, diagnoses) rebuilt over the whole lake, and the
week's report built from them."""

from typing import TypeVar

import dagster as dg

from assets.column_schemas import column_schema
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


def build_trend_assets(partitions: dg.PartitionsDefinition) -> list[dg.AssetsDefinition]:
    @dg.asset(
        partitions_def=partitions,
        group_name="marts",
        kinds={"duckdb"},
        metadata=column_schema("weekly_trends"),
        deps=["requests_lake", "runs_lake", "server_samples_lake", "gpu_samples_lake"],
        pool="warehouse_writer",  # DuckDB takes one writing process
        description="Weekly cost per request, latency, prefix-cache hit rate, baseline and regression verdict "
        "per scenario and endpoint configuration, and why cost moved (warehouse/schema.sql: run_summary, "
        "weekly_trends, cost_attribution, diagnoses).",
    )
    def weekly_trends(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> None:
        store = warehouse.warehouse()
        refreshed = store.refresh()
        for quarantined in refreshed.quarantined:  # the lake_intact check fails the affected weeks
            context.log.error(quarantined.message)
        for missing in refreshed.missing:  # likewise: written, and gone
            context.log.error(missing.message)
        part = WeekScenario.of(context)
        # A local warehouse is a DuckDB file; a DuckLake one a catalog URL (printed without its password).
        db_path = refreshed.db_path
        where = dg.MetadataValue.path(str(db_path)) if db_path else dg.MetadataValue.text(store.location)
        metadata: dict = {"duckdb": where, "lake_files": refreshed.lake_files}
        if refreshed.quarantined:
            metadata["quarantined"] = dg.MetadataValue.json([q.message for q in refreshed.quarantined])
        if refreshed.missing:
            metadata["missing"] = dg.MetadataValue.json([m.message for m in refreshed.missing])
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
        context.add_output_metadata(metadata)

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

    return [weekly_trends, weekly_report]
