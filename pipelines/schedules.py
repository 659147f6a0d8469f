"""The weekly schedule: Monday 06:00 UTC, one run per scenario for the week that just ended (and an hour before it,
the twin's calibration for that week: one run, no endpoint).

Each run is tagged with its endpoint and, where the endpoint is a server in real time (clock wall: launched,
attached, or a twin process), with that endpoint as its replay slot, so the queued run coordinator
(dagster.yaml, tag_concurrency_limits) lets one replay at a time hit an endpoint while different endpoints run
in parallel. A twin on a virtual clock has no slot: each run serves its own twin in its own process and keeps
no clock, so its runs may share the host (the per-scenario limit still keeps a scenario's weeks in order); they
carry VIRTUAL_CLOCK_TAG instead, which dagster.yaml limits to as many at once as the host has cores, since
such a run keeps one busy from its first request to its last.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, timedelta

import dagster as dg

from endpoints.spec import EndpointClock
from workloads.scenarios import Scenario

ENDPOINT_TAG = "costbench/endpoint"
REPLAY_SLOT_TAG = "costbench/replay-slot"  # limited to one run per value (dagster.yaml)
VIRTUAL_CLOCK_TAG = "costbench/virtual-clock"  # limited to a run per core, all values together (dagster.yaml)
EndpointClockOf = Callable[[str], EndpointClock]  # an endpoint's clock, by name, from the endpoints file


def run_tags(scenario: Scenario, clock: EndpointClock) -> dict[str, str]:
    tags = {ENDPOINT_TAG: scenario.endpoint}
    if clock is EndpointClock.WALL:
        tags[REPLAY_SLOT_TAG] = scenario.endpoint
    else:
        tags[VIRTUAL_CLOCK_TAG] = scenario.endpoint
    return tags


def partition_run_tags(
    partition_key: str,
    partitions: dg.MultiPartitionsDefinition,
    scenarios: dict[str, Scenario],
    clock_of: EndpointClockOf,
) -> dict[str, str]:
    """The tags of a run of one (week, scenario) partition, however it was launched."""
    name = partitions.get_partition_key_from_str(partition_key).keys_by_dimension["scenario"]
    return run_tags(scenarios[name], clock_of(scenarios[name].endpoint))


def _week_just_ended(context: dg.ScheduleEvaluationContext) -> date:
    """The Monday that starts the week before the tick's."""
    week_start = (context.scheduled_execution_time - timedelta(days=7)).date()
    return week_start - timedelta(days=week_start.weekday())


def build_weekly_schedule(
    job: dg.UnresolvedAssetJobDefinition, scenarios: dict[str, Scenario], clock_of: EndpointClockOf
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
        week_start = _week_just_ended(context)
        for name, scenario in sorted(scenarios.items()):
            yield dg.RunRequest(
                run_key=f"{week_start.isoformat()}|{name}",
                partition_key=dg.MultiPartitionKey({"week": week_start.isoformat(), "scenario": name}),
                tags=run_tags(scenario, clock_of(scenario.endpoint)),
            )

    return weekly_schedule


def build_calibration_schedule(job: dg.UnresolvedAssetJobDefinition) -> dg.ScheduleDefinition:
    @dg.schedule(
        name=f"{job.name}_schedule",
        job=job,
        cron_schedule="0 5 * * 1",
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description="Every Monday 05:00 UTC: recompute the twin's fit and validation tables for the week that just "
        "ended (an hour before its replays, so the week's report has them).",
    )
    def calibration_schedule(context: dg.ScheduleEvaluationContext):
        week_start = _week_just_ended(context)
        yield dg.RunRequest(run_key=week_start.isoformat(), partition_key=week_start.isoformat())

    return calibration_schedule
