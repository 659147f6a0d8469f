"""Stage 3: the replay's records into the Parquet lake, one (week, scenario) partition each.
Re-materializing a partition replaces it."""


from pathlib import Path

import dagster as dg
import orjson
import pyarrow.parquet as pq

from assets.replay_asset import ReplayOutput
from pipelines.partitions import WeekScenario
from pipelines.resources import ScenarioCatalog, WarehouseResource
from replay.records import RunInfo
from warehouse.lake import write_partition
from warehouse.run_rows import build_run_row


def _run_info(run_dir: str) -> RunInfo:
    return RunInfo(**orjson.loads((Path(run_dir) / "run.json").read_bytes()))


def build_lake_assets(partitions: dg.PartitionsDefinition) -> list[dg.AssetsDefinition]:
    @dg.asset(
        partitions_def=partitions,
        group_name="lake",
        kinds={"parquet"},
        description="One row per replayed request (warehouse/schema.sql, table requests).",
    )
    def requests_lake(
        context: dg.AssetExecutionContext, replay_run: ReplayOutput, warehouse: WarehouseResource
    ) -> None:
        part = WeekScenario.of(context)
        table = pq.read_table(Path(replay_run.run_dir) / "requests.parquet")
        path = write_partition(warehouse.warehouse().lake_root, "requests", part.week_start, part.scenario, table)
        context.add_output_metadata({"rows": table.num_rows, "path": dg.MetadataValue.path(str(path))})

    @dg.asset(
        partitions_def=partitions,
        group_name="lake",
        kinds={"parquet"},
        description="One row per replay: endpoint, server facts, window, price (table runs).",
    )
    def runs_lake(
        context: dg.AssetExecutionContext,
        replay_run: ReplayOutput,
        catalog: ScenarioCatalog,
        warehouse: WarehouseResource,
    ) -> None:
        part = WeekScenario.of(context)
        spec = catalog.endpoint(replay_run.endpoint)
        row = build_run_row(_run_info(replay_run.run_dir), spec, part.scenario, part.week_start)
        path = write_partition(warehouse.warehouse().lake_root, "runs", part.week_start, part.scenario, row)
        context.add_output_metadata({"run_id": replay_run.run_id, "path": dg.MetadataValue.path(str(path))})

    return [requests_lake, runs_lake]
