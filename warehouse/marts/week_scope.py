"""Which weeks a refresh computes from the lake, and which it keeps from the last build (docs/warehouse.md, "A week at
a time").

The week_table models (warehouse/dbt/macros/week_table.sql) hold rows that each belong to one week and are computed
from that week's lake rows, the dbt project's SQL, warehouse/schema.sql's views and the prices, and nothing else. So
when the last build (its record in the table mart_build) was made from the same project, schema and prices, a week
whose lake files are the same as then has the same rows, and only the other weeks need computing: those whose lake
changed, plus any the caller names (the weekly job names its partition's). Anything else builds every week: no
record, a record of other inputs, or a caller asking for a full build. The history-wide models (the baselines, the
intervals' run-to-run spread, the drift) are rebuilt in full every time from the week tables, which are small.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date

import duckdb

from warehouse.marts.dbt_build import project_digest
from warehouse.marts.price_table import PriceTable
from warehouse.parquet.lake_columns import LAKE_COLUMNS
from warehouse.sql_files import read_sql

RECORD_TABLE = "mart_build"
# (lake table, week, scenario, what identifies the file's content): one per file a build read.
LakeFile = tuple[str, date, str, str]


@dataclass(frozen=True, slots=True)
class BuildRecord:
    """A build's row in mart_build."""

    inputs_sha256: str  # inputs_sha256() of the build
    lake_snapshot: int | None  # DuckLake: the catalog snapshot it read; None on the local backend
    rebuilt_weeks: tuple[date, ...] | None  # the weeks it computed from the lake; None: every week
    reason: str  # WeekScope.reason


@dataclass(frozen=True, slots=True)
class WeekScope:
    """What a build computes from the lake: some weeks (kept rows for the rest), or every week."""

    weeks: tuple[date, ...] | None  # sorted; None: every week (a full build)
    reason: str  # why: the full build's reason, or what made each week's rows change

    @property
    def full(self) -> bool:
        return self.weeks is None

    def dbt_vars(self, previous_database: str) -> dict[str, object]:
        """The vars week_table reads; none for a full build."""
        if self.weeks is None:
            return {}
        return {"rebuild_weeks": [w.isoformat() for w in self.weeks], "previous_database": previous_database}


def inputs_sha256(prices: PriceTable) -> str:
    """What every week's rows depend on besides the lake: the dbt project, the views, the lake's columns, the prices,
    and the DuckDB that computes them."""
    digest = hashlib.sha256()
    for part in (
        duckdb.__version__,
        project_digest(),
        read_sql("schema.sql"),
        repr(sorted((table, str(columns.schema())) for table, columns in LAKE_COLUMNS.items())),
        repr((prices.gpu_rows, prices.api_rows, prices.book_rows)),
    ):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()


def read_record(con: duckdb.DuckDBPyConnection, catalog: str) -> BuildRecord | None:
    """The last build's record in `catalog` (an attached database's name), or None if it has none."""
    found = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_catalog = ? AND table_schema = 'main' "
        "AND table_name = ?",
        [catalog, RECORD_TABLE],
    ).fetchone()
    if not found or not found[0]:
        return None
    row = con.execute(
        f"SELECT inputs_sha256, lake_snapshot, rebuilt_weeks, reason FROM {catalog}.main.{RECORD_TABLE}"
    ).fetchone()
    if row is None:
        return None
    return BuildRecord(row[0], row[1], None if row[2] is None else tuple(row[2]), row[3])


def changed_weeks(before: Iterable[LakeFile], after: Iterable[LakeFile]) -> set[date]:
    """The weeks with a file added, removed or changed between two builds' lake files."""
    return {week for _, week, _, _ in set(before) ^ set(after)}


def choose(
    previous: BuildRecord | None,
    inputs: str,
    changed: set[date] | None,
    asked: Iterable[date] = (),
    full: bool = False,
) -> WeekScope:
    """The scope of a build with `inputs` (inputs_sha256), given the last build's record and the weeks whose lake
    changed since it (None: not known). `asked`: weeks to compute whatever changed; `full`: compute every week."""
    if full:
        return WeekScope(None, "a full build was asked for")
    if previous is None:
        return WeekScope(None, "no earlier build recorded its inputs")
    if previous.inputs_sha256 != inputs:
        return WeekScope(
            None, "DuckDB, the dbt project, the views, the lake's columns or the prices changed since the last build"
        )
    if changed is None:
        return WeekScope(None, "the lake's changes since the last build are not known")
    asked = set(asked)
    weeks = tuple(sorted(changed | asked))
    parts = []
    if changed:
        parts.append("lake changed in " + ", ".join(w.isoformat() for w in sorted(changed)))
    if asked - changed:
        parts.append("asked for " + ", ".join(w.isoformat() for w in sorted(asked - changed)))
    return WeekScope(weeks, "; ".join(parts) or "nothing changed since the last build")


def write_record(
    con: duckdb.DuckDBPyConnection, scope: WeekScope, inputs: str, lake_snapshot: int | None, wall_s: float
) -> None:
    """Replace mart_build's row (schema.sql creates the table) with this build's."""
    con.execute(f"DELETE FROM {RECORD_TABLE}")
    con.execute(
        f"INSERT INTO {RECORD_TABLE} VALUES (?, ?, ?, ?, ?)",
        [inputs, lake_snapshot, None if scope.weeks is None else list(scope.weeks), scope.reason, wall_s],
    )
