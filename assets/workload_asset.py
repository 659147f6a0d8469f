"""Stage 1: the scenario's trace, read into the canonical Workload with the scenario's shared system
prompt in front of every request and its reasoning budget (the replay takes its window)."""

import dagster as dg

from assets.partitions import WeekScenario
from assets.resources import ScenarioCatalog
from workloads.reader_registry import read_trace
from workloads.reasoning_budget import with_reasoning
from workloads.shared_prefix import with_shared_prefix
from workloads.trace_stats import trace_stats
from workloads.workload import Workload


def build_workload_asset(partitions: dg.PartitionsDefinition) -> dg.AssetsDefinition:
    @dg.asset(
        partitions_def=partitions,
        group_name="replay",
        kinds={"python"},
        description="The scenario's production trace in canonical form; metadata describes the replayed window.",
    )
    def workload(context: dg.AssetExecutionContext, catalog: ScenarioCatalog) -> Workload:
        part = WeekScenario.of(context)
        scenario = catalog.scenario(part.scenario)
        workload = read_trace(scenario.trace, scenario.trace_format)
        workload = with_reasoning(with_shared_prefix(workload, scenario.shared_prefix_tokens), scenario.reasoning_ratio)
        stats = trace_stats(workload.window(scenario.start_s, scenario.duration_s))
        context.add_output_metadata(
            {
                "window_requests": stats.requests,
                "workload_hash": workload.content_hash,
                "mean_input_tokens": stats.mean_input_tokens,
                "mean_output_tokens": stats.mean_output_tokens,
                "prefix_reuse_share": stats.prefix_reuse_share,
            }
        )
        return workload

    return workload
