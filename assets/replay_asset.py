"""Stage 2: provision the endpoint, replay the workload against it, tear it down (one step, so a
GPU endpoint lives no longer than its replay). One replay per endpoint at a time is enforced on runs,
by their endpoint tag (pipelines/schedules.py, dagster.yaml)."""


import uuid
from dataclasses import dataclass

import dagster as dg

from endpoints.provision import provision
from pipelines.partitions import WeekScenario
from pipelines.resources import ScenarioCatalog, WarehouseResource
from replay.runner import ReplayConfig, run_replay
from workloads.workload import Workload


@dataclass(frozen=True, slots=True)
class ReplayOutput:
    run_dir: str  # holds requests.parquet, run.json and the server's log
    run_id: str
    endpoint: str


def build_replay_asset(partitions: dg.PartitionsDefinition) -> dg.AssetsDefinition:
    @dg.asset(
        partitions_def=partitions,
        group_name="replay",
        kinds={"sglang"},
        description="Provisions the scenario's endpoint, replays the workload open-loop, tears it down.",
    )
    def replay_run(
        context: dg.AssetExecutionContext,
        workload: Workload,
        catalog: ScenarioCatalog,
        warehouse: WarehouseResource,
    ) -> ReplayOutput:
        part = WeekScenario.of(context)
        scenario = catalog.scenario(part.scenario)
        spec = catalog.endpoint(scenario.endpoint)
        run_id = f"{part.week_start:%Y%m%d}-{part.scenario}-{uuid.uuid4().hex[:8]}"
        run_dir = warehouse.run_dir(part.week_start.isoformat(), part.scenario, run_id)
        with provision(spec, run_dir) as endpoint:
            context.log.info(f"endpoint {spec.name} ({spec.mode.value}) ready at {endpoint.url}")
            config = ReplayConfig(
                url=endpoint.url,
                speedup=scenario.speedup,
                start_s=scenario.start_s,
                duration_s=scenario.duration_s,
                api_key_env=spec.api_key_env,
                run_id=run_id,
            )
            info = run_replay(workload, config, run_dir)
        context.add_output_metadata(
            {
                "run_dir": dg.MetadataValue.path(str(run_dir)),
                "requests_ok": info.requests_ok,
                "requests_total": info.requests_total,
                "window_s": info.window_s,
                "schedule_lag_p99_ms": info.schedule_lag_p99_ms,
                "client_degraded": info.client_degraded,
            }
        )
        return ReplayOutput(run_dir=str(run_dir), run_id=run_id, endpoint=spec.name)

    return replay_run
