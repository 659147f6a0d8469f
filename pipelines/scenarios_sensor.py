"""A scenario the scenarios file cannot parse, told by name: in the sensor's ticks in the UI and once as a notice.

The code location keeps loading when one entry is bad (workloads/scenarios.py's load_scenario_file): the good
scenarios keep their partitions and Monday schedule, and every sensor (failure notices, leases) keeps running. The
bad one has no partition until it is fixed; this sensor says which it is and why, on every tick, and sends one
notice per distinct problem (the channel of pipelines/failure_notice.py) so that it is not found on Monday by its
missing row.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from assets.resources import WarehouseResource
from pipelines.failure_notice import NoticeChannels, default_notice_file, outbox_dir
from workloads.scenarios import ScenarioFile


@dataclass(frozen=True, slots=True)
class ScenarioNotice:
    kind: str  # "scenario_config"
    scenarios_file: str
    scenario: str  # its name, else its place in the file (scenarios[i])
    problem: str  # the loader's lines: file, key path, reason
    noticed_wall_s: float


def build_scenarios_sensor(path: Path, load: Callable[[], ScenarioFile]) -> dg.SensorDefinition:
    """The sensor for the scenarios file at `path`, read afresh by `load` on every tick."""

    @dg.sensor(
        name="scenarios_file",
        minimum_interval_seconds=60,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Names every scenario the scenarios file cannot parse (the others run as scheduled) and sends "
        "one notice per distinct problem.",
    )
    def scenarios_file(context: dg.SensorEvaluationContext, warehouse: WarehouseResource) -> dg.SkipReason:
        broken = load().broken
        if not broken:
            context.update_cursor(None)
            return dg.SkipReason(f"{path}: every scenario parses")
        for name, problem in broken.items():
            context.log.error(f"scenario {name} is set aside until {path} is fixed: {problem}")
        digest = hashlib.sha256(repr(sorted(broken.items())).encode()).hexdigest()[:16]
        if context.cursor != digest:  # told once per distinct problem, not every minute
            channels = NoticeChannels(outbox_dir(warehouse.root_path()), default_notice_file(context.instance))
            for name, problem in broken.items():
                delivery = channels.send(ScenarioNotice("scenario_config", str(path), name, problem, time.time()))
                context.log.info(f"notice for scenario {name}: {delivery.describe()}")
            context.update_cursor(digest)
        return dg.SkipReason(f"{len(broken)} scenario(s) set aside, the others run: {', '.join(sorted(broken))}")

    return scenarios_file
