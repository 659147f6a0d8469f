"""`costbench sim [SGLang flags]`: run the SGLang twin in the foreground (see endpoints/sim)."""

from __future__ import annotations

import argparse


def register(subparsers) -> None:
    # No parsing here: every argument, flags included, belongs to the twin's own SGLang-style parser.
    # prefix_chars="+" makes "--port" an ordinary word to this parser, so REMAINDER keeps all of it.
    parser = subparsers.add_parser(
        "sim", help="serve the SGLang twin (SGLang's flags; --help for the list)", add_help=False, prefix_chars="+"
    )
    parser.add_argument("sim_args", nargs=argparse.REMAINDER)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from endpoints.sim import main

    return main(list(args.sim_args))
