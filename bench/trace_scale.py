"""Reading big traces: rows/s and peak memory of inspecting a trace and of preparing a replay window.

For each big format (Mooncake JSONL, Azure CSV, BurstGPT CSV with sessions) and each size (default 1M
and 10M lines), it writes a trace in a temporary folder by tiling the bundled traces (each copy shifted
in time, Mooncake's block ids shifted so copies share nothing: the structure of the real trace, not a
cache that hits everything) and made-up BurstGPT rows, then measures two things, each in a fresh process
so the peak RSS is that step's alone (ru_maxrss from wait4):

- inspect: `costbench workload inspect FILE --format F` as a user runs it (spool + stats).
- window:  what a replay does before t0 on a spooled trace: read the window's rows (--window-s of trace
  time) and materialize their prompt token ids (replay/schedule/request_selection.py).

Prints one table: lines, file size, seconds, lines/s and peak RSS per step. The bound the docs promise is
2 GB of RSS for both steps at 10M lines. Needs ~6 GB of free disk for the 10M-line files.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb

from workloads.out_of_core import sql_text

REPO = Path(__file__).resolve().parent.parent
TRACES = REPO / "workloads" / "traces"
COSTBENCH = Path(sys.executable).with_name("costbench")
FORMATS = ("mooncake", "azure", "burstgpt")
SUFFIX = {"mooncake": ".jsonl", "azure": ".csv", "burstgpt": ".csv"}


def write_trace(trace_format: str, lines: int, path: Path) -> None:
    """A `lines`-request trace of `trace_format` at `path`, written by DuckDB (fast, and nobody's reader)."""
    con = duckdb.connect(config={"threads": 2, "memory_limit": "1GB", "temp_directory": str(path.parent / "spill")})
    try:
        if trace_format == "mooncake":
            con.execute(
                "CREATE TABLE base AS SELECT row_number() OVER () - 1 AS line, * FROM read_json("
                f"{sql_text(TRACES / 'mooncake_conversation.jsonl')}, format = 'newline_delimited')"
            )
            span_ms, ids = _one_row(con, "SELECT max(timestamp) + 1000, max(list_max(hash_ids)) + 1 FROM base")
            count = _one_row(con, "SELECT count(*) FROM base")[0]
            con.execute(
                f"COPY (SELECT b.timestamp + c.k * {span_ms} AS timestamp, b.input_length, b.output_length, "
                f"list_transform(b.hash_ids, lambda h: h + c.k * {ids}) AS hash_ids "
                f"FROM range({-(-lines // count)}) c(k) CROSS JOIN base b ORDER BY c.k, b.line LIMIT {lines}) "
                f"TO {sql_text(path)} (FORMAT json)"
            )
        elif trace_format == "azure":
            con.execute(
                "CREATE TABLE base AS SELECT row_number() OVER () - 1 AS line, * FROM read_csv("
                f"{sql_text(TRACES / 'azure_conv_2023.csv')}, all_varchar = true)"
            )
            count = _one_row(con, "SELECT count(*) FROM base")[0]
            span_s = _one_row(
                con,
                "SELECT epoch(max(strptime(left(TIMESTAMP, 19), '%Y-%m-%d %H:%M:%S'))) "
                "- epoch(min(strptime(left(TIMESTAMP, 19), '%Y-%m-%d %H:%M:%S'))) + 1 FROM base",
            )[0]
            con.execute(
                "COPY (SELECT strftime(strptime(left(b.TIMESTAMP, 19), '%Y-%m-%d %H:%M:%S') "
                f"+ to_seconds(c.k * {int(span_s)}), '%Y-%m-%d %H:%M:%S') || substr(b.TIMESTAMP, 20) AS TIMESTAMP, "
                "b.ContextTokens, b.GeneratedTokens "
                f"FROM range({-(-lines // count)}) c(k) CROSS JOIN base b ORDER BY c.k, b.line LIMIT {lines}) "
                f"TO {sql_text(path)} (FORMAT csv, HEADER true)"
            )
        else:  # BurstGPT's 8-column variant, with sessions: turns are numbered across the whole file
            con.execute(
                'COPY (SELECT round(i * 0.05, 3) AS "Timestamp", \'c\' || (hash(i // 7) % 500000) AS "Session ID", '
                "0 AS \"Elapsed time\", CASE WHEN i % 4 = 0 THEN 'GPT-4' ELSE 'ChatGPT' END AS \"Model\", "
                '1 + hash(i) % 3000 AS "Request tokens", hash(i * 31) % 800 AS "Response tokens", '
                '0 AS "Total tokens", \'Conversation log\' AS "Log Type" '
                f"FROM range({lines}) t(i)) TO {sql_text(path)} (FORMAT csv, HEADER true)"
            )
    finally:
        con.close()


def _one_row(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[Any, ...]:
    """The one row of an aggregate query (without GROUP BY it always returns one)."""
    row = con.execute(sql).fetchone()
    assert row is not None
    return row


def measured(argv: list[str]) -> tuple[float, float, str]:
    """(wall seconds, peak RSS in MB, stdout) of `argv` run in its own process under the --peak wrapper."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, __file__, "--peak", *argv], capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr}")
    lines = done.stdout.strip().splitlines()
    return elapsed, float(lines[-1].removeprefix("peak ")), "\n".join(lines[:-1])


def peak_of(argv: list[str]) -> int:
    """--peak: run argv, print its output, then 'peak <MB>' of that process alone (wait4's ru_maxrss)."""
    process = subprocess.Popen(argv)
    _, status, usage = os.wait4(process.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code == 0:
        print(f"peak {usage.ru_maxrss / 1024:.0f}", flush=True)
    return code


def window_child(path: str, trace_format: str, cache: str, window_s: float) -> None:
    """--window: open the spooled trace, take a window from its middle, materialize the prompts."""
    import pyarrow.parquet as pq

    from replay.replay_config import ReplayConfig
    from replay.schedule.request_selection import rows_to_replay, select_requests
    from workloads.workload_file import open_workload

    spooled = open_workload(path, trace_format, Path(cache))
    metadata = pq.ParquetFile(spooled.path).metadata
    arrival = metadata.schema.names.index("arrival_s")
    last_s = metadata.row_group(metadata.num_row_groups - 1).column(arrival).statistics.max  # the file is sorted
    config = ReplayConfig(url="http://127.0.0.1:1", start_s=last_s / 2, duration_s=window_s)
    _, prepared = select_requests(rows_to_replay(spooled, config), config)
    print(f"window: {len(prepared):,} requests from {last_s / 2:,.0f} s", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--formats", nargs="+", choices=FORMATS, default=list(FORMATS))
    parser.add_argument("--window-s", type=float, default=600.0, help="trace seconds of the replay window")
    parser.add_argument("--dir", type=Path, default=None, help="where to write the traces (default: a temp dir)")
    parser.add_argument("--peak", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    parser.add_argument("--window", nargs=3, metavar=("PATH", "FORMAT", "CACHE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peak:
        return peak_of(args.peak)
    if args.window:
        window_path, window_format, cache = args.window
        window_child(window_path, window_format, cache, args.window_s)
        return 0
    rows = []
    with tempfile.TemporaryDirectory(prefix="costbench-trace-scale-", dir=args.dir) as folder:
        for trace_format in args.formats:
            for lines in args.lines:
                path = Path(folder) / f"{trace_format}-{lines}{SUFFIX[trace_format]}"
                started = time.perf_counter()
                write_trace(trace_format, lines, path)
                size_mb = path.stat().st_size / 1e6
                print(f"wrote {path.name}: {size_mb:,.0f} MB in {time.perf_counter() - started:.0f} s", flush=True)
                inspect = [str(COSTBENCH), "workload", "inspect", str(path), "--format", trace_format]
                seconds, peak_mb, _ = measured(inspect)
                rows.append((trace_format, lines, size_mb, "inspect", seconds, peak_mb))
                cache = Path(folder) / "cache"
                window = [sys.executable, __file__, "--window-s", str(args.window_s)]
                window += ["--window", str(path), trace_format, str(cache)]
                seconds, peak_mb, out = measured(window)
                rows.append((trace_format, lines, size_mb, "spool+window", seconds, peak_mb))
                print(out, flush=True)
                for child in cache.iterdir():
                    child.unlink()
                path.unlink()
    print(f"\n{'format':10} {'lines':>11} {'file MB':>8} {'step':>13} {'s':>7} {'lines/s':>10} {'peak RSS MB':>12}")
    for trace_format, lines, size_mb, step, seconds, peak_mb in rows:
        print(
            f"{trace_format:10} {lines:>11,} {size_mb:>8,.0f} {step:>13} {seconds:>7.1f} "
            f"{lines / seconds:>10,.0f} {peak_mb:>12,.0f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
