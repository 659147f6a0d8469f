"""`costbench demo`: the weekly job on the embedded default (twin + bundled traces), end to end.

This module only parses the command: the run itself (pipelines/demo/demo_run.py) imports Dagster, which
takes seconds, so it is imported when the demo runs and every other command starts fast.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pipelines.commands.cli_inputs import positive_int

REPO_ROOT = Path(__file__).resolve().parents[2]  # pipelines/demo/ -> the repository; as assets/resources.py has it


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("demo", help="run the weekly job on the twin and the bundled traces")
    # Three weeks tell the story (a baseline, the cache-off week, the week it is back); each week is one run per
    # scenario (five), the three endpoints side by side.
    parser.add_argument("--weeks", type=positive_int, default=3, help="how many past weeks to materialize (default 3)")
    parser.add_argument("--warehouse", type=Path, default=REPO_ROOT / "warehouse", help="warehouse root")
    parser.add_argument(
        "--dagster-home", type=Path, default=None,
        help="Dagster instance folder (default: $DAGSTER_HOME, else .dagster_home/ in the repo)",
    )  # fmt: skip
    parser.add_argument(
        "--stall-timeout", type=positive_int, default=None, metavar="SECONDS",
        help="give up when no run has started or finished for this long (default 900); the demo waits as long "
        "as its runs progress, however slow the machine",
    )  # fmt: skip
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipelines.demo.demo_run import run_demo

    return run_demo(args)
