"""`costbench capture LOG -o OUT.parquet`: a gateway request log → a canonical workload without prompt text."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workloads.block_hasher import DEFAULT_BLOCK_TOKENS
from workloads.gateway_capture import capture_gateway_log
from workloads.workload import TraceFormatError

EXIT_BAD_INPUT = 2


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
        type=int,
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
    if args.block_size <= 0:
        print(f"costbench capture: --block-size must be > 0, got {args.block_size}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not args.log.is_file():
        print(f"costbench capture: {args.log}: no such file", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        workload = capture_gateway_log(args.log, args.out, args.block_size, args.tokenizer)
    except (TraceFormatError, ValueError) as exc:
        print(f"costbench capture: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    excluded = f", {workload.excluded_rows} excluded ({workload.excluded_reason})" if workload.excluded_rows else ""
    print(f"captured {workload.num_requests} requests{excluded} → {args.out}")
    return 0
