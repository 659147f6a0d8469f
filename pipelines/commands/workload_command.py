"""`costbench workload inspect FILE --format FORMAT`: what a trace holds, before replaying it."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from workloads.prompts.block_hasher import DEFAULT_BLOCK_TOKENS
from workloads.readers.reader_registry import ReadOptions, known_formats
from workloads.trace_stats import TraceStats, trace_stats
from workloads.workload_file import open_workload


def register(subparsers: argparse._SubParsersAction) -> None:
    workload = subparsers.add_parser("workload", help="inspect trace files")
    actions = workload.add_subparsers(dest="workload_command", required=True)
    inspect = actions.add_parser(
        "inspect",
        help="print requests, duration, token means, prefix reuse and excluded rows of a trace",
        description="Read a trace file and print its size, span, mean token counts, prefix reuse share, "
        "the rows left out and why, and how its token counts and arrivals were obtained.",
    )
    inspect.add_argument("file", metavar="FILE", help="trace file")
    inspect.add_argument("--format", dest="trace_format", required=True, choices=known_formats(), help="trace format")
    inspect.add_argument(
        "--tokenizer",
        type=Path,
        default=None,
        help="local tokenizer.json for sharegpt/gateway text (default: ~4 UTF-8 bytes a token)",
    )
    inspect.add_argument(
        "--block-size",
        type=int,
        default=DEFAULT_BLOCK_TOKENS,
        help=f"tokens per prefix block for sharegpt/gateway (default {DEFAULT_BLOCK_TOKENS})",
    )
    inspect.add_argument("--model", default=None, help="burstgpt/gateway: keep only this model's requests")
    inspect.set_defaults(func=inspect_command)


def stats_table(title: str, stats: TraceStats) -> Table:
    table = Table(title=title, show_header=True)
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_row("requests", f"{stats.requests:,}")
    table.add_row("duration", f"{stats.duration_s:,.1f} s")
    table.add_row("mean input", f"{stats.mean_input_tokens:,.1f} tokens")
    table.add_row("mean output", f"{stats.mean_output_tokens:,.1f} tokens")
    table.add_row("prefix reuse share", f"{stats.prefix_reuse_share:.1%}")
    block = f"{stats.block_size} tokens" if stats.block_size > 0 else "none (no prefix information)"
    table.add_row("block size", block)
    table.add_row("time unit", stats.time_unit)
    arrivals = "none: untimed, needs synthetic arrivals" if stats.arrival_process == "none" else stats.arrival_process
    table.add_row("arrivals", arrivals)
    table.add_row("token counts", stats.token_counter)
    excluded = f"{stats.excluded_rows:,}" + (f" ({stats.excluded_reason})" if stats.excluded_rows else "")
    table.add_row("excluded rows", excluded)
    return table


def inspect_command(args: argparse.Namespace) -> int:
    options = ReadOptions(tokenizer_path=args.tokenizer, block_size=args.block_size, model=args.model)
    # Spooled to a temporary folder, so a trace of any length is inspected in bounded memory.
    with tempfile.TemporaryDirectory(prefix="costbench-inspect-") as spool_dir:
        # A bad trace raises TraceFormatError (here or while the stats read it): pipelines/cli.py makes it one line.
        workload = open_workload(args.file, args.trace_format, Path(spool_dir), options)
        stats = trace_stats(workload)
    # Built here, not at import: the console binds to whatever stdout is current (tests capture it).
    console = Console(file=sys.stdout, width=120)
    header = workload.header
    console.print(stats_table(f"{header.name} ({header.trace_format.value})", stats))
    return 0
