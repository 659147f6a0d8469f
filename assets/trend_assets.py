"""Stage 4: DuckDB marts (run_summary, weekly_trends) rebuilt over the whole lake."""


import dagster as dg

from pipelines.partitions import WeekScenario
from pipelines.resources import WarehouseResource
from warehouse.store import Warehouse


def partition_trend_rows(store: Warehouse, part: WeekScenario) -> list[dict]:
    """The weekly_trends rows of one (week, scenario) partition (one per endpoint configuration)."""
    week = part.week_start.isoformat()
    return [r for r in store.weekly_trends() if str(r["week_start"]) == week and r["scenario"] == part.scenario]


def build_trend_assets(partitions: dg.PartitionsDefinition) -> list[dg.AssetsDefinition]:
    @dg.asset(
        partitions_def=partitions,
        group_name="marts",
        kinds={"duckdb"},
        deps=["requests_lake", "runs_lake"],
        pool="warehouse_writer",  # DuckDB takes one writing process
        description="Weekly cost per request, latency and prefix-cache hit rate per scenario "
        "(warehouse/schema.sql, tables run_summary and weekly_trends).",
    )
    def weekly_trends(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> None:
        store = warehouse.warehouse()
        store.refresh()
        metadata: dict = {"duckdb": dg.MetadataValue.path(str(store.db_path))}
        for row in partition_trend_rows(store, WeekScenario.of(context)):
            for key in ("cost_per_request_usd", "p95_ttft_ms", "prefix_cache_hit_rate", "completed_requests", "failed_requests"):
                if row.get(key) is not None:
                    metadata[key] = row[key]
        context.add_output_metadata(metadata)

    return [weekly_trends]
