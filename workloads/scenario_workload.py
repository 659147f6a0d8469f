"""The requests a scenario replays in a week: the week's traffic (workloads/weekly_traffic.py) as one replica
receives it, with the scenario's shared system prompt in front of every request, its reasoning budget and its
structured-output share. The materialize step and the capacity bench both build it here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from workloads.prompts.reasoning_budget import with_reasoning
from workloads.prompts.response_format import with_structured_output
from workloads.prompts.shared_prefix import with_shared_prefix
from workloads.weekly_traffic import WeekTraffic, session_share
from workloads.workload import Workload

if TYPE_CHECKING:
    from workloads.scenarios import Scenario


def scenario_workload(scenario: Scenario, traffic: WeekTraffic) -> Workload:
    workload = session_share(traffic.window_rows(), scenario.traffic_share)
    workload = with_reasoning(with_shared_prefix(workload, scenario.shared_prefix_tokens), scenario.reasoning_ratio)
    return with_structured_output(workload, scenario.structured_output)
