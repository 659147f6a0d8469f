"""The twin's fit and validation tables as data: every published point (published_points.py) run on the twin's
engine in virtual time, split into the fit set (the points bench/twin_fit.py fitted the cost constants on, and
row 8's points that fitted the MTP acceptance: their ratios say how well the fit went) and the validation set
(every other point: predictions), and flattened into one CalibrationFigure per point and published metric.

bench/twin_calibration.py prints these tables; the weekly twin_calibration asset stores the figures
(warehouse/schema.sql, twin_calibration) and checks the validation set against the target of docs/twin.md
("Calibration"): median error factor exp(median |log ratio|) at most MAX_MEDIAN_ERROR_FACTOR, every ratio
within RATIO_BOUNDS, over throughput per GPU, mean TTFT and mean TPOT (P99 TTFT is shown, not counted).

PointSet.QUICK runs QUICK_KEYS only (a few seconds; each point exactly as the full run gives it), for tests
and a quick look; PointSet.FULL every point (about a minute).
"""

from __future__ import annotations

import importlib.metadata
import math
import subprocess
import time
from dataclasses import dataclass
from datetime import date
from enum import Enum
from pathlib import Path
from statistics import median

from endpoints.sim.calibration.published_points import POINTS, Measured, Metric, Point, measure
from endpoints.sim.calibration.spec_fitted import ROW8_FIT_KEYS
from endpoints.sim.cost import fitted_constants, fitted_ep_constants
from endpoints.sim.cost.profiles import HARDWARE_PROFILES, cost_constants_for
from endpoints.sim.server_args import ServerArgsError

# The figures the target is set on (docs/twin.md, Calibration): P99 TTFT is shown, not counted.
TARGET = (Metric.THROUGHPUT, Metric.TTFT, Metric.TPOT, Metric.MEDIAN_TTFT, Metric.MEDIAN_TPOT)
MAX_MEDIAN_ERROR_FACTOR = 1.15
RATIO_BOUNDS = (0.75, 1.33)
# PointSet.QUICK runs these points only (each as published): the same figures the full run gives them.
QUICK_KEYS = ("1.c1", "2.c16", "7.c8", "8.c4", "9.c4", "9.c8")
# The cost constants' fit set, row 8's points that fitted the MTP acceptance (bench/twin_spec_fit.py), and the
# expert exchange's (bench/twin_ep_fit.py).
FIT_KEYS = frozenset(fitted_constants.FIT_SET) | frozenset(ROW8_FIT_KEYS) | frozenset(fitted_ep_constants.FIT_SET)
_REPO = Path(__file__).resolve().parents[3]


class PointSet(str, Enum):
    FULL = "full"  # every published point (about a minute)
    QUICK = "quick"  # QUICK_KEYS (a few seconds)


class CalibrationSet(str, Enum):
    FIT = "fit"  # the constants (or row 8's acceptance) were fitted on it: not a prediction
    VALIDATION = "validation"  # a prediction


@dataclass(frozen=True, slots=True)
class CalibrationRun:
    fit: tuple[Measured, ...]  # in published_points.POINTS order
    validation: tuple[Measured, ...]
    not_modelled: tuple[tuple[Point, str], ...]  # points whose flags the twin refuses, with why
    point_set: PointSet
    wall_s: float  # how long the points took to run (s)


@dataclass(frozen=True, slots=True)
class CalibrationFigure:
    """One published figure of one point beside the twin's (a twin_calibration row; its columns are defined in
    warehouse/parquet/calibration_columns.py)."""

    point_key: str
    calibration_set: str
    metric: str
    unit: str
    counted: bool
    twin_value: float
    published_value: float
    ratio: float
    point_set: str
    setup: str
    source: str
    published_sglang_version: str
    fitted_sglang_version: str
    constants_fitted_on: date
    twin_version: str
    computed_wall_s: float
    disaggregated: bool = False  # a prefill/decode deployment (a saturated phase, or a whole fleet closed loop)


@dataclass(frozen=True, slots=True)
class ValidationVerdict:
    figures: int  # counted validation figures (count)
    median_error_factor: float | None  # exp(median |log ratio|) over them (None: no figure)
    outside_bounds: tuple[CalibrationFigure, ...]  # counted validation figures outside RATIO_BOUNDS

    @property
    def passed(self) -> bool:
        """Within the target; no validation figure at all (nothing ran, or an empty partition) is not."""
        factor = self.median_error_factor
        return factor is not None and factor <= MAX_MEDIAN_ERROR_FACTOR and not self.outside_bounds


def calibration_set_of(key: str) -> CalibrationSet:
    return CalibrationSet.FIT if key in FIT_KEYS else CalibrationSet.VALIDATION


def run_calibration(point_set: PointSet) -> CalibrationRun:
    """Every point of `point_set` on the twin, split into the fit and validation sets."""
    started = time.perf_counter()
    measured: list[Measured] = []
    not_modelled: list[tuple[Point, str]] = []
    for point in POINTS:
        if point_set is PointSet.QUICK and point.key not in QUICK_KEYS:
            continue
        try:
            measured.append(measure(point))
        except ServerArgsError as exc:
            not_modelled.append((point, str(exc)))
    fit = tuple(m for m in measured if calibration_set_of(m.point.key) is CalibrationSet.FIT)
    validation = tuple(m for m in measured if calibration_set_of(m.point.key) is CalibrationSet.VALIDATION)
    return CalibrationRun(fit, validation, tuple(not_modelled), point_set, time.perf_counter() - started)


def error_factor(ratios: list[float]) -> float | None:
    """exp(median |log ratio|): 1.10 means the typical figure is 10% off, either way (None: no ratio)."""
    return math.exp(median(abs(math.log(r)) for r in ratios)) if ratios else None


def within_bounds(ratio: float) -> bool:
    return RATIO_BOUNDS[0] <= ratio <= RATIO_BOUNDS[1]


def _unit(point: Point, metric: Metric) -> str:
    if metric is Metric.THROUGHPUT:  # which tokens over which GPUs the publisher counted (ThroughputKind)
        return f"tokens/s per GPU, {point.throughput_kind.value}"
    return "ms"


_METRIC_NAMES = {
    Metric.THROUGHPUT: "throughput_per_gpu",
    Metric.TTFT: "mean_ttft",
    Metric.TPOT: "mean_tpot",
    Metric.P99_TTFT: "p99_ttft",
    Metric.MEDIAN_TTFT: "median_ttft",
    Metric.MEDIAN_TPOT: "median_tpot",
}


def calibration_figures(run: CalibrationRun, twin_version: str, computed_wall_s: float) -> list[CalibrationFigure]:
    """One figure per measured point and published metric, fit set first, in the tables' order."""
    figures = []
    for measured in (*run.fit, *run.validation):
        point = measured.point
        constants = cost_constants_for(HARDWARE_PROFILES[point.hardware].vendor)
        for metric in Metric:
            if metric not in point.published:
                continue
            figures.append(
                CalibrationFigure(
                    point_key=point.key,
                    calibration_set=calibration_set_of(point.key).value,
                    metric=_METRIC_NAMES[metric],
                    unit=_unit(point, metric),
                    counted=metric in TARGET,
                    twin_value=measured.values[metric],
                    published_value=point.published[metric],
                    ratio=measured.ratio(metric),
                    point_set=run.point_set.value,
                    setup=point.setup,
                    source=point.source,
                    published_sglang_version=point.sglang_version,
                    fitted_sglang_version=constants.sglang_version,
                    constants_fitted_on=date.fromisoformat(fitted_constants.FIT_DATE),
                    twin_version=twin_version,
                    computed_wall_s=computed_wall_s,
                    disaggregated=point.disaggregated,
                )
            )
    return figures


def validation_verdict(figures: list[CalibrationFigure]) -> ValidationVerdict:
    """The validation set against the target: its median error factor and the figures outside the bounds."""
    counted = [f for f in figures if f.counted and f.calibration_set == CalibrationSet.VALIDATION.value]
    outside = tuple(f for f in counted if not within_bounds(f.ratio))
    return ValidationVerdict(len(counted), error_factor([f.ratio for f in counted]), outside)


def twin_version() -> str:
    """Which twin computed the figures: `git describe --always --dirty` of the checkout when there is one (the
    cost model changes between releases), else the installed costbench package's version."""
    try:
        described = subprocess.run(
            ["git", "describe", "--tags", "--always", "--dirty"],
            cwd=_REPO,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        if described:
            return described
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        return importlib.metadata.version("costbench")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
