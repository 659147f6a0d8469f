"""A replay against the twin (a real process on 127.0.0.1, probed), ingested into a temporary
warehouse the way the lake assets do it: run_summary's numbers checked by hand from the Parquet, and
the console summary against run_summary."""

from __future__ import annotations

import asyncio
import time
from datetime import date
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from endpoints.probes.probe_records import SERVER_SAMPLE_SCHEMA, SERVER_SAMPLES_FILE
from endpoints.probes.probe_session import probing
from endpoints.provision import provision
from endpoints.spec import EndpointMode, EndpointSpec
from replay.recording.records import RunInfo
from replay.recording.requests_reader import read_requests
from replay.recording.run_json import read_run_json
from replay.recording.shard_merge import merge_shard_runs
from replay.recording.summary import SUMMARY_COLUMNS, summarize
from replay.runner import ReplayConfig, run_replay, run_replay_async
from replay_sglang_peer import make_workload
from warehouse.backends.store import Warehouse
from warehouse.marts.mart_rows import RunSummaryRow
from warehouse.marts.run_rows import build_run_row
from warehouse.parquet.lake import write_partition

WEEK = date(2025, 3, 3)
SCENARIO = "e2e"
GPUS, USD_PER_GPU_HOUR = 8, 3.5
WARMUP_S = 0.35


def _twin(name: str, *flags: str) -> EndpointSpec:
    server_args = ("--tp", "8", "--sim-hardware", "h200", "--sim-warmup-s", "0", *flags)
    return EndpointSpec(name, EndpointMode.SIM, "deepseek-ai/DeepSeek-V3", server_args, "H200", GPUS, USD_PER_GPU_HOUR,
                        ready_timeout_s=30)  # fmt: skip


def _ingest(
    root: Path, run_dir: Path, replay_dir: Path, spec: EndpointSpec
) -> tuple[Warehouse, RunInfo, RunSummaryRow]:
    """runs, requests and server_samples of one run into a fresh warehouse, refreshed; its one run_summary row."""
    store = Warehouse(root)
    info = read_run_json(replay_dir)
    write_partition(store.lake_root, "runs", WEEK, SCENARIO, build_run_row(info, spec, SCENARIO, WEEK))
    write_partition(store.lake_root, "requests", WEEK, SCENARIO, read_requests(replay_dir))
    samples = pq.read_table(run_dir / SERVER_SAMPLES_FILE, schema=SERVER_SAMPLE_SCHEMA)
    write_partition(store.lake_root, "server_samples", WEEK, SCENARIO, samples)
    store.refresh()
    [row] = store.run_summary()
    return store, info, row


@pytest.mark.timeout(120)
def test_warm_up_is_excluded_once_and_the_console_agrees_with_the_warehouse(tmp_path):
    spec = _twin("twin", "--max-running-requests", "4")
    workload = make_workload([0.1 * i for i in range(12)], input_tokens=64, output_tokens=8)
    run_dir, replay_dir = tmp_path / "run", tmp_path / "run" / "replay"
    with provision(spec, run_dir) as endpoint, probing(endpoint, run_dir, "e2e-warmup", interval_s=0.05):
        config = ReplayConfig(url=endpoint.url, run_id="e2e-warmup", warmup_s=WARMUP_S, request_timeout_s=30)
        run = run_replay(workload, config, replay_dir)
    store, info, row = _ingest(tmp_path / "wh", run_dir, replay_dir, spec)

    # By hand, from requests.parquet: the window runs from t0 + warm-up to the last finish.
    rows = read_requests(replay_dir).to_pylist()
    warm = [r for r in rows if r["is_warmup"]]
    completed = [r for r in rows if not r["is_warmup"] and r["status"] == "ok"]
    assert len(warm) == 4 and len(completed) == 8, [(r["request_id"], r["status"], r["error_message"]) for r in rows]
    window_s = max(r["finish_mono_s"] for r in rows) - WARMUP_S
    assert info.window_s == pytest.approx(window_s)  # run.json: warm-up already out
    assert row.window_s == pytest.approx(window_s)  # and not subtracted a second time
    assert row.completed_requests == len(completed)
    assert row.realised_cost_per_request_usd == pytest.approx(
        GPUS * USD_PER_GPU_HOUR * window_s / 3600 / len(completed)
    )

    # The console's summary is run_summary's numbers.
    console = summarize(read_requests(replay_dir, SUMMARY_COLUMNS), run)
    assert (console.requests_completed, console.requests_warmup) == (row.completed_requests, len(warm))
    assert console.window_s == pytest.approx(row.window_s)
    assert console.request_rate_per_s == pytest.approx(row.completed_requests / row.window_s)
    assert console.output_tokens_per_s == pytest.approx(row.sustained_output_tokens_per_s)
    for mine, theirs in [("ttft_p50_ms", "p50_ttft_ms"), ("ttft_p95_ms", "p95_ttft_ms"), ("e2e_p50_ms", "p50_e2e_ms"),
                         ("e2e_p95_ms", "p95_e2e_ms"), ("e2e_from_scheduled_p95_ms", "p95_e2e_from_schedule_ms"),
                         ("prefix_cache_hit_rate", "prefix_cache_hit_rate"), ("schedule_lag_p99_ms", "schedule_lag_p99_ms")]:  # fmt: skip
        assert getattr(console, mine) == pytest.approx(getattr(row, theirs)), mine

    # schedule_lag_ms: one quantity in requests and runs (sent - scheduled - held, warm-up out).
    with store.connect(read_only=True) as con:
        p50, p99, worst = con.execute(
            "SELECT quantile_cont(schedule_lag_ms, 0.5), quantile_cont(schedule_lag_ms, 0.99), max(schedule_lag_ms) "
            "FROM requests WHERE NOT is_warmup AND sent_mono_s IS NOT NULL"
        ).fetchone()
    assert (p50, p99, worst) == pytest.approx(
        (run.schedule_lag_p50_ms, run.schedule_lag_p99_ms, run.schedule_lag_max_ms)
    )

    # The twin sends meta_info.queue_time under --enable-metrics: the queueing share is measured.
    assert all(r["server_queue_time_s"] is not None and r["server_queue_time_s"] >= 0 for r in completed)
    assert row.queue_share_source == "server" and 0 <= row.p95_queue_share <= 1
    # No capacity sweep here: occupancy is the share of the twin's KV pool its running requests held.
    assert row.batch_occupancy_basis == "kv_pool" and 0 < row.batch_occupancy <= 1
    assert row.running_cap_share is not None and 0 < row.running_cap_share <= 1  # of the cap it enforces (4)
    # Its CUDA graphs are capped at --max-running-requests (SGLang's default cap, capped): every decode step fits.
    assert row.eager_decode_share == 0.0


@pytest.mark.timeout(120)
def test_a_fleets_running_cap_share_divides_each_worker_by_its_own_cap(tmp_path):
    """Two workers (caps 2 and 3) each loaded by one shard of the run: occupancy is the fleet's running
    requests over its 5 slots, never the sum over workers divided by one worker's cap."""
    caps = (2, 3)
    workload = make_workload([0.01 * i for i in range(16)], input_tokens=64, output_tokens=24)
    run_dir = tmp_path / "run"
    # w1's graphs hold one request: its decode steps of 2 or 3 run eagerly (counted, not priced: docs/twin.md).
    with provision(_twin("w0", "--max-running-requests", "2"), tmp_path / "w0") as w0, \
            provision(_twin("w1", "--max-running-requests", "3", "--cuda-graph-max-bs", "1"), tmp_path / "w1") as w1:  # fmt: skip
        fleet = EndpointSpec("fleet", EndpointMode.ATTACH, "deepseek-ai/DeepSeek-V3", (), "H200", 2 * GPUS,
                             USD_PER_GPU_HOUR, url=w0.url, worker_urls=(w0.url, w1.url))  # fmt: skip
        with provision(fleet, run_dir) as endpoint, probing(endpoint, run_dir, "e2e-fleet", interval_s=0.05):
            start_at = time.time() + 1.0
            shards = [
                ReplayConfig(
                    url=url,
                    run_id="e2e-fleet",
                    shard_index=k,
                    shard_count=2,
                    start_at_epoch_s=start_at,
                    request_timeout_s=30,
                )  # fmt: skip
                for k, url in enumerate((w0.url, w1.url))
            ]
            dirs = [run_dir / f"shard-{k}" for k in range(2)]

            async def both():
                return await asyncio.gather(*(run_replay_async(workload, c, d) for c, d in zip(shards, dirs)))

            asyncio.run(both())
    merge_shard_runs(dirs, run_dir / "merged")
    _, info, row = _ingest(tmp_path / "wh", run_dir, run_dir / "merged", fleet)
    assert info.requests_ok == 16

    # By hand from server_samples.parquet: each worker's num_running_reqs, each sample held until the
    # next one or the window's end, over the measured window; the fleet's sum over the fleet's slots.
    samples = pq.read_table(run_dir / SERVER_SAMPLES_FILE).to_pylist()
    assert {s["source_url"]: s["value"] for s in samples if s["kind"] == "info"} == {w0.url: 2, w1.url: 3}
    start, end = info.t0_wall_s + info.warmup_s, info.t0_wall_s + info.warmup_s + info.window_s
    means = []
    for url, cap in zip((w0.url, w1.url), caps):
        series = sorted((s["sample_wall_s"], s["value"]) for s in samples
                        if s["source_url"] == url and s["metric"] == "sglang:num_running_reqs" and start <= s["sample_wall_s"] < end)  # fmt: skip
        assert max(v for _, v in series) == cap  # each worker ran full at some point: its cap is real
        held = np.diff([t for t, _ in series] + [end])
        means.append(float(np.dot([v for _, v in series], held) / held.sum()))
    assert row.running_cap_share == pytest.approx(sum(means) / sum(caps))
    assert 0 < row.running_cap_share <= 1
    assert 0 < row.eager_decode_share < 1  # w1's steps past its graphs, of both workers' decode steps
