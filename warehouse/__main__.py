"""`python -m warehouse refresh --root DIR`: upgrade the warehouse if it is older and rebuild its views and marts.

Exit status: 0 refreshed (a lake file it quarantined is named on stderr; the other weeks built); 1 the refresh
failed (the database is held by another process, corrupt or newer than this code, a lake file or the price
table is bad); 2 the command line or --root is unusable; 130 Ctrl-C. Each failure is one line on stderr,
`python -m warehouse: error: <what and where>`; a bug keeps its traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import NoReturn

import duckdb

from warehouse.lake import LakeError
from warehouse.schema_migrations import SchemaVersionError
from warehouse.store import Warehouse, WarehouseError
from workloads.config_file import ConfigFileError

PROG = "python -m warehouse"
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
# What a refresh can meet that the user can act on; anything else is a bug.
REFRESH_ERRORS = (WarehouseError, LakeError, SchemaVersionError, ConfigFileError, duckdb.Error, OSError)


class _OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _unusable_root(root: Path) -> str | None:
    """Why `root` cannot hold a warehouse, or None: it must be a folder, or creatable under one."""
    existing = next((p for p in (root, *root.parents) if os.path.lexists(p)), Path("."))
    if existing.is_dir():
        return None
    return "is a file, not a folder" if existing == root else f"is under {existing}, which is a file"


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror}"
    lines = [line.strip() for line in (str(exc) or type(exc).__name__).splitlines()]
    return "; ".join(line for line in lines if line.strip("^ "))


def main(argv: list[str] | None = None) -> int:
    parser = _OneLineParser(prog=PROG, description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    refresh = sub.add_parser("refresh", help="upgrade (if older) and rebuild views and marts from the lake")
    refresh.add_argument(
        "--root", type=Path, default=Path("warehouse"), help="warehouse root (lake/ and costbench.duckdb)"
    )
    args = parser.parse_args(argv)
    if (why := _unusable_root(args.root)) is not None:
        print(f"{PROG}: error: --root {args.root}: {why}", file=sys.stderr)
        return EXIT_BAD_INPUT
    store = Warehouse(args.root)
    try:
        result = store.refresh()
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except REFRESH_ERRORS as exc:
        print(f"{PROG}: error: refresh of {args.root} failed: {_one_line(exc)}", file=sys.stderr)
        return EXIT_FAILED
    for note in result.upgrade_notes:
        print(f"upgraded: {note}")
    # Each quarantined file was logged (on stderr) with its reason; the other weeks built, so this is no failure.
    count = len(result.quarantined)
    quarantined = f" ({count} lake files quarantined: see table lake_quarantine)" if count else ""
    print(f"refreshed {result.db_path}{quarantined}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
