"""Stage 1: the week's traffic of the scenario (its window of the trace for that week, or the week's capture,
workloads/weekly_traffic.py) as a canonical Workload: the replica's session share of it, with the scenario's
shared system prompt in front of every request and its reasoning budget. The trace is spooled once (for every week
that replays the same file) and only the window's rows are read back, so a trace of any length fits."""

import dagster as dg

from assets.resources import ScenarioCatalog, WarehouseResource
from workloads.scenario_workload import scenario_workload
from workloads.trace_stats import trace_stats
from workloads.workload import Workload


def build_workload_asset(partitions: dg.PartitionsDefinition) -> dg.AssetsDefinition:
    @dg.asset(
        partitions_def=partitions,
        group_name="replay",
        kinds={"python"},
        description="The scenario's production trace in canonical form; metadata describes the replayed window.",
    )
    def workload(context: dg.AssetExecutionContext, catalog: ScenarioCatalog, warehouse: WarehouseResource) -> Workload:
        part = catalog.partition(context)
        scenario = part.scenario
        traffic = part.traffic(warehouse.workloads_dir())
        workload = scenario_workload(scenario, traffic)
        stats = trace_stats(workload.window(traffic.start_s, traffic.duration_s))
        context.add_output_metadata(
            {
                "trace": str(traffic.trace.header.source_path),
                "window_start_s": traffic.start_s,
                "traffic_share": scenario.traffic_share,
                "trace_requests": traffic.trace.num_requests,
                "window_requests": stats.requests,
                "workload_hash": workload.content_hash,
                "mean_input_tokens": stats.mean_input_tokens,
                "mean_output_tokens": stats.mean_output_tokens,
                "prefix_reuse_share": stats.prefix_reuse_share,
            }
        )
        return workload

    return workload
