"""The twin's fit and validation tables as data (endpoints/sim/calibration/calibration_tables.py): every published
point is fit or validation, and the target's verdict counts the validation set's throughput, TTFT and TPOT only."""

from __future__ import annotations

from dataclasses import replace
from datetime import date

import pytest

from endpoints.sim.calibration.calibration_tables import (
    FIT_KEYS,
    QUICK_KEYS,
    CalibrationFigure,
    CalibrationSet,
    calibration_set_of,
    error_factor,
    validation_verdict,
)
from endpoints.sim.calibration.published_points import POINTS_BY_KEY
from endpoints.sim.calibration.spec_fitted import ROW8_FIT_KEYS
from endpoints.sim.cost import fitted_constants, fitted_ep_constants

FIGURE = CalibrationFigure(
    point_key="7.c16", calibration_set="validation", metric="mean_ttft", unit="ms", counted=True, twin_value=1.0,
    published_value=1.0, ratio=1.0, point_set="full", setup="8×H200", source="InferenceX", published_sglang_version="0.5.7",
    fitted_sglang_version="0.5.7-0.5.19", constants_fitted_on=date(2026, 12, 2), twin_version="test",
    computed_wall_s=0.0,
)  # fmt: skip


def _figures(*ratios: float, **changes) -> list[CalibrationFigure]:
    return [replace(FIGURE, point_key=f"p{i}", ratio=r, **changes) for i, r in enumerate(ratios)]


def test_the_fit_set_is_the_fitted_constants_and_row_8s_acceptance_every_other_point_validates():
    assert FIT_KEYS == set(fitted_constants.FIT_SET) | set(ROW8_FIT_KEYS) | set(fitted_ep_constants.FIT_SET)
    assert FIT_KEYS <= set(POINTS_BY_KEY) and set(QUICK_KEYS) <= set(POINTS_BY_KEY)
    assert calibration_set_of("8.c8") is CalibrationSet.FIT  # row 8's acceptance fit, not the constants'
    assert calibration_set_of("2.c16") is CalibrationSet.VALIDATION
    assert calibration_set_of("11.decode") is CalibrationSet.FIT  # the expert exchange's fit
    assert calibration_set_of("5.decode") is CalibrationSet.VALIDATION
    # The quick set keeps both kinds, so a quick run still checks predictions.
    assert {calibration_set_of(k) for k in QUICK_KEYS} == set(CalibrationSet)


def test_the_error_factor_is_symmetric_in_over_and_under_prediction():
    assert error_factor([1.1, 1 / 1.1, 1.0]) == pytest.approx(1.1)
    assert error_factor([]) is None


def test_the_verdict_passes_inside_the_target_and_fails_on_the_factor_or_one_ratio_outside():
    assert validation_verdict(_figures(1.10, 0.95, 1.05)).passed
    wide = validation_verdict(_figures(1.20, 0.80, 1.25))  # every ratio within 0.75-1.33, the median 1.2 off
    assert not wide.passed and not wide.outside_bounds
    assert wide.median_error_factor == pytest.approx(1.25)  # |log 0.8| = log 1.25: the median of the three
    one_out = validation_verdict(_figures(1.0, 1.0, 1.0, 1.34))
    assert not one_out.passed and [f.ratio for f in one_out.outside_bounds] == [1.34]
    edges = validation_verdict(_figures(0.75, 1.33, 1.0, 1.0, 1.0))
    assert edges.passed and not edges.outside_bounds  # the bounds themselves are inside


def test_fit_points_and_uncounted_figures_do_not_enter_the_verdict():
    fitted = _figures(3.0, calibration_set="fit")
    p99 = _figures(3.0, metric="p99_ttft", counted=False)
    verdict = validation_verdict(fitted + p99 + _figures(1.0))
    assert verdict.passed and verdict.figures == 1
    assert not validation_verdict(fitted + p99).passed  # no validation figure at all: nothing was checked
