"""Which requests this process replays, and everything about them computed before t0.

Order: synthetic arrivals (traces without timestamps) → the [start_s, start_s + duration_s) window →
the first max_requests → this shard. Sharding comes last so the shards of one replay partition
exactly the requests an unsharded replay would send. Then prompt ids are materialized (the
expensive part) for this shard only, and the requests are prepared in schedule order.
"""

from __future__ import annotations

import dataclasses

from replay.prepared_request import PreparedRequest, prepare_requests
from replay.replay_config import ArrivalProcess, ReplayConfig, ReplayInputError
from replay.schedule.shard import shard_mask
from workloads.prompts.prompt_materializer import materialize_input_ids
from workloads.synthetic_arrivals import ArrivalProcess as SyntheticProcess
from workloads.synthetic_arrivals import with_synthetic_arrivals
from workloads.workload import Workload
from workloads.workload_file import WorkloadFile


def rows_to_replay(workload_file: WorkloadFile, config: ReplayConfig) -> Workload:
    """What a replay needs of a spooled trace, in memory: its window, or all of it when synthetic arrivals
    replace the trace's own (the window is then taken on the synthetic schedule)."""
    if config.arrival_process is ArrivalProcess.TRACE and not workload_file.header.needs_arrivals:
        return workload_file.window_rows(config.start_s, config.duration_s)
    return workload_file.rows()


def select_requests(workload: Workload, config: ReplayConfig) -> tuple[Workload, list[PreparedRequest]]:
    """(the replayed workload slice, its prepared requests). Raises ReplayInputError on an empty window."""
    if config.arrival_process is not ArrivalProcess.TRACE:
        workload = _synthetic_arrivals(workload, config)
    elif workload.needs_arrivals:
        raise ReplayInputError(
            f"{workload.source_path}: the trace has no timestamps; replay it with synthetic arrivals "
            "(--arrivals poisson|gamma|constant --rate-rps R)"
        )
    windowed = workload.window(config.start_s, config.duration_s)
    if windowed.num_requests == 0:
        end = f"{config.start_s + config.duration_s:g}" if config.duration_s is not None else "end"
        raise ReplayInputError(
            f"{workload.source_path}: no requests arrive in the window [{config.start_s:g} s, {end} s)"
        )
    table = windowed.table
    if config.max_requests is not None and table.num_rows > config.max_requests:
        table = table.sort_by([("arrival_s", "ascending")]).slice(0, config.max_requests)
    if config.shard_count > 1:
        table = table.filter(shard_mask(table, config.shard_index, config.shard_count))
    selected = dataclasses.replace(windowed, table=table)
    ids = materialize_input_ids(selected, seed=config.seed) if table.num_rows else []
    return selected, prepare_requests(selected, ids, config.speedup, config.warmup_s)


def _synthetic_arrivals(workload: Workload, config: ReplayConfig) -> Workload:
    try:
        process = SyntheticProcess(config.arrival_process.value)
        assert config.rate_rps is not None  # ReplayConfig requires it for every synthetic process
        return with_synthetic_arrivals(workload, process, config.rate_rps, config.burstiness, config.seed)
    except ValueError as exc:
        raise ReplayInputError(f"{workload.source_path}: synthetic arrivals: {exc}") from None
