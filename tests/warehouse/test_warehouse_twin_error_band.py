"""The error band a fleet plan's shapes are read with (warehouse/sql/twin_error_band.sql): single servers and
replicas with the validation figures of single-server points, disaggregated shapes with those of disaggregated
points, each from the latest computed week; figures stored before the `disaggregated` column count as a single
server's."""

from __future__ import annotations

import html
import math
from dataclasses import replace
from datetime import date

import pyarrow.compute as pc
import pytest

from endpoints.sim.calibration.calibration_tables import CalibrationFigure
from warehouse.backends.store import Warehouse
from warehouse.parquet.calibration_columns import (
    TWIN_CALIBRATION_PARTITION,
    TWIN_CALIBRATION_TABLE,
    twin_calibration_table,
)
from warehouse.report.weekly_report import _plan_error

WEEK = date(2026, 11, 16)
FIGURE = CalibrationFigure(
    point_key="7.c16", calibration_set="validation", metric="mean_tpot", unit="ms", counted=True, twin_value=1.0,
    published_value=1.0, ratio=1.0, point_set="full", setup="8xH200", source="test", published_sglang_version="0.5.7",
    fitted_sglang_version="0.5.7", constants_fitted_on=date(2026, 12, 2), twin_version="t", computed_wall_s=0.0,
)  # fmt: skip


def _figures(ratios: list[float], disaggregated: bool) -> list[CalibrationFigure]:
    return [replace(FIGURE, point_key=f"p{i}", ratio=r, disaggregated=disaggregated) for i, r in enumerate(ratios)]


@pytest.fixture
def store(tmp_path) -> Warehouse:
    return Warehouse(tmp_path / "warehouse")


def test_disaggregated_shapes_are_read_with_the_disaggregated_points_band(store):
    single, fleets = [0.9, 1.0, 1.2], [1.4, 1.5]
    table = twin_calibration_table(_figures(single, False) + _figures(fleets, True))
    store.write_partition(TWIN_CALIBRATION_TABLE, WEEK, TWIN_CALIBRATION_PARTITION, table)
    store.refresh()
    band, pd_band = store.twin_error_band(WEEK), store.twin_error_band(WEEK, disaggregated=True)
    assert band is not None and pd_band is not None
    assert (band.figures, band.min_ratio, band.max_ratio) == (3, 0.9, 1.2)
    assert (pd_band.figures, pd_band.min_ratio, pd_band.max_ratio) == (2, 1.4, 1.5)
    assert pd_band.median_error_factor == pytest.approx(math.exp((math.log(1.4) + math.log(1.5)) / 2))
    text = html.unescape(_plan_error(band, pd_band))
    assert "one-server and replica shapes with the twin's validation on 3 published figures of single" in text
    assert "disaggregated shapes (xP + yD) with the twin's validation on 2 published figures of disaggregated" in text


def test_figures_stored_before_the_column_count_as_single_servers_and_no_fleet_band_is_said(store):
    table = twin_calibration_table(_figures([1.1, 1.3], False))
    old = table.drop_columns(["disaggregated"])  # a partition written before the column existed
    assert not pc.any(pc.is_null(table["disaggregated"])).as_py()
    store.write_partition(TWIN_CALIBRATION_TABLE, WEEK, TWIN_CALIBRATION_PARTITION, old)
    store.refresh()
    band = store.twin_error_band(WEEK)
    assert band is not None and band.figures == 2
    assert store.twin_error_band(WEEK, disaggregated=True) is None
    assert "read disaggregated shapes with no band" in _plan_error(band, None)
