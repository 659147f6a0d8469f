"""Run-to-run variation: a real endpoint never runs the same replay twice in the same time, so neither does the twin
when told to (`--sim-run-seed N`; off by default, the canaries of the weekly job turn it on: assets/replay_asset.py).

Three seeded parts, each a multiplicative log-normal factor (docs/twin.md, "Run-to-run variation", says where the
sizes come from):
- per-run efficiency (`--sim-run-efficiency-sd`, default 0.02): the node a run lands on. Same-SKU GPUs differ in
  sustained speed (manufacturing spread and power management); Sinha et al. (SC'22, "Not All GPUs Are Created
  Equal", >18,800 GPU-hours on five clusters) measured 8% average variation between same-SKU GPUs. Taken as the
  span of the central 95% (±2 sd), that is sd 0.02 on every efficiency of the cost model and its fixed costs.
- per-run clock (`--sim-run-clock-sd`, default 0.01): how far under its boost clock the run's GPUs hold (power and
  thermal caps), on the compute-bound parts only (GEMM and attention efficiency); one-sided, never above boost.
- per-step jitter (`--sim-step-jitter-sd`, default 0.03): each forward pass's time, mean-preserving (kernel and host
  noise). Not sized from a published figure: it averages out over a run's ~10^4 steps and moves tails, not means.

The draws come from one PRNG seeded by --sim-run-seed, in a fixed order, so a seed repeats its run exactly.
"""

from __future__ import annotations

import argparse
import math
import random
from dataclasses import dataclass, replace

from endpoints.sim.cost.cost_model import CostModel, StepWork
from endpoints.sim.cost.profiles import CostConstants
from endpoints.sim.cost.step_batch import StepBatch

DEFAULT_EFFICIENCY_SD = 0.02
DEFAULT_CLOCK_SD = 0.01
DEFAULT_STEP_JITTER_SD = 0.03
# The spreads, in RunVariation's field order: flag, default, help.
_SD_FLAGS = (
    ("--sim-run-efficiency-sd", DEFAULT_EFFICIENCY_SD, "log-sd of the run's efficiency (the node it lands on)"),
    ("--sim-run-clock-sd", DEFAULT_CLOCK_SD, "log-sd of how far under boost clock the run's compute holds (one-sided)"),
    ("--sim-step-jitter-sd", DEFAULT_STEP_JITTER_SD, "log-sd of each forward pass's time (mean-preserving)"),
)


@dataclass(frozen=True, slots=True)
class RunVariation:
    seed: int
    efficiency_sd: float = DEFAULT_EFFICIENCY_SD
    clock_sd: float = DEFAULT_CLOCK_SD
    step_jitter_sd: float = DEFAULT_STEP_JITTER_SD

    @staticmethod
    def add_arguments(group: argparse._ArgumentGroup) -> None:
        group.add_argument(
            "--sim-run-seed", type=int, default=None,
            help="turn run-to-run variation on, drawn from this seed (off when unset: every run alike)",
        )  # fmt: skip
        for flag, default, help_ in _SD_FLAGS:
            group.add_argument(flag, type=float, default=default, help=help_)

    @classmethod
    def from_namespace(cls, ns: argparse.Namespace) -> RunVariation | None:
        sds = [getattr(ns, flag[2:].replace("-", "_")) for flag, _, _ in _SD_FLAGS]
        for (flag, _, _), value in zip(_SD_FLAGS, sds, strict=True):
            if not 0.0 <= value <= 0.5:
                raise ValueError(f"{flag} must be in [0, 0.5], got {value}")
        if ns.sim_run_seed is None:
            return None
        return cls(ns.sim_run_seed, *sds)

    def as_server_info(self) -> dict:
        return {
            "sim_run_seed": self.seed,
            "sim_run_efficiency_sd": self.efficiency_sd,
            "sim_run_clock_sd": self.clock_sd,
            "sim_step_jitter_sd": self.step_jitter_sd,
        }


@dataclass(frozen=True, slots=True)
class RunDraw:
    efficiency_factor: float  # multiplies every efficiency and divides the fixed per-layer costs
    clock_factor: float  # <= 1: multiplies the compute efficiencies
    step_seed: int  # seeds the per-step jitter


def draw_run(variation: RunVariation) -> RunDraw:
    rng = random.Random(variation.seed)
    efficiency = math.exp(rng.gauss(0.0, variation.efficiency_sd))
    clock = math.exp(-abs(rng.gauss(0.0, variation.clock_sd)))
    return RunDraw(efficiency, clock, rng.getrandbits(63))


def varied_constants(constants: CostConstants, draw: RunDraw) -> CostConstants:
    """The cost model's constants as this run's node and clocks have them."""
    e, c = draw.efficiency_factor, draw.clock_factor
    return replace(
        constants,
        memory_efficiency=constants.memory_efficiency * e,
        gemm_efficiency=constants.gemm_efficiency * e * c,
        attention_efficiency=constants.attention_efficiency * e * c,
        decode_layer_s=constants.decode_layer_s / e,
        extend_layer_s=constants.extend_layer_s / e,
    )


class JitteredCostModel:
    """Each step's time times exp(N(0, sd) - sd^2 / 2): the mean step time unchanged, the steps no longer alike."""

    def __init__(self, inner: CostModel, sd: float, seed: int) -> None:
        self._inner = inner
        self._sd = sd
        self._rng = random.Random(seed)

    def step_time_s(self, batch: StepBatch) -> float:
        base = self._inner.step_time_s(batch)
        if self._sd == 0.0 or base == 0.0:
            return base
        return base * math.exp(self._rng.gauss(0.0, self._sd) - self._sd * self._sd / 2.0)

    def step_work(self, batch: StepBatch) -> StepWork:
        return self._inner.step_work(batch)  # the same bytes and math, whatever this step's draw
