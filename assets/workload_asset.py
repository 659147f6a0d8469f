"""Stage 1: the scenario's window of its trace as a canonical Workload, with the scenario's shared system
prompt in front of every request and its reasoning budget. The trace is spooled once (for every week
that replays the same file) and only the window's rows are read back, so a trace of any length fits."""

import dagster as dg

from assets.partitions import WeekScenario
from assets.resources import ScenarioCatalog, WarehouseResource
from workloads.reasoning_budget import with_reasoning
from workloads.shared_prefix import with_shared_prefix
from workloads.trace_stats import trace_stats
from workloads.workload import Workload
from workloads.workload_file import open_workload


def build_workload_asset(partitions: dg.PartitionsDefinition) -> dg.AssetsDefinition:
    @dg.asset(
        partitions_def=partitions,
        group_name="replay",
        kinds={"python"},
        description="The scenario's production trace in canonical form; metadata describes the replayed window.",
    )
    def workload(context: dg.AssetExecutionContext, catalog: ScenarioCatalog, warehouse: WarehouseResource) -> Workload:
        part = WeekScenario.of(context)
        scenario = catalog.scenario(part.scenario)
        trace = open_workload(scenario.trace, scenario.trace_format, warehouse.workloads_dir())
        workload = trace.window_rows(scenario.start_s, scenario.duration_s)
        workload = with_reasoning(with_shared_prefix(workload, scenario.shared_prefix_tokens), scenario.reasoning_ratio)
        stats = trace_stats(workload.window(scenario.start_s, scenario.duration_s))
        context.add_output_metadata(
            {
                "trace_requests": trace.num_requests,
                "window_requests": stats.requests,
                "workload_hash": workload.content_hash,
                "mean_input_tokens": stats.mean_input_tokens,
                "mean_output_tokens": stats.mean_output_tokens,
                "prefix_reuse_share": stats.prefix_reuse_share,
            }
        )
        return workload

    return workload
