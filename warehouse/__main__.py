"""`python -m warehouse refresh --root DIR`: upgrade the warehouse if it is older and rebuild its views and marts."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from warehouse.store import Warehouse


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m warehouse", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    refresh = sub.add_parser("refresh", help="upgrade (if older) and rebuild views and marts from the lake")
    refresh.add_argument(
        "--root", type=Path, default=Path("warehouse"), help="warehouse root (lake/ and costbench.duckdb)"
    )
    args = parser.parse_args(argv)
    store = Warehouse(args.root)
    for note in store.refresh():
        print(f"upgraded: {note}")
    print(f"refreshed {store.db_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
