"""The columns of the lake table `twin_calibration`, defined once: one row per published calibration point and
metric, the twin's figure beside the publisher's (endpoints/sim/calibration/calibration_tables.py,
CalibrationFigure, whose fields these are). The lake partition is (week, TWIN_CALIBRATION_PARTITION): the
table has no scenario, so every week's figures live under that one name, the last computation replacing the
week's earlier one. The `twin_calibration` view and its comments in warehouse/schema.sql, and Dagster's column
schema, are checked against this list (tests/test_column_definitions.py).
"""

from __future__ import annotations

from dataclasses import asdict

import pyarrow as pa

from common.record_columns import Column, ColumnList
from endpoints.sim.calibration.calibration_tables import CalibrationFigure

TWIN_CALIBRATION_TABLE = "twin_calibration"
TWIN_CALIBRATION_PARTITION = "published_points"  # the lake's scenario= folder of every week's figures

TWIN_CALIBRATION_COLUMNS = ColumnList(
    (
        Column(
            "point_key",
            pa.string(),
            "",
            "the published point: <calibration row>.c<concurrency>, a key of published_points.py",
            nullable=False,
        ),
        Column(
            "calibration_set",
            pa.string(),
            "",
            "fit (the cost constants or row 8's MTP acceptance were fitted on the point: not a prediction) | "
            "validation (a prediction)",
            nullable=False,
        ),
        Column(
            "metric",
            pa.string(),
            "",
            "the published figure: throughput_per_gpu | mean_ttft | mean_tpot | p99_ttft",
            nullable=False,
        ),
        Column("unit", pa.string(), "", "the figure's unit, and for throughput which tokens count", nullable=False),
        Column(
            "counted",
            pa.bool_(),
            "",
            "the figure counts toward the target (throughput, mean TTFT, mean TPOT); P99 TTFT is shown, not counted",
            nullable=False,
        ),
        Column(
            "twin_value",
            pa.float64(),
            "",
            "the twin's figure in `unit`, measured as the publisher measured",
            nullable=False,
        ),
        Column("published_value", pa.float64(), "", "the publisher's figure in `unit`", nullable=False),
        Column("ratio", pa.float64(), "ratio", "twin_value / published_value", nullable=False),
        Column(
            "point_set",
            pa.string(),
            "",
            "which points the computation ran: full (every published point) | quick (six of them)",
            nullable=False,
        ),
        Column(
            "setup",
            pa.string(),
            "",
            "the published run: GPUs, model, SGLang release, lengths, concurrency",
            nullable=False,
        ),
        Column("source", pa.string(), "", "where the figure was published", nullable=False),
        Column("published_sglang_version", pa.string(), "", "the SGLang release the publisher ran", nullable=False),
        Column(
            "fitted_sglang_version",
            pa.string(),
            "",
            "the SGLang releases the cost constants of the point's GPU vendor were fitted against "
            "(endpoints/sim/cost/fitted_constants.py)",
            nullable=False,
        ),
        Column(
            "constants_fitted_on", pa.date32(), "", "when the cost constants were fitted (FIT_DATE)", nullable=False
        ),
        Column(
            "twin_version",
            pa.string(),
            "",
            "the twin that computed the figure: git describe of the checkout, else the costbench package version",
            nullable=False,
        ),
        Column(
            "computed_wall_s", pa.float64(), "s since the Unix epoch", "when the figures were computed", nullable=False
        ),
        Column(
            "disaggregated",
            pa.bool_(),
            "",
            "a prefill/decode deployment: one saturated phase of one, or a whole fleet driven closed loop (NULL: "
            "computed before the column existed)",
        ),
    )
)
TWIN_CALIBRATION_SCHEMA = TWIN_CALIBRATION_COLUMNS.schema()


def twin_calibration_table(figures: list[CalibrationFigure]) -> pa.Table:
    """The figures as a TWIN_CALIBRATION_SCHEMA table, in order."""
    return pa.Table.from_pylist([asdict(f) for f in figures], schema=TWIN_CALIBRATION_SCHEMA)


def calibration_figures_of(table: pa.Table) -> list[CalibrationFigure]:
    """The rows of a twin_calibration partition read back as figures."""
    names = [name for name in TWIN_CALIBRATION_COLUMNS.names if name in table.column_names]  # older: fewer
    return [CalibrationFigure(**row) for row in table.select(names).to_pylist()]
