"""`costbench run --week 2026-11-23 --scenario NAME`: the weekly job for chosen weeks and scenarios, through the
instance's run queue as the schedule runs them.

This module only parses the command: the run itself (run_weeks.py) imports Dagster, which takes seconds, so it
is imported when the command runs and every other command starts fast.
"""

from __future__ import annotations

import argparse
from datetime import date
from pathlib import Path

from pipelines.commands.cli_errors import CommandInputError
from pipelines.commands.cli_inputs import positive_int
from workloads.scenarios import configured_scenarios_path, load_scenarios

REPO_ROOT = Path(__file__).resolve().parents[2]  # pipelines/instance/ -> the repository; as assets/resources.py has it


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run", help="run the weekly job for some (week, scenario) partitions through the instance's queue",
        description="Submits one backfill of every --week x --scenario to the Dagster instance, as the Monday "
        "schedule and the UI's Materialize do; the instance's running dagster-daemon (`make dagster`) carries it "
        "out, or one started for the command. Waits for the runs and says how each ended.",
    )  # fmt: skip
    parser.add_argument("--week", type=date.fromisoformat, action="append", required=True,
                        help="a Monday, YYYY-MM-DD (repeat for more weeks)")  # fmt: skip
    parser.add_argument("--scenario", action="append", required=True,
                        help="a scenario of the scenarios file (repeat for more)")  # fmt: skip
    parser.add_argument(
        "--dagster-home", type=Path, default=None,
        help="Dagster instance folder (default: $DAGSTER_HOME, else .dagster_home/ in the repo, as `make dagster`)",
    )  # fmt: skip
    parser.add_argument("--no-wait", action="store_true",
                        help="submit and return (needs a running dagster-daemon: `make dagster`)")  # fmt: skip
    parser.add_argument("--stall-timeout", type=positive_int, default=None, metavar="SECONDS",
                        help="give up when no run has started or finished for this long (default 900)")  # fmt: skip
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    checked_inputs(args.week, args.scenario, set(load_scenarios(configured_scenarios_path(), REPO_ROOT)))
    from pipelines.instance.run_weeks import run_weeks

    return run_weeks(args)


def checked_inputs(weeks: list[date], scenarios: list[str], known: set[str]) -> None:
    """A week that is not a Monday or a scenario that is not in the file is refused by name, before Dagster is
    imported: a typo is answered in about a second."""
    for week in weeks:
        if week.weekday() != 0:
            monday = date.fromordinal(week.toordinal() - week.weekday())
            raise CommandInputError(f"--week {week}: not a Monday (weeks start on Monday: the week of {monday})")
    unknown = [name for name in scenarios if name not in known]
    if unknown:
        raise CommandInputError(f"--scenario {', '.join(unknown)}: not in the scenarios file (it has: "
                                f"{', '.join(sorted(known))})")  # fmt: skip
