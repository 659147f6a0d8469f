"""The `costbench` command: one sub-command per job, each registered by its own module.

Every failure the user can act on ends here as one line on stderr, `costbench: error: <what and where>`,
with the exit status of docs/README.md (pipelines/commands/cli_errors.py says which failures); a bug keeps its
traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn

from pipelines.commands import capture_command, replay_command, sim_command, validate_command, workload_command
from pipelines.commands.cli_errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, exit_status, one_line
from pipelines.demo import demo_command
from pipelines.instance import run_command

_COMMANDS = (
    workload_command,
    capture_command,
    sim_command,
    replay_command,
    validate_command,
    run_command,
    demo_command,
)


class OneLineParser(argparse.ArgumentParser):
    """argparse, with a usage error on one line (the usage itself is one `--help` away). Sub-command
    parsers are of the same class (add_subparsers makes them so)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="costbench", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for command in _COMMANDS:
        command.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("costbench: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # stdout closed early (`| head`): nothing more to say, and nothing to flush at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED
    except Exception as exc:
        status = exit_status(exc)
        if status is None:
            raise
        print(f"costbench: error: {one_line(exc)}", file=sys.stderr)
        return status


if __name__ == "__main__":
    sys.exit(main())
