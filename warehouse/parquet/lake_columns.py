"""The lake tables' column definitions, one ColumnList per table, and their DuckDB types.

Each list lives next to its record (replay/recording/records.py, endpoints/probes/probe_records.py,
warehouse/parquet/run_columns.py and calibration_columns.py); this module only gathers them for the warehouse: the
zero-row files that pin the views' columns (warehouse/backends/store.py) and the column docs shown to people
(warehouse/column_docs.py).
"""

from __future__ import annotations

import pyarrow as pa

from common.record_columns import ColumnList
from endpoints.probes.probe_records import GPU_SAMPLE_COLUMNS, SERVER_SAMPLE_COLUMNS
from replay.recording.records import REQUEST_COLUMNS
from warehouse.parquet.calibration_columns import TWIN_CALIBRATION_COLUMNS, TWIN_CALIBRATION_TABLE
from warehouse.parquet.run_columns import RUNS_COLUMNS

LAKE_COLUMNS: dict[str, ColumnList] = {
    "runs": RUNS_COLUMNS,
    "requests": REQUEST_COLUMNS,
    "server_samples": SERVER_SAMPLE_COLUMNS,
    "gpu_samples": GPU_SAMPLE_COLUMNS,
    TWIN_CALIBRATION_TABLE: TWIN_CALIBRATION_COLUMNS,  # partitioned by week only (its scenario= is fixed)
}
# Columns every lake view takes from the partition folder (week=/scenario=), not from the files.
PATH_COLUMNS = ("week_start", "scenario")

_DUCKDB_TYPES = {
    pa.string(): "VARCHAR",
    pa.bool_(): "BOOLEAN",
    pa.int32(): "INTEGER",
    pa.int64(): "BIGINT",
    pa.float64(): "DOUBLE",
    pa.date32(): "DATE",
}


def duckdb_type(arrow_type: pa.DataType) -> str:
    """The type DuckDB gives a Parquet column of `arrow_type`, as DESCRIBE spells it."""
    if pa.types.is_list(arrow_type):
        return duckdb_type(arrow_type.value_type) + "[]"
    try:
        return _DUCKDB_TYPES[arrow_type]
    except KeyError:
        raise ValueError(f"no DuckDB type known for Arrow type {arrow_type}") from None
