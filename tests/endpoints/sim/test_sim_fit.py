"""The cost model's constants are fitted, declared and reproducible (bench/twin_fit.py writes
endpoints/sim/cost/fitted_constants.py): the fit set is what the fit script declares, every published point
is either fitted or validation, and the stored constants give exactly the stored fit-set predictions."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from endpoints.sim.calibration import published_points as published
from endpoints.sim.cost import fitted_constants
from endpoints.sim.cost.profiles import Vendor, cost_constants_for

BENCH = Path(__file__).resolve().parents[3] / "bench"


def _bench_module(name: str) -> ModuleType:
    """bench/ is scripts, not a package: load one by path (its own imports find its siblings)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def test_the_stored_fit_set_is_the_one_the_fit_script_declares():
    fit = _bench_module("twin_fit")
    declared = tuple(key for vendor in Vendor for key in fit.FIT_SET[vendor])
    assert fitted_constants.FIT_SET == declared
    assert fitted_constants.FIT_DATE is not None
    assert set(declared) <= set(published.POINTS_BY_KEY)
    validation = set(published.POINTS_BY_KEY) - set(declared)
    # Each sweep keeps points out: row 7's C = 16, row 8's C = 4, 16 and 64, row 9's C = 8 and 32, the
    # cookbook's C = 16, and row 4.
    assert {"7.c16", "8.c4", "8.c16", "8.c64", "9.c8", "9.c32", "2.c16", "4.c32"} <= validation
    for vendor in Vendor:
        assert cost_constants_for(vendor).sglang_version == fit.SGLANG_VERSION[vendor]


def test_the_stored_constants_reproduce_the_stored_fit_predictions():
    point = published.POINTS_BY_KEY["7.c8"]  # the cheapest fit point (under a second)
    measured = published.measure(point, cost_constants_for(Vendor.NVIDIA))
    stored = fitted_constants.FIT_PREDICTIONS["7.c8"]
    assert {m.name: v for m, v in measured.values.items()} == pytest.approx(stored, rel=1e-9)


def test_the_expert_exchange_is_fitted_on_the_declared_rows_and_validated_on_rows_4_and_5():
    from endpoints.sim.cost import fitted_ep_constants

    ep_fit = _bench_module("twin_ep_fit")
    assert fitted_ep_constants.FIT_SET == ep_fit.FIT_SET
    # Rows 6, 11 and 12 (FP8) fit; rows 4 and 5 only validate; nothing of the single-node fit is in it.
    assert {key.split(".")[0] for key in ep_fit.FIT_SET} == {"6", "11", "12"}
    assert not set(ep_fit.FIT_SET) & set(fitted_constants.FIT_SET)
    for key in ("4.c32", "5.prefill", "5.decode"):
        assert key in published.POINTS_BY_KEY and key not in ep_fit.FIT_SET
    # The stored constants give the stored predictions (each point one saturated step: milliseconds).
    assert ep_fit.predictions(fitted_ep_constants.FITTED_EP) == pytest.approx(
        {k: v["THROUGHPUT"] for k, v in fitted_ep_constants.FIT_PREDICTIONS.items()}, rel=1e-9
    )
