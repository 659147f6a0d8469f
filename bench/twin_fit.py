"""Fit the twin's cost-model constants on a declared fit set of published figures.

    python bench/twin_fit.py            # fit, print the constants and the fit residuals
    python bench/twin_fit.py --write    # ... and rewrite endpoints/sim/cost/fitted_constants.py
    python bench/twin_fit.py --check    # fit, and fail if the result differs from the stored constants
    python bench/twin_fit.py --write --vendor nvidia   # refit one constant set, keep the others

For each vendor, least squares (scipy.optimize.least_squares, trust-region reflective) over the log
ratios twin / published of every published figure (throughput per GPU, mean TTFT, mean TPOT, and the
P99 TTFT where published: it pins the cold-start stall apart from the steady prefill cost) of the
fit set's points (row 8's MTP points give their TTFT only: see _fitted_here), each point run on the
twin's engine in virtual time exactly as bench/twin_calibration.py runs it (endpoints/sim/
calibration/published/published_points.py).
The parameters are searched in log space within physical bounds, from fixed starting values, with a
fixed finite-difference step, so a rerun gives the same numbers. They are rounded to three significant
figures before they are stored, and the stored constants' predictions for the fit set are written
beside them (tests check they reproduce).

Every point not in FIT_SET is validation: bench/twin_calibration.py prints the two sets apart.
The constant sets are fitted in parallel, one process each; Hopper's takes about 8 minutes on one core.
Blackwell takes its shares of peak from Hopper's stored fit, and row 8's acceptance length
(bench/twin_spec_fit.py) is fitted against the Hopper constants: after a Hopper refit, refit the
acceptance, then Blackwell, and repeat until nothing moves (docs/twin.md, Calibration).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from endpoints.sim.calibration.published_points import POINTS_BY_KEY, Metric, measure  # noqa: E402
from endpoints.sim.calibration.spec_fitted import ROW8_FIT_KEYS  # noqa: E402
from endpoints.sim.cost import fitted_constants, fitted_ep_constants  # noqa: E402
from endpoints.sim.cost.profiles import EP_CONSTANTS, CostConstants, Vendor, cost_constants_for  # noqa: E402

FITTED_FILE = Path(__file__).resolve().parents[1] / "endpoints" / "sim" / "cost" / "fitted_constants.py"

# The declared fit set: both ends and one middle point of each concurrency sweep (Hopper: row 7, and row 8's
# two acceptance-fit points for their TTFT; AMD: row 9), the cookbook's C = 1 and C = 100 for Blackwell. The
# other points of the same sweeps validate, with every other published point.
FIT_SET: dict[Vendor, tuple[str, ...]] = {
    Vendor.NVIDIA: ("7.c8", "7.c32", "7.c64", "8.c8", "8.c32"),
    Vendor.NVIDIA_BLACKWELL: ("1.c1", "3.c100"),
    Vendor.AMD: ("9.c4", "9.c16", "9.c64"),
}
# What the fit set's rows ran.
SGLANG_VERSION = {
    Vendor.NVIDIA: "0.5.7-0.5.19",
    Vendor.NVIDIA_BLACKWELL: "0.5.6.post1",
    Vendor.AMD: "0.5.19 (ROCm)",
}


@dataclass(frozen=True, slots=True)
class Parameter:
    name: str  # "compute_efficiency" sets gemm_efficiency and attention_efficiency together
    start: float
    low: float
    high: float


# A device-to-device copy on one H200 reaches ~90% of peak HBM bandwidth: no kernel streams faster.
MEMORY_EFFICIENCY_CEILING = 0.9

# Starting values and bounds, per vendor. The fit set has no long-context prefill that could tell the
# GEMMs' share of peak from prefill attention's, so one compute efficiency covers both.
PARAMETERS: dict[Vendor, tuple[Parameter, ...]] = {
    Vendor.NVIDIA: (
        Parameter("memory_efficiency", 0.75, 0.2, MEMORY_EFFICIENCY_CEILING),
        Parameter("compute_efficiency", 0.4, 0.05, 0.9),
        Parameter("decode_layer_s", 100e-6, 10e-6, 1e-3),
        Parameter("extend_layer_s", 1.4e-3, 0.1e-3, 30e-3),
        Parameter("cold_prefill_s", 1.9, 0.01, 30.0),
    ),
    # Blackwell: only the per-layer costs and the cold stall are its own; the shares of the datasheet peaks are
    # Hopper's (SHARED_PEAK_SHARES). Its fit set (the cookbook's C = 1 and C = 100 runs, ~500-token prompts)
    # cannot tell a slow prefill from a slow cold first burst: fitted freely, it put B200's FP8 GEMMs at 5%
    # of peak, which the cookbook's later warm-server run (64 x 500 tokens prefilled inside a 475 ms P99
    # TTFT) rules out. Six figures (the P99 TTFT of C = 100 among them) for three parameters.
    Vendor.NVIDIA_BLACKWELL: (
        Parameter("decode_layer_s", 100e-6, 10e-6, 1e-3),
        Parameter("extend_layer_s", 1.5e-3, 0.1e-3, 30e-3),
        Parameter("cold_prefill_s", 1.8, 0.01, 30.0),
    ),
    Vendor.AMD: (
        Parameter("memory_efficiency", 0.6, 0.2, MEMORY_EFFICIENCY_CEILING),
        Parameter("compute_efficiency", 0.3, 0.05, 0.9),
        Parameter("decode_layer_s", 200e-6, 10e-6, 2e-3),
        Parameter("extend_layer_s", 3e-3, 0.1e-3, 30e-3),
        Parameter("cold_prefill_s", 6.0, 0.01, 30.0),
    ),
}
DIFF_STEP = 0.02  # finite-difference step: 2% of each parameter (the twin is event-driven, not smooth)


# Constant sets that take their shares of peak from another's stored fit instead of fitting them.
SHARED_PEAK_SHARES: dict[Vendor, Vendor] = {Vendor.NVIDIA_BLACKWELL: Vendor.NVIDIA}


def constants_from(vendor: Vendor, values: dict[str, float]) -> CostConstants:
    fields = dict(values)
    if vendor in SHARED_PEAK_SHARES:
        donor = cost_constants_for(SHARED_PEAK_SHARES[vendor])
        fields.setdefault("memory_efficiency", donor.memory_efficiency)
        fields.setdefault("compute_efficiency", donor.gemm_efficiency)
    compute = fields.pop("compute_efficiency")
    return CostConstants(
        sglang_version=SGLANG_VERSION[vendor], gemm_efficiency=compute, attention_efficiency=compute, **fields,
        **fitted_ep_constants.FITTED_EP,  # the expert exchange's, fitted apart (bench/twin_ep_fit.py)
    )  # fmt: skip


def round3(x: float) -> float:
    return float(f"{x:.3g}")


def predictions(keys: tuple[str, ...], constants: CostConstants) -> dict[str, dict[Metric, float]]:
    return {key: measure(POINTS_BY_KEY[key], constants).values for key in keys}


def log_residuals(keys: tuple[str, ...], predicted: dict[str, dict[Metric, float]]) -> list[float]:
    out = []
    for key in keys:
        published = POINTS_BY_KEY[key].published
        out += [math.log(predicted[key][m] / published[m]) for m in published if _fitted_here(key, m)]
    return out


def _fitted_here(key: str, metric: Metric) -> bool:
    """Row 8's MTP points give this fit their TTFT only (prefill, which no drafting touches): their TPOT and
    throughput are what the acceptance length fits (bench/twin_spec_fit.py). Fitting those figures here as
    well made the two fits trade memory efficiency against acceptance without end."""
    return key not in ROW8_FIT_KEYS or metric is Metric.TTFT


def fit_vendor(vendor: Vendor, verbose: bool = True) -> tuple[CostConstants, dict[str, dict[Metric, float]]]:
    params = PARAMETERS[vendor]
    keys = FIT_SET[vendor]

    # x = log(value / start): every parameter moves on the same relative scale.
    def values_at(x: np.ndarray) -> dict[str, float]:
        return {p.name: p.start * float(math.exp(v)) for p, v in zip(params, x)}

    cache: dict[tuple[float, ...], np.ndarray] = {}

    def residuals(x: np.ndarray) -> np.ndarray:
        key = tuple(float(v) for v in x)
        if key not in cache:
            constants = constants_from(vendor, values_at(x))
            cache[key] = np.array(log_residuals(keys, predictions(keys, constants)))
            if verbose:
                r = cache[key]
                shown = ", ".join(f"{p.name}={v:.4g}" for p, v in zip(params, values_at(x).values()))
                print(f"  {vendor.value}: cost {0.5 * float(r @ r):.5f}  {shown}", flush=True)
        return cache[key]

    x0 = np.zeros(len(params))
    low = np.log([p.low / p.start for p in params])
    high = np.log([p.high / p.start for p in params])

    def jacobian(x: np.ndarray) -> np.ndarray:
        """Forward differences of DIFF_STEP in log space (backward at an upper bound)."""
        f0 = residuals(x)
        columns = []
        for i in range(len(x)):
            step = DIFF_STEP if x[i] + DIFF_STEP <= high[i] else -DIFF_STEP
            moved = x.copy()
            moved[i] += step
            columns.append((residuals(moved) - f0) / step)
        return np.column_stack(columns)

    result = least_squares(residuals, x0, jac=jacobian, bounds=(low, high), xtol=1e-3, ftol=1e-3, max_nfev=12)
    fitted = {name: round3(v) for name, v in values_at(result.x).items()}
    constants = constants_from(vendor, fitted)
    return constants, predictions(keys, constants)


def stored_constants(vendor: Vendor) -> CostConstants:
    return cost_constants_for(vendor)


def _literal(constants: CostConstants) -> str:
    lines = []
    for name in CostConstants.__slots__:
        if name in EP_CONSTANTS:  # stored in fitted_ep_constants.py
            continue
        value = getattr(constants, name)
        lines.append(f'        "{name}": {json.dumps(value) if isinstance(value, str) else repr(value)},')
    return "\n".join(lines)


def stored_fit(vendor: Vendor) -> tuple[CostConstants, dict[str, dict[Metric, float]]]:
    """A vendor's stored constants and fit-set predictions, for a --vendor run that leaves it as it is."""
    stored = fitted_constants.FIT_PREDICTIONS
    predicted = {key: {Metric[m]: v for m, v in stored[key].items()} for key in FIT_SET[vendor]}
    return stored_constants(vendor), predicted


def write_fitted(fits: dict[Vendor, tuple[CostConstants, dict[str, dict[Metric, float]]]]) -> None:
    today = datetime.date.today().isoformat()
    fit_keys = tuple(k for v in Vendor for k in FIT_SET[v])
    vendors = "\n".join(f'    "{v.value}": {{\n{_literal(c)}\n    }},' for v, (c, _) in fits.items())
    preds = []
    for _, predicted in fits.values():
        for key, values in predicted.items():
            preds.append(f'    "{key}": {{')
            preds += [f'        "{m.name}": {val!r},' for m, val in values.items()]
            preds.append("    },")
    sets = "; ".join(f"{v.value}: {', '.join(FIT_SET[v])}" for v in Vendor)
    keys = ", ".join(f'"{k}"' for k in fit_keys)
    preds_text = "\n".join(preds)
    FITTED_FILE.write_text(
        f'''"""The cost model's constants per vendor, as plain data (read by profiles.cost_constants_for).

Written by bench/twin_fit.py on {today}: least squares on the log ratios twin / published of every
published figure of the fit set (points of endpoints/sim/calibration/published_points.py):
{sets}.
Every other published point is validation (bench/twin_calibration.py).
Do not edit by hand: rerun `python bench/twin_fit.py --write`.
"""

FIT_DATE = "{today}"
FIT_SET: tuple[str, ...] = ({keys})

FITTED: dict[str, dict] = {{
{vendors}
}}

# What the stored constants give for the fit set (metric -> value), so a test can check they reproduce.
FIT_PREDICTIONS: dict[str, dict[str, float]] = {{
{preds_text}
}}
'''
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite endpoints/sim/cost/fitted_constants.py")
    parser.add_argument("--check", action="store_true", help="exit 1 if the fit differs from the stored constants")
    parser.add_argument("--quiet", action="store_true", help="no per-evaluation lines")
    parser.add_argument(
        "--vendor", action="append", choices=[v.value for v in Vendor],
        help="fit only this constant set (repeatable); the others keep their stored constants",
    )  # fmt: skip
    args = parser.parse_args(argv)
    chosen = [Vendor(v) for v in args.vendor] if args.vendor else list(Vendor)
    for vendor in chosen:
        print(f"fitting {vendor.value} on {', '.join(FIT_SET[vendor])}", flush=True)
    # One process per vendor: the fits are independent and each takes minutes.
    with ProcessPoolExecutor(max_workers=len(chosen)) as pool:
        futures = {vendor: pool.submit(fit_vendor, vendor, not args.quiet) for vendor in chosen}
        fitted = {vendor: future.result() for vendor, future in futures.items()}
    fits = {vendor: fitted[vendor] if vendor in fitted else stored_fit(vendor) for vendor in Vendor}
    for vendor, (constants, predicted) in fitted.items():
        print(f"\n{vendor.value} (SGLang {constants.sglang_version}):")
        for name in CostConstants.__slots__:
            print(f"  {name} = {getattr(constants, name)}")
        for key, values in predicted.items():
            point = POINTS_BY_KEY[key]
            cells = ", ".join(f"{m.value} {values[m] / point.published[m]:.2f}" for m in point.published)
            print(f"  fit {key}: {cells}")
        print()
    if args.write:
        write_fitted(fits)
        print(f"wrote {FITTED_FILE}")
    if args.check:
        differ = [v.value for v, (c, _) in fitted.items() if replace(c) != stored_constants(v)]
        if differ:
            print(f"the fit differs from the stored constants for: {', '.join(differ)}")
            return 1
        print("the fit reproduces the stored constants")
    return 0


if __name__ == "__main__":
    sys.exit(main())
