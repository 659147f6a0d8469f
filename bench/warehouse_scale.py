"""Warehouse at scale, on both backends: ingest rate, time to rebuild the marts, peak memory, and (DuckLake)
commits per second of two concurrent writers.

    python bench/warehouse_scale.py                       # 1M and 10M synthetic request rows, both backends
    python bench/warehouse_scale.py --rows 1000000        # one size
    python bench/warehouse_scale.py --backend local       # the local folder only (no PostgreSQL needed)
    python bench/warehouse_scale.py --quick               # 200k rows

For each size it writes synthetic request rows (N_CHUNKS token chunks each) as 10 weeks x 2 scenarios
partitions with one run each, plus a runs row and a minute of server samples per run, then refreshes
the warehouse in a child process (so its peak RSS is the refresh's own) and prints: ingest rows/s
(write_partition, Parquet encoding and the read-back check included; generation excluded), the first
refresh (every lake file decoded and checksummed before the build), a full rebuild of the same lake
(refresh(full=True); unchanged files: footers only) with the time of each mart's models in it, a one-week refresh
(one week's requests written again for both scenarios, then refresh(weeks=[that week]): the weekly run's refresh,
warehouse/marts/week_scope.py), and the peak RSS. Targets (issues): 10M request rows summarized in <= 10 s on 2
cores, under 4 GB; a one-week refresh at 10M rows <= 10 s.

DuckLake: the same partitions are written into a DuckLake (catalog in PostgreSQL: --catalog URL, else a
throwaway cluster started here with initdb/pg_ctl on 127.0.0.1, as the tests do; data files in a temp
folder), ingest timed the same way (one delete + insert commit per partition), then refreshed in a child
process. Then two writer processes each re-materialize partitions of their own scenario (--commit-rows rows
each) for --concurrency-s seconds: commits per second of the pair, and how many commits lost a race and
were retried.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from endpoints.probes.probe_records import SERVER_SAMPLE_SCHEMA  # noqa: E402
from endpoints.spec import EndpointMode, EndpointSpec  # noqa: E402
from replay.recording.records import REQUEST_RECORD_SCHEMA, RunInfo  # noqa: E402
from warehouse.marts.run_rows import RunContext, build_run_row  # noqa: E402
from warehouse.parquet.lake import list_partitions, read_partition, write_partition  # noqa: E402

WEEKS = 10
SCENARIOS = ("chat-v3-h200", "reason-r1-h200")
N_CHUNKS = 8
T0_WALL_S = 1_741_000_000.0
SPEC = EndpointSpec("v3-8xh200", EndpointMode.SIM, "deepseek-ai/DeepSeek-V3", ("--tp", "8"), "H200", 8, 3.5)


def synthetic_requests(run_id: str, rows: int, window_s: float, rng: np.random.Generator) -> pa.Table:
    sent = np.sort(rng.uniform(0, window_s * 0.9, rows))
    ttft = rng.lognormal(-1.5, 0.5, rows)
    itl = rng.lognormal(-3.5, 0.3, (rows, N_CHUNKS - 1))
    chunks = np.concatenate([(sent + ttft)[:, None], (sent + ttft)[:, None] + np.cumsum(itl, axis=1)], axis=1)
    prompt = rng.integers(500, 8000, rows, dtype=np.int32)
    completion = rng.integers(N_CHUNKS, 800, rows, dtype=np.int32)
    offsets = pa.array(np.arange(0, rows * N_CHUNKS + 1, N_CHUNKS, dtype=np.int32))
    columns = {
        "run_id": pa.array(np.full(rows, run_id)),
        "request_id": pa.array(np.char.add("q", np.arange(rows).astype(str))),
        "session_id": pa.nulls(rows, pa.string()),
        "turn": pa.nulls(rows, pa.int32()),
        "input_tokens": pa.array(prompt),
        "output_tokens": pa.array(completion),
        "scheduled_mono_s": pa.array(sent - rng.uniform(0, 0.002, rows)),
        "sent_mono_s": pa.array(sent),
        "first_token_mono_s": pa.array(chunks[:, 0]),
        "first_answer_mono_s": pa.array(chunks[:, 1]),
        "finish_mono_s": pa.array(chunks[:, -1]),
        "chunk_mono_s": pa.ListArray.from_arrays(offsets, pa.array(chunks.ravel())),
        "prompt_tokens": pa.array(prompt),
        "completion_tokens": pa.array(completion),
        "cached_tokens": pa.array((prompt * rng.uniform(0, 0.9, rows)).astype(np.int32)),
        "reasoning_tokens": pa.array((completion * rng.uniform(0, 0.7, rows)).astype(np.int32)),
        "finish_reason": pa.array(np.full(rows, "length")),
        "http_status": pa.array(np.full(rows, 200, dtype=np.int32)),
        "status": pa.array(np.where(rng.random(rows) < 0.995, "ok", "error")),
        "error_kind": pa.nulls(rows, pa.string()),
        "error_message": pa.nulls(rows, pa.string()),
        "server_e2e_latency_s": pa.array(chunks[:, -1] - sent),
        "server_queue_time_s": pa.nulls(rows, pa.float64()),
        "is_warmup": pa.array(sent < window_s * 0.01),
        "held_s": pa.array(np.zeros(rows)),
        "held_by": pa.nulls(rows, pa.string()),
    }
    for field in REQUEST_RECORD_SCHEMA:  # columns the schema gained since: null, as in an older replay
        columns.setdefault(field.name, pa.nulls(rows, field.type))
    return pa.Table.from_pydict(columns, schema=REQUEST_RECORD_SCHEMA)


def synthetic_samples(run_id: str, window_s: float) -> pa.Table:
    times = T0_WALL_S + np.arange(0, window_s, 1.0)
    rows = []
    for i, t in enumerate(times):
        rows += [
            (run_id, t, "http://127.0.0.1:30000", "sglang:num_running_reqs", "gauge", "{}", float(100 + i % 50)),
            (run_id, t, "http://127.0.0.1:30000", "sglang:token_usage", "gauge", "{}", 0.5),
            (run_id, t, "http://127.0.0.1:30000", "sglang:prompt_tokens_total", "counter", "{}", 4000.0 * i),
            (run_id, t, "http://127.0.0.1:30000", "sglang:cached_tokens_total", "counter", "{}", 2000.0 * i),
        ]
    return pa.Table.from_pylist([dict(zip(SERVER_SAMPLE_SCHEMA.names, r)) for r in rows], schema=SERVER_SAMPLE_SCHEMA)


def build_lake(root: Path, total_rows: int) -> tuple[float, int]:
    """Write the lake; returns (seconds spent in write_partition, rows written)."""
    rng = np.random.default_rng(7)
    per_partition = total_rows // (WEEKS * len(SCENARIOS))
    window_s = 600.0
    monday = date(2025, 1, 6)
    write_s = 0.0
    for w in range(WEEKS):
        week = monday + timedelta(days=7 * w)
        for scenario in SCENARIOS:
            run_id = f"{scenario}-{week}"
            info = RunInfo(
                run_id,
                "bench",
                "sha256:0",
                "synthetic",
                "synthetic",
                0.0,
                None,
                1.0,
                "http://127.0.0.1:30000",
                "sglang",
                T0_WALL_S,
                T0_WALL_S + window_s,
                window_s,
                per_partition,
                per_partition,
                per_partition,
                0.5,
                1.0,
                2.0,
                False,
                False,
                {"version": "0.5.4", "max_running_requests": 256},
                warmup_s=window_s * 0.01,
            )
            requests = synthetic_requests(run_id, per_partition, window_s, rng)
            samples = synthetic_samples(run_id, window_s)
            started = time.perf_counter()
            write_partition(root / "lake", "requests", week, scenario, requests)
            write_s += time.perf_counter() - started
            write_partition(
                root / "lake",
                "runs",
                week,
                scenario,
                build_run_row(info, SPEC, scenario, week, RunContext(slo_ttft_ms=1000, slo_tpot_ms=50, target_rps=100)),
            )
            write_partition(root / "lake", "server_samples", week, scenario, samples)
    return write_s, per_partition * WEEKS * len(SCENARIOS)


def open_store(root: str, memory_limit: str, catalog: str | None):
    from warehouse.backends.ducklake_store import DuckLakeWarehouse
    from warehouse.backends.store import Warehouse

    if catalog:
        return DuckLakeWarehouse.from_url(catalog, Path(root), memory_limit=memory_limit)
    return Warehouse(Path(root), memory_limit=memory_limit)


def refresh_child(root: str, memory_limit: str, catalog: str | None, partition_rows: int) -> None:
    """In a fresh process: refresh, rebuild in full, write one week again and refresh that week; print JSON with
    times, each mart's share of the full rebuild (dbt's own timing of each model) and peak RSS."""
    import resource

    store = open_store(root, memory_limit, catalog)
    started = time.perf_counter()
    store.refresh()
    refresh_s = time.perf_counter() - started
    started = time.perf_counter()
    again = store.refresh(full=True)
    again_s = time.perf_counter() - started
    week = date(2025, 1, 6) + timedelta(days=7 * (WEEKS // 2))
    rng = np.random.default_rng(11)
    for scenario in SCENARIOS:
        rows = synthetic_requests(f"{scenario}-{week}", partition_rows, 600.0, rng)
        store.write_partition("requests", week, scenario, rows)
    started = time.perf_counter()
    one_week = store.refresh(weeks=[week])
    week_s = time.perf_counter() - started
    assert one_week.scope is not None and one_week.scope.weeks == (week,), one_week.scope
    seconds = dict(again.dbt_seconds)
    # Each mart with the stages that are its own work (dbt times each model alone).
    stages = {
        "run_summary": ("run_windows", "per_run", "itl", "per_run_slo", "run_summary"),
        "cost_interval_rows": ("interval_block_rows", "cost_interval_rows", "cost_intervals"),
        "weekly_trends_undrifted": ("pooled_percentiles", "weekly_trends_undrifted", "weekly_drift", "weekly_trends"),
        "diagnoses": ("diagnoses",),
    }
    timings = {mart: sum(seconds.get(name, 0.0) for name in names) for mart, names in stages.items()}
    peak_bytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(
        json.dumps(
            {
                "refresh_s": refresh_s,
                "again_s": again_s,
                "week_s": week_s,
                **{f"{k}_s": v for k, v in timings.items()},
                "peak_rss_bytes": peak_bytes,
            }
        )
    )


def copy_into_ducklake(local_lake: Path, catalog: str, scratch: Path) -> float:
    """Write every partition of the local lake into the DuckLake; returns the seconds spent writing requests."""
    from warehouse.backends.ducklake_store import DuckLakeWarehouse
    from warehouse.backends.store import LAKE_TABLES

    store = DuckLakeWarehouse.from_url(catalog, scratch)
    write_s = 0.0
    try:
        for table in LAKE_TABLES:
            for p in list_partitions(local_lake, table):
                data = read_partition(local_lake, table, p.week_start, p.scenario)
                started = time.perf_counter()
                store.write_partition(table, p.week_start, p.scenario, data)
                if table == "requests":
                    write_s += time.perf_counter() - started
    finally:
        store.close()
    return write_s


def writer_child(catalog: str, scenario: str, rows: int, seconds: float, start_at: float) -> None:
    """Re-materialize this scenario's partitions in turn until `seconds` have passed; print JSON figures."""
    from warehouse.backends.ducklake_store import DuckLakeWarehouse

    store = DuckLakeWarehouse.from_url(catalog, Path("."))
    rng = np.random.default_rng(abs(hash(scenario)) % 2**32)
    tables = [synthetic_requests(f"{scenario}-w{w}", rows, 600.0, rng) for w in range(WEEKS)]
    store.write_partition("requests", date(2030, 1, 7), scenario, tables[0])  # attach and create before timing
    time.sleep(max(0.0, start_at - time.time()))
    commits = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        week = date(2030, 1, 7) + timedelta(days=7 * (commits % WEEKS))
        store.write_partition("requests", week, scenario, tables[commits % WEEKS])
        commits += 1
    elapsed = time.perf_counter() - started
    print(json.dumps({"commits": commits, "elapsed_s": elapsed, "retries": store.commit_retries}))
    store.close()


def concurrency(catalog: str, rows: int, seconds: float) -> dict:
    """Two writer processes on different partitions of one table, started together."""
    start_at = time.time() + 8.0  # both have loaded the extensions and attached by then
    children = [
        subprocess.Popen(
            [sys.executable, __file__, "--writer-child", catalog, scenario, str(rows), str(seconds), str(start_at)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for scenario in SCENARIOS
    ]
    results = []
    for child in children:
        out, err = child.communicate()
        if child.returncode != 0:
            raise RuntimeError(f"writer failed:\n{err[-3000:]}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    commits = sum(r["commits"] for r in results)
    wall_s = max(r["elapsed_s"] for r in results)
    return {
        "commits": commits,
        "commits_per_s": commits / wall_s,
        "per_writer": [r["commits"] for r in results],
        "retries": sum(r["retries"] for r in results),
    }


@contextlib.contextmanager
def throwaway_catalog(catalog: str | None, data_path: Path):
    """The DuckLake URL to use: the given one, or a fresh database in a throwaway PostgreSQL cluster."""
    if catalog:
        yield f"{catalog}{'&' if '?' in catalog else '?'}data_path={data_path}"
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from postgres_cluster import PostgresCluster, find_bindir

    bindir = find_bindir()
    if bindir is None:
        raise SystemExit("no PostgreSQL server binaries found: install postgresql, or pass --catalog URL")
    cluster = PostgresCluster(bindir)
    cluster.start()
    try:
        db = cluster.create_database("bench")
        yield f"ducklake:postgresql://{db.user}:{db.password}@{db.host}:{db.port}/{db.dbname}?data_path={data_path}"
    finally:
        cluster.stop()


def run_child(args: list[str]) -> dict:
    child = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True)
    if child.returncode != 0:
        raise RuntimeError(f"refresh failed:\n{child.stderr[-3000:]}")
    return json.loads(child.stdout.strip().splitlines()[-1])


def print_row(backend: str, rows: int, write_s: float, figures: dict) -> None:
    print(
        f"{backend:>9} {rows:>11,} {rows / write_s:>14,.0f} {figures['refresh_s']:>10.2f} {figures['again_s']:>8.2f} "
        f"{figures['week_s']:>10.2f} "
        f"{figures['run_summary_s']:>14.2f} "
        f"{figures['cost_interval_rows_s']:>12.2f} {figures['weekly_trends_undrifted_s']:>16.2f} "
        f"{figures['diagnoses_s']:>12.2f} "
        f"{figures['peak_rss_bytes'] / 1e9:>12.2f}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one small size (200k rows)")
    parser.add_argument(
        "--rows", "--sizes", type=int, nargs="*", default=[1_000_000, 10_000_000], help="request rows per size"
    )
    parser.add_argument("--backend", choices=("local", "ducklake", "both"), default="both")
    parser.add_argument("--catalog", help="ducklake:postgresql://... without data_path (default: a throwaway cluster)")
    parser.add_argument("--memory-limit", default="3GB", help="DuckDB memory_limit for the refresh")
    parser.add_argument("--concurrency-s", type=float, default=20.0, help="how long the two writers write")
    parser.add_argument("--commit-rows", type=int, default=10_000, help="request rows per concurrent commit")
    parser.add_argument("--refresh-child", help=argparse.SUPPRESS)
    parser.add_argument("--refresh-catalog", help=argparse.SUPPRESS)
    parser.add_argument("--partition-rows", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--writer-child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.refresh_child:
        refresh_child(args.refresh_child, args.memory_limit, args.refresh_catalog, args.partition_rows)
        return 0
    if args.writer_child:
        catalog, scenario, rows, seconds, start_at = args.writer_child
        writer_child(catalog, scenario, int(rows), float(seconds), float(start_at))
        return 0
    sizes = [200_000] if args.quick else args.rows
    backends = ("local", "ducklake") if args.backend == "both" else (args.backend,)
    print(f"cores: {os.cpu_count()}  DuckDB memory_limit: {args.memory_limit}  chunks per request: {N_CHUNKS}")
    print(
        f"{'backend':>9} {'rows':>11} {'ingest rows/s':>14} {'refresh s':>10} {'full s':>8} {'one week s':>10} "
        f"{'run_summary s':>14} "
        f"{'intervals s':>12} {'weekly_trends s':>16} {'diagnoses s':>12} {'peak RSS GB':>12}"
    )
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="costbench-bench-") as tmp:
            write_s, rows = build_lake(Path(tmp), size)
            per_partition = str(rows // (WEEKS * len(SCENARIOS)))
            child = ["--memory-limit", args.memory_limit, "--partition-rows", per_partition]
            try:
                if "local" in backends:
                    print_row("local", rows, write_s, run_child(["--refresh-child", tmp, *child]))
                if "ducklake" in backends:
                    with throwaway_catalog(args.catalog, Path(tmp) / "ducklake-data") as catalog:
                        lake_write_s = copy_into_ducklake(Path(tmp) / "lake", catalog, Path(tmp))
                        figures = run_child(["--refresh-child", tmp, "--refresh-catalog", catalog, *child])
                        print_row("ducklake", rows, lake_write_s, figures)
                        if size == sizes[-1]:
                            c = concurrency(catalog, args.commit_rows, args.concurrency_s)
                            print(
                                f"ducklake, two writers on different partitions ({args.commit_rows:,} rows a commit, "
                                f"{args.concurrency_s:g} s): {c['commits_per_s']:.2f} commits/s "
                                f"({c['commits']} commits: {c['per_writer'][0]} + {c['per_writer'][1]}; "
                                f"{c['retries']} retried after a conflict)",
                                flush=True,
                            )
            except RuntimeError as exc:
                print(f"{size:>11,}: {exc}")
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
