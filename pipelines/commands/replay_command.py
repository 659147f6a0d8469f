"""`costbench replay`: replay a trace window against an endpoint and print a one-screen summary.

Exit codes: 0 when the replay ran (failed requests are data, not a failed command); 2 when it could
not start (bad trace, bad options, unreachable endpoint); 130 when interrupted by Ctrl-C or SIGTERM
(results kept, partial; requests not finished are recorded as cancelled).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import re
import sys
import tempfile
from pathlib import Path

from rich.console import Console

from common.run_folder import REQUESTS_FILE, RUN_FILE, SHARD_DIR
from replay.clients.client_registry import Backend
from replay.recording.progress_counters import ReplayProgress
from replay.recording.progress_display import progress_display, progress_wanted
from replay.recording.requests_reader import read_requests
from replay.recording.summary import SUMMARY_COLUMNS, print_summary, summarize
from replay.replay_config import ArrivalProcess, ReplayConfig, ReplayInputError, new_run_id
from replay.runner import run_replay
from replay.schedule.request_selection import rows_to_replay
from replay.schedule.shard import parse_shard
from workloads.readers.reader_registry import known_formats
from workloads.workload import TraceFormatError
from workloads.workload_file import open_workload

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
# A run id names the default output folder, runs/<run_id>: a folder name, no path.
RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
DEFAULT_FLUSH_INTERVAL_S = next(f.default for f in dataclasses.fields(ReplayConfig) if f.name == "flush_interval_s")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "replay",
        help="replay a trace open-loop against an SGLang or OpenAI-compatible endpoint",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--trace", required=True, type=Path, help="trace file")
    parser.add_argument("--format", required=True, dest="trace_format", help=f"one of: {', '.join(known_formats())}")
    parser.add_argument("--url", required=True, help="endpoint base URL, e.g. http://127.0.0.1:30000")
    parser.add_argument("--backend", default=Backend.SGLANG.value, choices=[b.value for b in Backend],
                        help="API to replay with: sglang (native /generate, exact token ids; default), "
                             "openai-chat, openai-completions (text prompts)")  # fmt: skip
    parser.add_argument("--model", default=None, help="OpenAI `model` (default: first id of /v1/models)")
    window = parser.add_argument_group("what to replay")
    window.add_argument("--start-s", type=float, default=0.0, help="trace second the window starts at (default 0)")
    window.add_argument(
        "--duration-s", type=float, default=None, help="window length in trace seconds (default: to the end)"
    )
    window.add_argument("--max-requests", type=int, default=None, help="replay only the first N requests of the window")
    window.add_argument("--arrivals", default=ArrivalProcess.TRACE.value, choices=[a.value for a in ArrivalProcess],
                        help="trace timestamps (default), or synthetic arrivals for traces without them")  # fmt: skip
    window.add_argument("--rate-rps", type=float, default=None, help="synthetic arrivals: mean requests per second")
    window.add_argument(
        "--burstiness", type=float, default=1.0, help="gamma shape: 1 = Poisson, <1 burstier (default 1)"
    )
    window.add_argument("--seed", type=int, default=0, help="prompt materialization and arrival seed")
    timing = parser.add_argument_group("how to replay")
    timing.add_argument("--speedup", type=float, default=1.0, help="replay this many times faster than the trace")
    timing.add_argument(
        "--max-concurrency", type=int, default=None, help="cap on requests in flight (delays are recorded)"
    )
    timing.add_argument(
        "--warmup-s", type=float, default=0.0, help="requests due in the first N replay seconds are flagged warm-up"
    )
    timing.add_argument("--shard", default="0/1", help="replay shard k of n (by session hash), e.g. 0/4")
    timing.add_argument("--start-at-epoch-s", type=float, default=None,
                        help="shared t0 in epoch seconds, so shards on several machines start together")  # fmt: skip
    timing.add_argument("--rendezvous", default=None, metavar="DIR",
                        help="a folder every shard sees: t0 is fixed once all n shards are ready there")  # fmt: skip
    timing.add_argument("--run-id", default=None, metavar="ID",
                        help="this run's id (default: a new one); shards meeting at --rendezvous need the same one, "
                             "a new one for each attempt")  # fmt: skip
    timing.add_argument("--rendezvous-timeout-s", type=float, default=600.0,
                        help="how long a ready shard waits for the others before failing (default 600)")  # fmt: skip
    timing.add_argument("--request-timeout-s", type=float, default=600.0, help="per-request deadline")
    timing.add_argument(
        "--lag-degraded-ms", type=float, default=10.0, help="schedule-lag p99 that flags the client degraded"
    )
    timing.add_argument("--flush-interval-s", type=float, default=DEFAULT_FLUSH_INTERVAL_S,
                        help="a completed record is on disk within this (plus its write), even after SIGKILL "
                             f"(default {DEFAULT_FLUSH_INTERVAL_S:g})")  # fmt: skip
    parser.add_argument("--require-reasoning", action="store_true", help="native backend: send require_reasoning (R1)")
    parser.add_argument("--out", type=Path, default=None,
                        help="output directory (default runs/<run_id>; shard k: runs/<run_id>/shard-<k>)")  # fmt: skip
    parser.add_argument("--api-key-env", default=None, help="name of the environment variable holding the API key")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="live progress bar (default: on a terminal, off when CI is set)")  # fmt: skip
    parser.set_defaults(func=run_command)


def _config(args: argparse.Namespace) -> ReplayConfig:
    try:
        shard_index, shard_count = parse_shard(args.shard)
    except ValueError as exc:
        raise ReplayInputError(str(exc)) from None
    return ReplayConfig(
        url=args.url,
        backend=args.backend,
        speedup=args.speedup,
        start_s=args.start_s,
        duration_s=args.duration_s,
        request_timeout_s=args.request_timeout_s,
        api_key_env=args.api_key_env,
        seed=args.seed,
        run_id=_run_id(args, shard_count),
        lag_degraded_ms=args.lag_degraded_ms,
        flush_interval_s=args.flush_interval_s,
        max_requests=args.max_requests,
        max_concurrency=args.max_concurrency,
        warmup_s=args.warmup_s,
        shard_index=shard_index,
        shard_count=shard_count,
        start_at_epoch_s=args.start_at_epoch_s,
        rendezvous_dir=args.rendezvous,
        rendezvous_timeout_s=args.rendezvous_timeout_s,
        arrival_process=args.arrivals,
        rate_rps=args.rate_rps,
        burstiness=args.burstiness,
        model=args.model,
        require_reasoning=args.require_reasoning,
    )


def _run_id(args: argparse.Namespace, shard_count: int) -> str:
    """The --run-id given, else a new one; shards meeting at a rendezvous must be given theirs (one id for all)."""
    if args.run_id is not None and not RUN_ID_PATTERN.match(args.run_id):
        raise ReplayInputError(
            f"--run-id {args.run_id!r}: use 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or "
            "digit (it names the folder runs/<run_id>)"
        )
    if args.run_id is None and args.rendezvous is not None and shard_count > 1:
        # Each shard process would make its own id, and a shard tells this run's ready files from a stale one's
        # by the id: the shards must be told theirs.
        raise ReplayInputError(
            f"--rendezvous {args.rendezvous} needs --run-id ID, the same for every shard of this run and a new one "
            f"for each attempt (ready files of another run id are ignored), e.g. --run-id {new_run_id()}"
        )
    return args.run_id if args.run_id is not None else new_run_id()


def _out_dir(args: argparse.Namespace, config: ReplayConfig) -> Path:
    if args.out is not None:
        return args.out
    # Shards of one run share its id: each gets a folder of its own under it.
    run_dir = Path("runs") / config.run_id
    return run_dir / SHARD_DIR.format(config.shard_index) if config.shard_count > 1 else run_dir


def run_command(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    console = Console()
    progress = ReplayProgress()
    show = progress_wanted(console) if args.progress is None else args.progress
    out_dir = args.out
    try:
        config = _config(args)
        out_dir = _out_dir(args, config)
        # Only the window is held in memory; the trace is spooled to a temporary folder once.
        with tempfile.TemporaryDirectory(prefix="costbench-replay-") as spool_dir:
            workload = rows_to_replay(open_workload(args.trace, args.trace_format, Path(spool_dir)), config)
        with progress_display(progress, console, show, config.lag_degraded_ms):
            run = run_replay(workload, config, out_dir, progress=progress)
    except (TraceFormatError, ReplayInputError) as exc:
        print(f"costbench replay: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        # Ctrl-C, or SIGTERM (replay/schedule/stop_signals.py): the runner has recorded the unfinished requests as
        # cancelled, merged the records and left run.json marked partial.
        print(f"costbench replay: interrupted; partial results in {out_dir}", file=sys.stderr)
        return EXIT_INTERRUPTED
    summary = summarize(read_requests(out_dir, SUMMARY_COLUMNS), run)
    print_summary(summary, console)
    console.print(f"records: {out_dir / REQUESTS_FILE}   run: {out_dir / RUN_FILE}")
    return 0
