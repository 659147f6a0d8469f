"""`costbench validate`: the scenarios and endpoints files checked before a Monday depends on them.

Both files are parsed as the code location parses them (every key, type and reference, named with the file and the
key path on failure), and every scenario's trace must resolve: a fixed trace is a file, a weekly capture pattern
({week}) names a folder that holds at least one capture. `make validate` runs it before Dagster's own check of the
definitions. Prints each problem on its own line; exit 0 when there is none, 2 otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from endpoints.spec import ENDPOINTS_ENV, load_endpoint_specs
from pipelines.commands.cli_errors import EXIT_BAD_INPUT
from workloads.scenarios import configured_scenarios_path, default_endpoints_path, load_scenarios
from workloads.weekly_traffic import unresolved_trace

REPO_ROOT = Path(__file__).resolve().parents[2]  # pipelines/commands/ -> the repository; as assets/resources.py has it


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "validate", help="check the scenarios and endpoints files, and that every trace resolves",
        description="Parse the scenarios and endpoints files as the pipeline does and check that every scenario's "
        "trace file (or weekly capture pattern) resolves. The files default to $COSTBENCH_SCENARIOS and "
        "$COSTBENCH_ENDPOINTS, else the bundled ones.",
    )  # fmt: skip
    parser.add_argument("--scenarios", type=Path, default=None, help="scenarios file (default as the pipeline's)")
    parser.add_argument("--endpoints", type=Path, default=None, help="endpoints file (default as the pipeline's)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    scenarios_path = args.scenarios or configured_scenarios_path()
    endpoints_path = args.endpoints or Path(os.environ.get(ENDPOINTS_ENV) or default_endpoints_path())
    endpoints = load_endpoint_specs(endpoints_path)  # a bad file raises, named: exit 2 (cli_errors)
    scenarios = load_scenarios(scenarios_path, REPO_ROOT, endpoints)
    problems = [why for scenario in scenarios.values() if (why := unresolved_trace(scenario)) is not None]
    for problem in problems:
        print(f"costbench: error: {scenarios_path}: {problem}", file=sys.stderr)
    if problems:
        return EXIT_BAD_INPUT
    print(f"{scenarios_path}: {len(scenarios)} scenarios, every trace resolves; {endpoints_path}: "
          f"{len(endpoints)} endpoints")  # fmt: skip
    return 0
