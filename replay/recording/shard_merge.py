"""One run from its shards: n processes replayed one workload together (same t0, disjoint sessions);
their records are concatenated and the run's facts recomputed from them, never averaged."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from replay.recording.records import RequestStatus, RunInfo
from replay.recording.requests_reader import REQUESTS_FILE, read_requests
from replay.recording.run_json import read_run_json, write_run_json
from replay.recording.schedule_lag import ScheduleLag


class ShardMergeError(ValueError):
    pass


def merge_shard_runs(shard_dirs: list[Path], out_dir: Path, lag_degraded_ms: float = 10.0) -> RunInfo:
    infos = [read_run_json(d) for d in shard_dirs]
    if not infos:
        raise ShardMergeError(f"{out_dir}: no shards to merge")
    first = infos[0]
    counts = sorted(i.shard_index for i in infos)
    if counts != list(range(first.shard_count)) or any(i.shard_count != first.shard_count for i in infos):
        raise ShardMergeError(f"{out_dir}: shards {counts} do not make up all {first.shard_count} shards")
    if len({(i.run_id, i.t0_wall_s) for i in infos}) != 1:
        raise ShardMergeError(
            f"{out_dir}: shards disagree on run id or t0 ({[(i.run_id, i.t0_wall_s) for i in infos]})"
        )

    table = pa.concat_tables([read_requests(d) for d in shard_dirs])
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / f".{REQUESTS_FILE}.tmp"
    pq.write_table(table, tmp)
    os.replace(tmp, out_dir / REQUESTS_FILE)

    # replay/recording/schedule_lag.py's definition over the same requests: sent ones, warm-up left out.
    sent = table.column("sent_mono_s")
    measured = pc.and_(pc.is_valid(sent), pc.invert(table.column("is_warmup")))
    lags = pc.subtract(
        pc.subtract(pc.filter(sent, measured), pc.filter(table.column("scheduled_mono_s"), measured)),
        pc.filter(table.column("held_s"), measured),
    ).to_numpy()
    lag = ScheduleLag.from_lags_s(lags, lag_degraded_ms)
    finished = [i.finished_wall_s for i in infos if i.finished_wall_s is not None]
    windows = [i.window_s for i in infos if i.window_s is not None]
    merged = replace(
        first,
        shard_index=0,
        shard_count=1,  # the merged run is the whole workload
        finished_wall_s=max(finished) if len(finished) == len(infos) else None,
        window_s=max(windows) if windows else None,  # shards share t0: the run ends with its last shard
        requests_total=sum(i.requests_total for i in infos),
        requests_recorded=table.num_rows,
        requests_ok=int(pc.sum(pc.equal(table.column("status"), RequestStatus.OK.value)).as_py() or 0),
        schedule_lag_p50_ms=lag.p50_ms,
        schedule_lag_p99_ms=lag.p99_ms,
        schedule_lag_max_ms=lag.max_ms,
        client_degraded=lag.degraded or any(i.client_degraded for i in infos),
        partial=any(i.partial for i in infos),
    )
    write_run_json(out_dir, merged)
    return merged
