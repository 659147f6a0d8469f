"""What a step of the weekly job knows of its partition: the week, the scenario and the endpoint as that week
had it configured. Resolved by ScenarioCatalog.partition (assets/resources.py), the one function every step
calls; each step resolves it itself (steps may run in processes or pods of their own), from files read once
per process."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from pathlib import Path

from endpoints.spec import EndpointSpec
from workloads.scenarios import Scenario
from workloads.weekly_traffic import WeekTraffic, week_traffic


@dataclass(frozen=True, slots=True)
class PartitionContext:
    week_start: date  # the partition's Monday
    scenario: Scenario
    endpoint: EndpointSpec  # as of week_start: its dated revisions applied

    def traffic(self, workloads_dir: Path) -> WeekTraffic:
        """The week's traffic and its window. The workload step spools the trace in `workloads_dir`; the
        steps after it only look the spooled copy up (its footer), they do not read the trace again."""
        return week_traffic(self.scenario, self.week_start, workloads_dir)
