"""A cold server's first batched prefill, as published benchmark runs show it (twin flag --sim-cold-start).

Benchmarks are run on a freshly started server. In every published run the twin is calibrated on, the
first burst of requests (bench_serving starts `--max-concurrency` of them at once) waits far longer
than the same burst on a warm server: the SGLang cookbook's 1K/1K runs on 8×B200 drain their first
burst 3-4× slower than a later 1K/8K run on the same deployment with the same prompt lengths, and
InferenceX's H200 runs (row 7) have a P99 TTFT of about 2 s at every concurrency, from 8 requests
(7k tokens) to 64 (59k tokens), while their steady-state TTFT is a few hundred ms. A one-off cost
of that kind (kernels compiled or tuned the first time a batch shape is seen is the likely cause;
inferred, not verified) is not a load-dependent mechanism, so it is kept apart from the roofline:
the first extend step that batches prompts of different lengths takes `stall_s` longer, once per
engine. A single request never triggers it (the cookbook's concurrency-1 run shows no stall), and
neither do copies of one prompt: InferenceX's benchmark sends 2·C copies of its first prompt as
warm-ups before it measures, yet row 7's P99 TTFT puts the ~2 s wait on the measured run's first
burst, at every concurrency. Where the stall falls is read off those published P99s, not derived.

The stall is one fitted constant per kernel family (CostConstants.cold_prefill_s), fitted with the rest
on the fit set's P99 TTFT (row 7 for Hopper, the cookbook's C = 100 run for Blackwell). Off by default,
so a served twin's first requests are not held; bench/twin_calibration.py and bench/twin_fit.py run every
published point with it.
"""

from __future__ import annotations

from endpoints.sim.cost.cost_model import CostModel, StepWork, UniformDecodeCost, uniform_decode_of
from endpoints.sim.cost.step_batch import ForwardMode, StepBatch


class ColdStartCostModel:
    """Wraps a cost model: the first extend step batching prompts of different lengths costs `stall_s` more."""

    def __init__(self, inner: CostModel, stall_s: float) -> None:
        self._inner = inner
        self._stall_s = stall_s
        self.stalled = False

    def step_time_s(self, batch: StepBatch) -> float:
        time_s = self._inner.step_time_s(batch)
        if self.stalled or batch.mode is not ForwardMode.EXTEND:
            return time_s
        if len({item.prompt_tokens for item in batch.items}) > 1:  # prompts of different lengths
            self.stalled = True
            time_s += self._stall_s
        return time_s

    def step_work(self, batch: StepBatch) -> StepWork:
        return self._inner.step_work(batch)  # the stall adds time, not work

    def uniform_decode(self) -> UniformDecodeCost | None:
        return uniform_decode_of(self._inner)  # a decode step is never stalled
