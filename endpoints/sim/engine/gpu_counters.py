"""What the twin's GPUs would report to NVML and DCGM, counted from the engine's own steps on its clock.

Every GPU of a server runs each forward step together (tensor parallel ranks, and DP attention's ranks, wait for
one another at every layer), so one set of counters stands for all of them. Per step, from the cost model's
StepWork:

- busy: the step's length. NVML's utilization.gpu is the share of its sample period in which a kernel was
  running; a step is kernels back to back (its host-side share, grammar masks or a cold start's stall, is in
  the step's time too, so counted busy).
- SM active: the step's compute-bound seconds (capped at its length). DCGM's SM_ACTIVE counts the cycles an SM
  has a warp resident, warps waiting on memory included, so a real GPU reads higher on memory-bound decode,
  up to the busy share; the twin cannot see occupancy and counts the time the math sets the pace.
- DRAM active: the step's bytes over HBM at the datasheet's peak bandwidth (capped at its length). DCGM's
  DRAM_ACTIVE is the share of cycles the memory interface moves data, so a step that streams at the fitted
  share of peak bandwidth reads that share.

Counters are cumulative seconds since the server started; a step under way counts in proportion to how much
of it has run, so a reading taken mid-step is exact. Fractions over a period are differences of two readings.
"""

from __future__ import annotations

from dataclasses import dataclass

from endpoints.sim.cost.cost_model import StepWork


@dataclass(frozen=True, slots=True)
class GpuReading:
    """Cumulative per-GPU counters at one instant of the engine's clock."""

    at_s: float
    busy_s: float
    sm_active_s: float
    dram_active_s: float

    def activity_since(self, earlier: GpuReading) -> GpuActivity | None:
        """Each counter's share of the time between two readings; None when no time passed."""
        period_s = self.at_s - earlier.at_s
        if period_s <= 0:
            return None

        def share(now: float, then: float) -> float:
            return min(1.0, max(0.0, (now - then) / period_s))

        return GpuActivity(
            period_s,
            share(self.busy_s, earlier.busy_s),
            share(self.sm_active_s, earlier.sm_active_s),
            share(self.dram_active_s, earlier.dram_active_s),
        )


@dataclass(frozen=True, slots=True)
class GpuActivity:
    """Shares (0-1) of one period: what NVML's utilization.gpu and DCGM's SM and DRAM activity report."""

    period_s: float
    busy: float
    sm_active: float
    dram_active: float


class GpuCounters:
    """Per-server counters; the engine adds each step as it starts (steps never overlap)."""

    def __init__(self, hbm_bytes_per_s: float, started_s: float) -> None:
        self._hbm_bytes_per_s = hbm_bytes_per_s
        self.started_s = started_s
        self._done_s = (0.0, 0.0, 0.0)  # busy, SM-active, DRAM-active seconds of the steps before the current one
        self._step: tuple[float, float, float, float] | None = None  # start, end, SM-active, DRAM-active seconds

    def add_step(self, start_s: float, end_s: float, work: StepWork) -> None:
        self.add_step_s(start_s, end_s, work.compute_s, work.hbm_bytes)

    def add_step_s(self, start_s: float, end_s: float, compute_s: float, hbm_bytes: float) -> None:
        """add_step with the step's work as its two figures (the engine's run of quiet decode steps has no StepWork)."""
        if end_s <= start_s:
            return
        self._done_s = self._counted_s(start_s)
        length_s = end_s - start_s
        dram_s = hbm_bytes / self._hbm_bytes_per_s
        self._step = (start_s, end_s, min(compute_s, length_s), min(dram_s, length_s))

    def reading(self, now_s: float) -> GpuReading:
        return GpuReading(now_s, *self._counted_s(now_s))

    def _counted_s(self, now_s: float) -> tuple[float, float, float]:
        """Busy, SM-active and DRAM-active seconds up to `now_s`."""
        step = self._step
        if step is None:
            return self._done_s
        busy_s, sm_active_s, dram_active_s = self._done_s
        start_s, end_s, sm_s, dram_s = step
        ran = min(1.0, max(0.0, (now_s - start_s) / (end_s - start_s)))
        return busy_s + ran * (end_s - start_s), sm_active_s + ran * sm_s, dram_active_s + ran * dram_s
