"""The weekly schedule: Monday 06:00 UTC, one run per scenario for the week that just ended.

Each run is tagged with its endpoint, so the queued run coordinator (dagster.yaml,
tag_concurrency_limits) lets one replay at a time hit an endpoint while different endpoints run in
parallel.
"""

from __future__ import annotations

from datetime import timedelta

import dagster as dg

from workloads.scenarios import Scenario

ENDPOINT_TAG = "costbench/endpoint"


def run_tags(scenario: Scenario) -> dict[str, str]:
    return {ENDPOINT_TAG: scenario.endpoint}


def partition_run_tags(
    partition_key: str, partitions: dg.MultiPartitionsDefinition, scenarios: dict[str, Scenario]
) -> dict[str, str]:
    """The tags of a run of one (week, scenario) partition, however it was launched."""
    name = partitions.get_partition_key_from_str(partition_key).keys_by_dimension["scenario"]
    return run_tags(scenarios[name])


def build_weekly_schedule(
    job: dg.UnresolvedAssetJobDefinition, scenarios: dict[str, Scenario]
) -> dg.ScheduleDefinition:
    @dg.schedule(
        name=f"{job.name}_schedule",
        job=job,
        cron_schedule="0 6 * * 1",
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description="Every Monday 06:00 UTC: replay every scenario for the week that just ended.",
    )
    def weekly_schedule(context: dg.ScheduleEvaluationContext):
        week_start = (context.scheduled_execution_time - timedelta(days=7)).date()
        week_start -= timedelta(days=week_start.weekday())  # the Monday that starts that week
        for name, scenario in sorted(scenarios.items()):
            yield dg.RunRequest(
                run_key=f"{week_start.isoformat()}|{name}",
                partition_key=dg.MultiPartitionKey({"week": week_start.isoformat(), "scenario": name}),
                tags=run_tags(scenario),
            )

    return weekly_schedule
