"""`python -m warehouse refresh [--root DIR | --warehouse LOCATION]`: upgrade the warehouse if it is older and
rebuild its views and marts. `python -m warehouse attach-sql [--warehouse LOCATION]`: print the lines a plain
`duckdb` session runs to open the warehouse read-only. `python -m warehouse cleanup [--min-age-s S]`: remove what
killed writers left (the local lake's staged files; a DuckLake's uncommitted data files older than S, default an
hour) and print each removed path. `python -m warehouse forget --table T --week YYYY-MM-DD --scenario S`: record that
a partition the refresh names missing (written, and gone) was removed on purpose, so it is named no more.

LOCATION is a folder (the local backend) or a `ducklake:postgresql://...` URL (warehouse/backends/backend.py); the
default is $COSTBENCH_WAREHOUSE, else the folder `warehouse`.

Exit status: 0 done; 3 done, but the lake lacks partitions: a file quarantined and not written again, or a
partition the lake's manifest says was written and is gone, each named on stderr (the other weeks built; those weeks
are not judged); 1 the refresh failed (the database is held by another process, corrupt or newer than this code, a
lake file or the price table is bad, the DuckLake catalog cannot be reached); 2 the command line, --root or the
location is unusable; 130 Ctrl-C. Each failure is one line on stderr, `python -m warehouse: error: <what and where>`;
a bug keeps its traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import date
from pathlib import Path
from typing import NoReturn

import duckdb

from common.config_file import ConfigFileError
from warehouse.backends.backend import (
    WAREHOUSE_ENV,
    WarehouseBackend,
    WarehouseLocationError,
    open_warehouse,
    scheme_of,
)
from warehouse.backends.duckdb_extensions import ExtensionError
from warehouse.backends.ducklake_store import DEFAULT_ORPHAN_MIN_AGE_S
from warehouse.backends.store import WarehouseError
from warehouse.parquet.lake import LakeError, forget_partition
from warehouse.schema_migrations import SchemaVersionError

PROG = "python -m warehouse"
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_LAKE_INCOMPLETE = 3
EXIT_INTERRUPTED = 130
# What a refresh can meet that the user can act on; anything else is a bug.
REFRESH_ERRORS = (
    WarehouseError,
    LakeError,
    SchemaVersionError,
    ConfigFileError,
    ExtensionError,
    duckdb.Error,
    OSError,
)
DEFAULT_ROOT = Path("warehouse")


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
    attach = sub.add_parser("attach-sql", help="print the lines that open the warehouse in a plain duckdb session")
    cleanup = sub.add_parser("cleanup", help="remove the files killed writers left, naming each")
    forget = sub.add_parser("forget", help="record that a missing lake partition was removed on purpose")
    refresh.add_argument(
        "--full", action="store_true", help="compute every week's rows (default: only the weeks whose lake changed)"
    )
    forget.add_argument("--table", required=True, help="lake table: runs | requests | server_samples | gpu_samples")
    forget.add_argument("--week", required=True, type=date.fromisoformat, help="the partition's Monday, YYYY-MM-DD")
    forget.add_argument("--scenario", required=True)
    cleanup.add_argument(
        "--min-age-s",
        type=float,
        default=DEFAULT_ORPHAN_MIN_AGE_S,
        help="DuckLake: leave data files younger than this, a live writer's until it commits (default: %(default)g)",
    )
    for command in (refresh, attach, cleanup, forget):
        where = command.add_mutually_exclusive_group()
        where.add_argument("--root", type=Path, help="local warehouse folder (lake/ and costbench.duckdb)")
        where.add_argument(
            "--warehouse",
            help=f"a folder or a ducklake:postgresql://... URL (default: ${WAREHOUSE_ENV}, else ./warehouse)",
        )
    args = parser.parse_args(argv)
    location = str(args.root) if args.root is not None else args.warehouse or os.environ.get(WAREHOUSE_ENV) or ""
    location = location or str(DEFAULT_ROOT)
    if scheme_of(location) is None and (why := _unusable_root(Path(location))) is not None:
        flag = "--root" if args.root is not None else "--warehouse" if args.warehouse else WAREHOUSE_ENV
        print(f"{PROG}: error: {flag} {location}: {why}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        store = open_warehouse(location, DEFAULT_ROOT)
    except WarehouseLocationError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.command == "attach-sql":
        try:
            lines = attach_lines(store)
        except (WarehouseError, ExtensionError) as exc:
            print(f"{PROG}: error: {_one_line(exc)}", file=sys.stderr)
            return EXIT_FAILED
        print("\n".join(lines))
        return 0
    if args.command == "cleanup":
        return _cleanup(store, args.min_age_s)
    if args.command == "forget":
        return _forget(store, args.table, args.week, args.scenario)
    try:
        result = store.refresh(full=args.full)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except REFRESH_ERRORS as exc:
        print(f"{PROG}: error: refresh of {store.location} failed: {_one_line(exc)}", file=sys.stderr)
        return EXIT_FAILED
    for note in result.upgrade_notes:
        print(f"upgraded: {note}")
    # Each quarantined or missing file was logged (on stderr) with its reason; the other weeks built.
    count = len(result.quarantined)
    quarantined = f" ({count} lake files quarantined: see table lake_quarantine)" if count else ""
    missing = f" ({len(result.missing)} lake partitions missing: see table lake_missing)" if result.missing else ""
    print(f"refreshed {result.db_path or result.location}{quarantined}{missing}")
    if result.scope is not None:
        weeks = "every week" if result.scope.weeks is None else f"{len(result.scope.weeks)} week(s)"
        print(f"computed {weeks} from the lake: {result.scope.reason}")
    if result.lake_gaps:
        print(
            f"{PROG}: the lake lacks {result.lake_gaps} partition(s) (tables lake_missing, lake_quarantine): their "
            "weeks are not judged until each is written again",
            file=sys.stderr,
        )
        return EXIT_LAKE_INCOMPLETE
    return 0


def _forget(store: WarehouseBackend, table: str, week_start: date, scenario: str) -> int:
    from warehouse.backends.store import Warehouse

    if not isinstance(store, Warehouse):
        print(f"{PROG}: error: forget is for a local lake; {store.location} keeps no manifest", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        print(forget_partition(store.lake_root, table, week_start, scenario))
    except (LakeError, OSError) as exc:
        print(f"{PROG}: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_FAILED
    return 0


def _cleanup(store: WarehouseBackend, min_age_s: float) -> int:
    if min_age_s < 0:
        print(f"{PROG}: error: --min-age-s {min_age_s:g}: must be >= 0", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        removed = store.cleanup(min_age_s)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except REFRESH_ERRORS as exc:
        print(f"{PROG}: error: cleanup of {store.location} failed: {_one_line(exc)}", file=sys.stderr)
        return EXIT_FAILED
    print("\n".join(f"removed {path}" for path in removed) or "removed nothing")
    return 0


def attach_lines(store: object) -> list[str]:
    """What a plain `duckdb` session runs to read this warehouse read-only (docs/warehouse.md)."""
    from warehouse.backends.ducklake_store import DuckLakeWarehouse, analyst_lines
    from warehouse.backends.store import ROOT_VARIABLE, Warehouse, sql_path_literal

    if isinstance(store, DuckLakeWarehouse):
        return analyst_lines(store.catalog)
    assert isinstance(store, Warehouse)
    root = store.root.absolute()
    # The variable: the views read this folder's lake even before a moved warehouse's next refresh; the search
    # path: a database built before the variable reads its lake by paths relative to the folder.
    return [
        f"ATTACH {sql_path_literal(root / 'costbench.duckdb')} AS costbench (READ_ONLY);",
        f"SET VARIABLE {ROOT_VARIABLE} = {sql_path_literal(root)};",
        f"SET file_search_path = {sql_path_literal(root)};",
        "USE costbench;",
    ]


if __name__ == "__main__":
    sys.exit(main())
