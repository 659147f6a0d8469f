"""The one place that wires assets, checks, resources, the job and the schedule together."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path

import dagster as dg

from assets.calibration_asset import TWIN_CALIBRATION_ASSET, build_calibration_asset
from assets.lake_assets import build_lake_assets
from assets.mart_assets import build_mart_assets
from assets.partitions import build_partitions, build_weeks
from assets.quality_checks import build_quality_checks
from assets.replay_asset import build_replay_asset
from assets.resources import REPO_ROOT, ScenarioCatalog, WarehouseResource
from assets.trend_assets import build_trend_assets
from assets.workload_asset import build_workload_asset
from endpoints.spec import EndpointClock, EndpointSpecError
from pipelines.failure_notice import failure_notice_sensor
from pipelines.lease_sensor import endpoint_lease_sensor
from pipelines.regression_notice import build_regression_notice_sensor
from pipelines.scenarios_sensor import build_scenarios_sensor
from pipelines.schedules import build_calibration_schedule, build_weekly_schedule, partition_run_tags
from pipelines.weekly_executor import MULTIPROCESS_CONFIG, weekly_executor
from workloads.scenarios import (
    DEFAULT_MAX_SCHEDULE_LAG_P99_MS,
    Scenario,
    ScenarioError,
    ScenarioFile,
    configured_scenarios_path,
    load_scenario_file,
)

WEEKLY_JOB = "weekly_benchmark"
CALIBRATION_JOB = "twin_calibration_weekly"  # the twin's error, partitioned by week alone
# The asset graph's own Materialize runs (not the weekly job's): each step in its own process, forked from
# a server that has already imported the pipeline; shards in parallel.
WEEKLY_EXECUTOR = dg.multiprocess_executor.configured(MULTIPROCESS_CONFIG, name="weekly_multiprocess")


# Partitioned asset checks are a Dagster preview feature; we rely on them knowingly.
warnings.filterwarnings("ignore", category=dg.PreviewWarning, message=".*partitions_def on an AssetCheckSpec.*")


def build_definitions(
    scenarios_path: Path | None = None,
    warehouse_root: Path | None = None,
    endpoints_path: Path | None = None,
) -> dg.Definitions:
    # Static partition keys must be known when the code location loads.
    scenarios_path = scenarios_path or configured_scenarios_path()
    # A bad entry is set aside, named by the scenarios_file sensor: the others keep their partitions and schedule,
    # and every sensor loads (a file that does not parse at all leaves no scenario, the sensors still run).
    scenarios = _scenario_file(scenarios_path).scenarios
    partitions = build_partitions(sorted(scenarios))
    catalog = ScenarioCatalog(
        scenarios_path=str(scenarios_path), endpoints_path=str(endpoints_path) if endpoints_path else None
    )

    def clock_of(endpoint: str) -> EndpointClock:
        # Read when a run is made: the endpoints file may change between runs. An endpoint the file does not
        # name, or a file that does not load, is taken for one in real time (it holds a replay slot); the run's
        # first step says what is wrong with it.
        try:
            return catalog.endpoint(endpoint).clock
        except (KeyError, EndpointSpecError, OSError):
            return EndpointClock.WALL

    assets = [
        build_workload_asset(partitions),
        build_replay_asset(partitions),
        *build_lake_assets(partitions),
        build_mart_assets(partitions),
        *build_trend_assets(partitions),
    ]
    calibration, calibration_check = build_calibration_asset(build_weeks())
    calibration_job = dg.define_asset_job(CALIBRATION_JOB, selection=[calibration], partitions_def=build_weeks())
    job = dg.define_asset_job(
        WEEKLY_JOB,
        selection=dg.AssetSelection.all() - dg.AssetSelection.assets(TWIN_CALIBRATION_ASSET),
        partitions_def=partitions,
        # The job's own executor, for every run however launched: a one-shard scenario's steps in its run
        # worker, a sharded one's each in its own process (pipelines/weekly_executor.py).
        executor_def=weekly_executor(lambda name: scenarios[name].shards if name in scenarios else 1),
        # Every run of a partition (schedule, backfill, the launchpad) carries its endpoint's tag, which
        # the run queue limits to one at a time (dagster.yaml).
        config=dg.PartitionedConfig(
            partitions_def=partitions,
            run_config_for_partition_key_fn=lambda _key: {},
            tags_for_partition_key_fn=lambda key: partition_run_tags(key, partitions, scenarios, clock_of),
        ),
    )
    schedule = build_weekly_schedule(job, scenarios, clock_of)
    regression_notice_sensor = build_regression_notice_sensor(
        job, lambda key: partition_run_tags(key, partitions, scenarios, clock_of)
    )
    return dg.Definitions(
        assets=[*assets, calibration],
        asset_checks=[
            *build_quality_checks(partitions, lambda name: _lag_bound_ms(scenarios, name)),
            calibration_check,
        ],
        jobs=[job, calibration_job],
        executor=WEEKLY_EXECUTOR,  # the asset graph's own Materialize runs too
        schedules=[schedule, build_calibration_schedule(calibration_job)],
        sensors=[
            failure_notice_sensor,
            regression_notice_sensor,
            endpoint_lease_sensor,
            build_scenarios_sensor(scenarios_path, lambda: _scenario_file(scenarios_path)),
        ],
        resources={
            "catalog": catalog,
            "warehouse": WarehouseResource(root=str(warehouse_root) if warehouse_root else None),
        },
    )


def _lag_bound_ms(scenarios: Mapping[str, Scenario], name: str) -> float:
    return scenarios[name].max_schedule_lag_p99_ms if name in scenarios else DEFAULT_MAX_SCHEDULE_LAG_P99_MS


def _scenario_file(path: Path) -> ScenarioFile:
    try:
        return load_scenario_file(path, REPO_ROOT)
    except ScenarioError as exc:  # not YAML, or no scenarios list: nothing to keep
        return ScenarioFile({}, {"(the whole file)": str(exc)})
    except Exception as exc:  # whatever else a file can do (bytes no reader takes), the sensors load
        return ScenarioFile({}, {"(the whole file)": f"{path}: cannot be read as a scenarios file: {exc!r:.500}"})


defs = build_definitions()
