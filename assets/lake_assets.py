"""Stage 3: the replay's records into the Parquet lake, one (week, scenario) partition per table.
Re-materializing a partition replaces it."""

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq

from assets.column_schemas import column_schema
from assets.partition_context import PartitionContext
from assets.partitions import WeekScenario
from assets.replay_asset import ReplayOutput
from assets.resources import ScenarioCatalog, WarehouseResource
from common.run_folder import GPU_SAMPLES_FILE, ROUTING_REFERENCE_FILE, SERVER_SAMPLES_FILE
from endpoints.capacity.fleet_plan import fleet_plan_text, read_fleet_plans_json
from endpoints.capacity.routing_reference import read_routing_reference_json
from endpoints.capacity.shadow_canary import read_shadow_canary_json
from endpoints.capacity.slo_capacity import read_capacity_json
from endpoints.probes.probe_records import ANSWERED_KIND, GPU_SAMPLE_SCHEMA, SERVER_SAMPLE_SCHEMA
from replay.recording.requests_reader import read_requests
from replay.recording.run_json import read_run_json
from warehouse.marts.fleet_health import fleet_health
from warehouse.marts.run_rows import RunContext, build_run_row
from workloads.trace_stats import trace_stats
from workloads.workload import Workload


def _samples(run_dir: str, name: str, schema: pa.Schema) -> pa.Table:
    path = Path(run_dir) / name
    return pq.read_table(path, schema=schema) if path.exists() else schema.empty_table()


def _every_run(replay_run: ReplayOutput, read: Callable[[str], pa.Table]) -> pa.Table:
    # The week's repeats go to the partition together: each row carries its run_id.
    return pa.concat_tables([read(run_dir) for run_dir in replay_run.run_dirs])


def build_lake_assets(partitions: dg.PartitionsDefinition) -> list[dg.AssetsDefinition]:
    def _write(context, warehouse: WarehouseResource, table_name: str, table: pa.Table) -> None:
        part = WeekScenario.of(context)
        where = warehouse.warehouse().write_partition(table_name, part.week_start, part.scenario, table)
        context.add_output_metadata({"rows": table.num_rows, "path": dg.MetadataValue.path(where)})

    @dg.asset(
        partitions_def=partitions,
        group_name="lake",
        kinds={"parquet"},
        metadata=column_schema("requests"),
        description="One row per replayed request (warehouse/schema.sql, table requests).",
    )
    def requests_lake(
        context: dg.AssetExecutionContext, replay_run: ReplayOutput, warehouse: WarehouseResource
    ) -> None:
        _write(context, warehouse, "requests", _every_run(replay_run, lambda d: read_requests(Path(d))))

    @dg.asset(
        partitions_def=partitions,
        group_name="lake",
        kinds={"parquet"},
        metadata=column_schema("server_samples"),
        description="The server's sglang: metrics, scraped every second during the replay (table server_samples).",
    )
    def server_samples_lake(
        context: dg.AssetExecutionContext, replay_run: ReplayOutput, warehouse: WarehouseResource
    ) -> None:
        _write(
            context,
            warehouse,
            "server_samples",
            _every_run(replay_run, lambda d: _samples(d, SERVER_SAMPLES_FILE, SERVER_SAMPLE_SCHEMA)),
        )

    @dg.asset(
        partitions_def=partitions,
        group_name="lake",
        kinds={"parquet"},
        metadata=column_schema("gpu_samples"),
        description="GPU utilisation, memory, power and clocks during the replay; null where unmeasured "
        "(table gpu_samples).",
    )
    def gpu_samples_lake(
        context: dg.AssetExecutionContext, replay_run: ReplayOutput, warehouse: WarehouseResource
    ) -> None:
        table = _every_run(replay_run, lambda d: _samples(d, GPU_SAMPLES_FILE, GPU_SAMPLE_SCHEMA))
        _write(context, warehouse, "gpu_samples", table)

    @dg.asset(
        partitions_def=partitions,
        group_name="lake",
        kinds={"parquet"},
        metadata=column_schema("runs"),
        description="One row per replay: endpoint, server facts, configuration fingerprint, window, price, SLO "
        "(table runs).",
    )
    def runs_lake(
        context: dg.AssetExecutionContext,
        replay_run: ReplayOutput,
        workload: Workload,
        catalog: ScenarioCatalog,
        warehouse: WarehouseResource,
    ) -> None:
        part = catalog.partition(context, endpoint=replay_run.endpoint)
        traffic = part.traffic(warehouse.workloads_dir())
        window = workload.window(traffic.start_s, traffic.duration_s)
        scenario_context = RunContext.of_scenario(part.scenario, trace_stats(window).prefix_reuse_share)
        rows = [_run_row(Path(d), part, scenario_context) for d in replay_run.run_dirs]
        _write(context, warehouse, "runs", pa.concat_tables(rows))

    return [requests_lake, server_samples_lake, gpu_samples_lake, runs_lake]


def _run_row(run_dir: Path, part: PartitionContext, run_context: RunContext) -> pa.Table:
    capacity = read_capacity_json(run_dir)
    if capacity is not None:
        run_context = replace(
            run_context,
            capacity_rps_at_slo=capacity.capacity_rps_at_slo,
            capacity_source=capacity.source,
            running_requests_at_slo=capacity.running_requests_at_slo,
            capacity_ramp_gpu_minutes=capacity.gpu_minutes if capacity.source == "rate_ramp" else None,
        )
    plan = read_fleet_plans_json(run_dir)
    if plan is not None:
        run_context = replace(run_context, fleet_plan_json=fleet_plan_text(plan))
    reference = read_routing_reference_json(run_dir / ROUTING_REFERENCE_FILE)
    if reference is not None:
        run_context = replace(
            run_context,
            single_replica_hit_rate=reference.single_replica_hit_rate,
            fleet_model_hit_rate=reference.fleet_model_hit_rate,
        )
    shadow = read_shadow_canary_json(run_dir)
    if shadow is not None:
        run_context = replace(
            run_context,
            shadow_output_tokens_per_s_ratio=shadow.output_tokens_per_s_ratio,
            shadow_p50_ttft_ratio=shadow.p50_ttft_ratio,
            shadow_p50_tpot_ratio=shadow.p50_tpot_ratio,
        )
    run = read_run_json(run_dir)
    # Which workers served and for how long, and whether one was lost (warehouse/marts/fleet_health.py).
    samples = run_dir / SERVER_SAMPLES_FILE
    answered = (
        pq.read_table(samples, schema=SERVER_SAMPLE_SCHEMA, filters=[("kind", "=", ANSWERED_KIND)])
        if samples.exists()
        else SERVER_SAMPLE_SCHEMA.empty_table()
    )
    health = fleet_health(
        run, answered, read_requests(run_dir, columns=("worker", "status", "is_warmup", "finish_mono_s"))
    )
    run_context = replace(
        run_context, workers_json=health.workers_json(), degraded=health.degraded, degraded_reason=health.reason
    )
    return build_run_row(run, part.endpoint, part.scenario.name, part.week_start, run_context)
