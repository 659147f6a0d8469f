"""Fit the MTP acceptance length of the published point set "row 8" (published_points.py keys 8.c4 to
8.c64: InferenceX PR #3289, 8×H200, SGLang v0.5.19, EAGLE over DeepSeek-R1-0528's MTP head with 2 steps,
3 draft tokens, topk 1, random 8k/1k prompts) and report row 8 as fit vs validation.

    python bench/twin_spec_fit.py            # fit on ROW8_FIT_KEYS, print every row-8 point (about a minute)
    python bench/twin_spec_fit.py --write    # and store it in endpoints/sim/calibration/spec_fitted.py

Nothing publishes that run's acceptance, and acceptance on random tokens is not realistic traffic's, so it
is the one number the twin fits on row 8: `--sim-spec-accept-length`, the mean tokens per verify (bonus
included), by least squares on log(twin / published) of mean TPOT, the figure acceptance moves directly, at
C = 8 and 32. Everything else about row 8 comes from the cost constants bench/twin_fit.py fits on other rows,
so C = 4, 16 and 64 (all three figures) are validation; throughput and TTFT at C = 8 and 32 are not fitted
on, but they share the fitted acceptance, so they count as fit points.
"""

from __future__ import annotations

import argparse
import datetime
import math
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from endpoints.sim.calibration.published_points import POINTS_BY_KEY, Measured, Metric, Point, measure  # noqa: E402
from endpoints.sim.calibration.spec_fitted import ROW8_FIT_KEYS, ROW8_SPEC_ACCEPT_LENGTH  # noqa: E402
from endpoints.sim.cost.profiles import CostConstants  # noqa: E402

ROW8_KEYS = ("8.c4", "8.c8", "8.c16", "8.c32", "8.c64")
ACCEPT_FLAG = "--sim-spec-accept-length"
MAX_ACCEPT_LENGTH = 3.0  # 2 steps: at most both drafts and the bonus token
FITTED_FILE = Path(__file__).resolve().parents[1] / "endpoints" / "sim" / "calibration" / "spec_fitted.py"
GOLDEN = (math.sqrt(5) - 1) / 2


def with_accept_length(point: Point, length: float) -> Point:
    """The point with its acceptance length set (any earlier setting replaced)."""
    flags = list(point.flags)
    if ACCEPT_FLAG in flags:
        at = flags.index(ACCEPT_FLAG)
        del flags[at : at + 2]
    return replace(point, flags=(*flags, ACCEPT_FLAG, f"{length:.4f}"))


def tpot_error(length: float, keys: tuple[str, ...], constants: CostConstants | None) -> float:
    """Sum of squared log ratios of mean TPOT over the fit points, at this acceptance length."""
    total = 0.0
    for key in keys:
        measured = measure(with_accept_length(POINTS_BY_KEY[key], length), constants)
        total += math.log(measured.ratio(Metric.TPOT)) ** 2
    return total


def fit_accept_length(
    keys: tuple[str, ...] = ROW8_FIT_KEYS,
    constants: CostConstants | None = None,
    tol: float = 0.005,
) -> float:
    """Golden-section search over [1, 3] (the error is unimodal in the acceptance length: TPOT falls with it).
    `constants`: the cost model's (default: the fitted ones, endpoints/sim/cost/fitted_constants.py)."""

    def error(length: float) -> float:
        return tpot_error(length, keys, constants)

    lo, hi = 1.0, MAX_ACCEPT_LENGTH
    a, b = hi - GOLDEN * (hi - lo), lo + GOLDEN * (hi - lo)
    fa, fb = error(a), error(b)
    while hi - lo > tol:
        if fa <= fb:
            hi, b, fb = b, a, fa
            a = hi - GOLDEN * (hi - lo)
            fa = error(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + GOLDEN * (hi - lo)
            fb = error(b)
    return round((lo + hi) / 2, 3)


def _median_error_factor(measured: list[Measured]) -> tuple[float, str]:
    factors = sorted(
        (math.exp(abs(math.log(m.ratio(metric)))), f"{m.point.key} {metric.value}")
        for m in measured
        for metric in m.values
    )
    return factors[len(factors) // 2][0], factors[-1][1]


def report(length: float, constants: CostConstants | None = None) -> list[str]:
    lines = [
        f"Row 8 with MTP modelled, --sim-spec-accept-length {length} (fitted on {', '.join(ROW8_FIT_KEYS)}; TPOT)",
        "",
        "| set | point | tok/s/GPU pub / twin | TTFT ms pub / twin | TPOT ms pub / twin | ratios (tput, TTFT, TPOT) |",
        "|---|---|---|---|---|---|",
    ]
    by_set: dict[str, list[Measured]] = {"fit": [], "validation": []}
    for key in ROW8_KEYS:
        m = measure(with_accept_length(POINTS_BY_KEY[key], length), constants)
        kind = "fit" if key in ROW8_FIT_KEYS else "validation"
        by_set[kind].append(m)
        cells = [
            f"{m.point.published[x]:,.1f} / {m.values[x]:,.1f}" for x in (Metric.THROUGHPUT, Metric.TTFT, Metric.TPOT)
        ]
        ratios = ", ".join(f"{m.ratio(x):.2f}" for x in (Metric.THROUGHPUT, Metric.TTFT, Metric.TPOT))
        lines.append(f"| {kind} | {key} | {' | '.join(cells)} | {ratios} |")
    lines.append("")
    for kind, measured in by_set.items():
        median, worst = _median_error_factor(measured)
        lines.append(f"{kind}: median error factor {median:.2f}, worst {worst}")
    return lines


def _write(length: float) -> None:
    text = FITTED_FILE.read_text()
    head, _, _ = text.partition("ROW8_SPEC_ACCEPT_LENGTH = ")
    stamp = f"# fitted {datetime.date.today().isoformat()} by bench/twin_spec_fit.py"
    FITTED_FILE.write_text(f"{head}ROW8_SPEC_ACCEPT_LENGTH = {length}  {stamp}\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="store the fitted value in spec_fitted.py")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    length = fit_accept_length()
    print(f"fitted acceptance length {length} (stored: {ROW8_SPEC_ACCEPT_LENGTH})\n")
    print("\n".join(report(length)))
    if args.write:
        _write(length)
        print(f"\nwrote {FITTED_FILE.name}")
    print(f"\n(wall time {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
