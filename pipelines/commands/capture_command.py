"""`costbench capture LOG -o OUT.parquet`: a gateway request log → a canonical workload without prompt text.

Fails (one line, exit 2, see pipelines/cli.py) before reading the log when the output cannot be written,
and leaves no file behind when the log is bad: the workload is written whole or not at all.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pipelines.commands.cli_errors import CommandInputError
from pipelines.commands.cli_inputs import check_output_file, positive_int
from workloads.gateway_capture import capture_gateway_log
from workloads.prompts.block_hasher import DEFAULT_BLOCK_TOKENS


def register(subparsers: argparse._SubParsersAction) -> None:
    capture = subparsers.add_parser(
        "capture",
        help="turn a gateway request log into a canonical Parquet workload with no prompt text",
        description="Read an OpenAI-style gateway log (JSON Lines) and write the canonical Parquet workload: "
        "arrivals, the logged token usage and chained prefix-block ids instead of text, so prefix sharing "
        "survives and content does not.",
    )
    capture.add_argument("log", type=Path, metavar="LOG", help="gateway log, one JSON request per line")
    capture.add_argument("-o", "--out", type=Path, required=True, metavar="OUT.parquet", help="output file")
    capture.add_argument(
        "--block-size",
        type=positive_int,
        default=DEFAULT_BLOCK_TOKENS,
        help=f"tokens per prefix block (default {DEFAULT_BLOCK_TOKENS}, as Mooncake)",
    )
    capture.add_argument(
        "--tokenizer",
        type=Path,
        default=None,
        help="local tokenizer.json for block boundaries (default: ~4 UTF-8 bytes a token)",
    )
    capture.set_defaults(func=capture_command)


def capture_command(args: argparse.Namespace) -> int:
    if args.log.is_dir():
        raise CommandInputError(f"{args.log}: is a folder, not a gateway log")
    if not args.log.exists():
        raise CommandInputError(f"{args.log}: no such file")
    check_output_file(args.out, "-o")
    try:
        workload = capture_gateway_log(args.log, args.out, args.block_size, args.tokenizer)
    except ValueError as exc:  # TraceFormatError names the log; the rest is about --tokenizer, which names itself
        raise CommandInputError(str(exc)) from None
    excluded = f", {workload.excluded_rows} excluded ({workload.excluded_reason})" if workload.excluded_rows else ""
    print(f"captured {workload.num_requests} requests{excluded} → {args.out}")
    return 0
