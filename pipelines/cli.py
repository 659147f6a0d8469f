"""The `costbench` command: one sub-command per job, each registered by its own module."""

from __future__ import annotations

import argparse
import sys

from pipelines import capture_command, demo_command, replay_command, sim_command, workload_command

_COMMANDS = (workload_command, capture_command, sim_command, replay_command, demo_command)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="costbench", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for command in _COMMANDS:
        command.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
