"""One phase of a disaggregated deployment at saturation, measured on the twin: a prefill server's input tokens/s
per GPU, or a decode server's output tokens/s per GPU, the way the large expert-parallel deployments publish them
(calibration rows 5, 6, 11, 12). Those runs keep each phase saturated for minutes and report its steady rate, so
the twin runs one saturated step of that phase, with the engine its flags build (the same cost model, KV pool and
flag checks as behind HTTP), instead of replaying a request list:

The step's requests are spread evenly over the attention ranks, each rank its share, as a saturated server's are.

- prefill: every attention rank's step full at `--max-prefill-tokens` (SGLang's per-rank prefill budget), of whole
  prompts of the published input length with no cached prefix (random prompts);
- decode: the published batch per GPU, or as many requests as the KV pool holds at that context if fewer, each
  one token a step, at the published input length of context.

The rate is tokens of the step ÷ its time ÷ the server's GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from endpoints.clock import VirtualClock
from endpoints.sim.cost.profiles import CostConstants
from endpoints.sim.cost.step_batch import BatchItem, ForwardMode, StepBatch
from endpoints.sim.engine_builder import build_engine
from endpoints.sim.server_args import parse_server_args


class Phase(str, Enum):
    PREFILL = "prefill"
    DECODE = "decode"


@dataclass(frozen=True, slots=True)
class PhaseResult:
    tokens_per_gpu_s: float  # input tokens/s per prefill GPU, or output tokens/s per decode GPU
    step_s: float
    batch_requests: int  # requests in the step (decode: the running batch; prefill: whole prompts)
    step_tokens: int


def run_phase(flags: list[str], phase: Phase, context_tokens: int, batch_per_gpu: int | None = None,
              cost_constants: CostConstants | None = None) -> PhaseResult:  # fmt: skip
    """The saturated step of `phase` on a server started with `flags` (`batch_per_gpu`: decode's published batch,
    None: as many as the KV pool holds)."""
    args = parse_server_args(flags)
    engine = build_engine(args, VirtualClock(), cost_constants)
    gpus = args.tp_size
    ranks = args.parallel.attention_ranks
    if phase is Phase.PREFILL:
        prompts = max(1, args.max_prefill_tokens * ranks // context_tokens)
        items = tuple(BatchItem(new_tokens=context_tokens, context_tokens=0, rank=i % ranks) for i in range(prompts))
        step = StepBatch(ForwardMode.EXTEND, items)
    else:
        # The ranks' pools together (a rank's own holds up to ranks - 1 fewer: the fitted rows were counted so).
        fits = engine.scheduler.capacity_tokens // (context_tokens + 1)
        prompts = fits if batch_per_gpu is None else min(batch_per_gpu * gpus, fits)
        items = tuple(BatchItem(new_tokens=1, context_tokens=context_tokens, rank=i % ranks) for i in range(prompts))
        step = StepBatch(ForwardMode.DECODE, items)
    step_s = engine.scheduler.cost_model.step_time_s(step)
    return PhaseResult(step.new_tokens / step_s / gpus, step_s, prompts, step.new_tokens)
