"""`costbench replay`: replay a trace window against an endpoint and print a one-screen summary.

Exit codes: 0 when the replay ran (failed requests are data, not a failed command); 2 when it could
not start (bad trace, bad options, unreachable endpoint).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import pyarrow.parquet as pq
from rich.console import Console

from replay.parquet_sink import REQUESTS_FILE
from replay.runner import ReplayConfig, ReplayInputError, new_run_id, run_replay
from replay.summary import SUMMARY_COLUMNS, print_summary, summarize
from workloads.reader_registry import known_formats, read_trace
from workloads.workload import TraceFormatError

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "replay",
        help="replay a trace open-loop against an SGLang endpoint",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--trace", required=True, type=Path, help="trace file")
    parser.add_argument("--format", required=True, dest="trace_format", help=f"one of: {', '.join(known_formats())}")
    parser.add_argument("--url", required=True, help="endpoint base URL, e.g. http://127.0.0.1:30000")
    parser.add_argument("--start-s", type=float, default=0.0, help="trace second the window starts at (default 0)")
    parser.add_argument("--duration-s", type=float, default=None, help="window length in trace seconds (default: to the end)")
    parser.add_argument("--speedup", type=float, default=1.0, help="replay this many times faster than the trace")
    parser.add_argument("--out", type=Path, default=None, help="output directory (default runs/<run_id>)")
    parser.add_argument("--seed", type=int, default=0, help="prompt materialization seed")
    parser.add_argument("--api-key-env", default=None, help="name of the environment variable holding the API key")
    parser.add_argument("--request-timeout-s", type=float, default=600.0, help="per-request deadline")
    parser.set_defaults(func=run_command)


def run_command(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    console = Console()
    run_id = new_run_id()
    out_dir = args.out if args.out is not None else Path("runs") / run_id
    try:
        config = ReplayConfig(
            url=args.url,
            speedup=args.speedup,
            start_s=args.start_s,
            duration_s=args.duration_s,
            request_timeout_s=args.request_timeout_s,
            api_key_env=args.api_key_env,
            seed=args.seed,
            run_id=run_id,
        )
        workload = read_trace(args.trace, args.trace_format)
        run = run_replay(workload, config, out_dir)
    except (TraceFormatError, ReplayInputError) as exc:
        print(f"costbench replay: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        # The runner has closed requests.parquet and left run.json marked partial.
        print(f"costbench replay: interrupted; partial results in {out_dir}", file=sys.stderr)
        return EXIT_INTERRUPTED
    summary = summarize(pq.read_table(out_dir / REQUESTS_FILE, columns=list(SUMMARY_COLUMNS)), run)
    print_summary(summary, console)
    console.print(f"records: {out_dir / REQUESTS_FILE}   run: {out_dir / 'run.json'}")
    return 0
