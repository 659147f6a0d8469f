"""Speculative decoding as SGLang runs it for DeepSeek (EAGLE over the MTP/NextN head), modelled.

`--speculative-algorithm EAGLE` (or NEXTN, which SGLang turns into EAGLE) with
`--speculative-num-steps S`, `--speculative-eagle-topk K`, `--speculative-num-draft-tokens D`.
Defaults and checks follow SGLang's server_args (`_handle_speculative_decoding` / spec_info's
`_handle_eagle_family`): unset steps give DeepSeek's (3, 1, 4); with K == 1, D is forced to S + 1;
`--max-running-requests` defaults to 48.

One decode iteration for a batch of B running requests costs, on the same roofline as plain decode:
- the target's verify forward over B x D tokens (each attends to its context; the distinct experts
  that many tokens touch are read; decode's CUDA-graph overheads once),
- the MTP layer's draft-extend over the same B x D tokens, then S - 1 draft forwards of B x K tokens
  (EAGLE's `draft_forward` runs S - 1 times, `_draft_extend_for_decode` once). The MTP layer is
  one MoE layer with its own KV, sharing the output head, costed by the same roofline as a one-layer
  model (`mtp_draft_profile`).
A prefill step also runs the MTP layer over the chunk (the draft's extend after the target's).

Each verify accepts `a` of the drafts (0 <= a <= min(S, D - 1)), drawn per request per step from
`AcceptanceSampler` with an injected RNG, and the request gains a + 1 tokens (the accepted drafts
and the target's bonus token), never more than it has left, so exact output lengths hold. The
per-request counters SGLang reports in meta_info and the server-wide acceptance come from the
same draws (`SpeculativeDecoding`).
"""

from __future__ import annotations

import argparse
import bisect
import random
from collections import deque
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Protocol

from endpoints.sim.cost.cost_model import CostModel, StepWork
from endpoints.sim.cost.profiles import ModelProfile
from endpoints.sim.cost.step_batch import ForwardMode, RankLoad, StepBatch

# SGLang's _auto_choose_speculative_params for DeepseekV3ForCausalLM: (num_steps, eagle_topk, num_draft_tokens).
DEEPSEEK_AUTO_PARAMS = (3, 1, 4)
SPEC_DEFAULT_MAX_RUNNING_REQUESTS = 48  # "Max running requests is reset to 48 for speculative decoding."
MODELLED_ALGORITHMS = {"EAGLE": "EAGLE", "NEXTN": "EAGLE"}  # NEXTN shares EAGLE's implementation
# SGLang's other algorithms need a separate draft model or an n-gram cache: not modelled, refused by name.
UNMODELLED_ALGORITHMS = ("EAGLE3", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "LOOKAHEAD")
# Per-position chance that a draft is accepted given the one before it was, when no acceptance length is
# given: 0.7 gives SGLang's reported DeepSeek MTP acceptance lengths, 2.19 at 2 steps and 2.53 at 3
# (LMSYS 2025-07-17: 2.18 and 2.44; cookbook 8xMI300X EAGLE: 2.61). An assumption from published rows.
DEFAULT_DRAFT_ACCEPT_PROB = 0.7
GAUGE_WINDOW_STEPS = 40  # SGLang's --decode-log-interval: the spec gauges cover the last 40 decode steps


class AcceptShape(str, Enum):
    GEOMETRIC = "geometric"  # every draft accepted with the same chance given the one before it was
    POINT = "point"  # the two whole numbers either side of the mean: the least spread that mean allows


def geometric_mean_length(accept_prob: float, max_drafts: int) -> float:
    """Mean tokens per verify (accepted drafts + the bonus token) for a per-position acceptance chance."""
    return 1.0 + sum(accept_prob**i for i in range(1, max_drafts + 1))


class AcceptanceSampler:
    """Accepted drafts per verify, 0..max_drafts, with mean `mean_length - 1`; the RNG is injected."""

    def __init__(self, max_drafts: int, mean_length: float, shape: AcceptShape, rng: random.Random) -> None:
        if not 1.0 <= mean_length <= max_drafts + 1:
            raise ValueError(f"an acceptance length must be in [1, {max_drafts + 1}], got {mean_length}")
        self._rng = rng
        self.probabilities = _distribution(max_drafts, mean_length - 1.0, shape)
        cumulative, total = [], 0.0
        for p in self.probabilities[:-1]:
            total += p
            cumulative.append(total)
        self._cumulative = cumulative

    @property
    def mean_drafts(self) -> float:
        return sum(k * p for k, p in enumerate(self.probabilities))

    def draw(self) -> int:
        return bisect.bisect_right(self._cumulative, self._rng.random())

    def gains(self, remaining: list[int]) -> list[int]:
        """A verify step's new tokens for requests with `remaining` tokens left each: one draw per request, in
        order (the draws `draw` makes), plus the bonus token, clipped."""
        cumulative, random_ = self._cumulative, self._rng.random
        return [min(1 + bisect.bisect_right(cumulative, random_()), n) for n in remaining]


def _distribution(max_drafts: int, mean: float, shape: AcceptShape) -> tuple[float, ...]:
    if shape is AcceptShape.POINT:
        low = min(int(mean), max_drafts)
        frac = mean - low
        probs = [0.0] * (max_drafts + 1)
        probs[low] = 1.0 - frac
        if frac > 0:
            probs[low + 1] = frac
        return tuple(probs)
    lo, hi = 0.0, 1.0  # bisect the per-position chance whose truncated geometric mean is `mean`
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if geometric_mean_length(mid, max_drafts) - 1.0 < mean else (lo, mid)
    a = (lo + hi) / 2
    return tuple(a**k * (1 - a) for k in range(max_drafts)) + (a**max_drafts,)


@dataclass(frozen=True, slots=True)
class SpecConfig:
    """Speculative decoding as resolved from the flags (SGLang's post-init values)."""

    algorithm: str
    num_steps: int
    eagle_topk: int
    num_draft_tokens: int
    draft_model_path: str
    accept_length: float  # mean tokens per verify, bonus included (SGLang's avg_spec_accept_length)
    accept_shape: AcceptShape = AcceptShape.GEOMETRIC
    seed: int = 0

    @property
    def max_accepted_drafts(self) -> int:
        return min(self.num_steps, self.num_draft_tokens - 1)

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        spec = parser.add_argument_group("speculative decoding (SGLang's flags, modelled)")
        spec.add_argument("--speculative-algorithm", "--speculative-algo", dest="speculative_algorithm", default=None)
        spec.add_argument("--speculative-draft-model-path", "--speculative-draft-model", default=None)
        spec.add_argument("--speculative-num-steps", type=int, default=None)
        spec.add_argument("--speculative-eagle-topk", type=int, default=None)
        spec.add_argument("--speculative-num-draft-tokens", type=int, default=None)
        twin = parser.add_argument_group("speculative decoding, twin only")
        twin.add_argument(
            "--sim-spec-accept-length", type=float, default=None,
            help="mean tokens per verify step, bonus token included (default: 1 + 0.7 + ... + 0.7^steps)",
        )  # fmt: skip
        twin.add_argument(
            "--sim-spec-accept-shape", choices=[s.value for s in AcceptShape], default=AcceptShape.GEOMETRIC.value
        )
        twin.add_argument("--sim-spec-seed", type=int, default=0, help="seed of the per-step acceptance draws")

    @staticmethod
    def from_namespace(ns: argparse.Namespace, model_path: str) -> SpecConfig | None:
        """None without --speculative-algorithm; raises ValueError naming the flag otherwise."""
        if ns.speculative_algorithm is None:
            for flag in ("num_steps", "eagle_topk", "num_draft_tokens", "draft_model_path"):
                if getattr(ns, f"speculative_{flag}") is not None:
                    raise ValueError(f"--speculative-{flag.replace('_', '-')} needs --speculative-algorithm")
            if ns.sim_spec_accept_length is not None:
                raise ValueError("--sim-spec-accept-length needs --speculative-algorithm")
            return None
        name = ns.speculative_algorithm.upper()
        if name in UNMODELLED_ALGORITHMS:
            raise ValueError(
                f"--speculative-algorithm {name} is a real SGLang algorithm, but the twin models only EAGLE/NEXTN"
            )
        if name not in MODELLED_ALGORITHMS:
            raise ValueError(
                f"--speculative-algorithm {ns.speculative_algorithm!r}: unknown (the twin models EAGLE and NEXTN)"
            )
        steps, topk, drafts = ns.speculative_num_steps, ns.speculative_eagle_topk, ns.speculative_num_draft_tokens
        if steps is None:
            if topk is not None or drafts is not None:  # SGLang asserts the same
                raise ValueError("--speculative-eagle-topk/--speculative-num-draft-tokens need --speculative-num-steps")
            steps, topk, drafts = DEEPSEEK_AUTO_PARAMS
        topk = 1 if topk is None else topk
        for flag, value in (("num-steps", steps), ("eagle-topk", topk)):
            if value < 1:
                raise ValueError(f"--speculative-{flag} must be at least 1, got {value}")
        if topk == 1 or drafts is None:
            drafts = steps + 1  # "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1"
        if drafts < 2:
            raise ValueError(f"--speculative-num-draft-tokens must be at least 2, got {drafts}")
        max_drafts = min(steps, drafts - 1)
        length = ns.sim_spec_accept_length
        if length is None:
            length = geometric_mean_length(DEFAULT_DRAFT_ACCEPT_PROB, max_drafts)
        elif not 1.0 <= length <= max_drafts + 1:
            raise ValueError(f"--sim-spec-accept-length must be in [1, {max_drafts + 1}] here, got {length}")
        return SpecConfig(
            MODELLED_ALGORITHMS[name], steps, topk, drafts, ns.speculative_draft_model_path or model_path,
            length, AcceptShape(ns.sim_spec_accept_shape), ns.sim_spec_seed,
        )  # fmt: skip


def spec_server_info(config: SpecConfig | None) -> dict:
    """The speculative fields of /server_info under SGLang's names (None when off), plus the twin's."""
    if config is None:
        return dict.fromkeys(
            ("speculative_algorithm", "speculative_draft_model_path", "speculative_num_steps",
             "speculative_eagle_topk", "speculative_num_draft_tokens"),
        )  # fmt: skip
    return {
        "speculative_algorithm": config.algorithm,
        "speculative_draft_model_path": config.draft_model_path,
        "speculative_num_steps": config.num_steps,
        "speculative_eagle_topk": config.eagle_topk,
        "speculative_num_draft_tokens": config.num_draft_tokens,
        "sim_spec_accept_length": config.accept_length,
        "sim_spec_accept_shape": config.accept_shape.value,
        "sim_spec_seed": config.seed,
    }


# -- cost --------------------------------------------------------------------------------------------


def mtp_draft_profile(model: ModelProfile) -> ModelProfile:
    """The MTP (NextN) module as a one-layer model for the roofline: one MoE layer (attention, router,
    shared and routed experts, eh_proj) plus the output head it shares with the model and reads every
    draft step (the embedding it shares is a row lookup)."""
    if model.mtp_params <= 0:
        raise ValueError(f"{model.name} has no MTP (NextN) layer to draft with")
    routed = model.num_routed_experts * model.expert_params
    return replace(
        model,
        name=f"{model.name} MTP layer",
        num_layers=1,
        num_dense_layers=0,
        total_params=model.mtp_params + 2 * model.lm_head_params,  # the profile counts embedding and head
        active_params=model.mtp_params - routed + model.experts_per_token * model.expert_params + model.lm_head_params,
        mtp_params=0,
    )


class SpeculativeCostModel:
    """A CostModel for steps under speculative decoding; `target` and `draft` are the same roofline for
    the model and for its MTP layer. The scheduler hands it decode batches whose items compute
    num_draft_tokens tokens each (the verify)."""

    def __init__(self, config: SpecConfig, target: CostModel, draft: CostModel) -> None:
        self._config = config
        self._target = target
        self._draft = draft
        # The draft steps' batch of the last verify batch: its time and then its work read the same object, which
        # the draft model's cost cache then recognises.
        self._steps: tuple[StepBatch, StepBatch | None] | None = None

    def step_time_s(self, batch: StepBatch) -> float:
        target_s = self._target.step_time_s(batch)
        draft_s = self._draft.step_time_s(batch)  # the draft's extend over the same tokens
        steps = self._draft_steps(batch)
        if steps is not None:
            draft_s += (self._config.num_steps - 1) * self._draft.step_time_s(steps)
        return target_s + draft_s

    def step_work(self, batch: StepBatch) -> StepWork:
        work = self._target.step_work(batch) + self._draft.step_work(batch)
        steps = self._draft_steps(batch)
        if steps is not None:
            one = self._draft.step_work(steps)
            n = self._config.num_steps - 1
            work += StepWork(n * one.compute_s, n * one.hbm_bytes)
        return work

    def _draft_steps(self, batch: StepBatch) -> StepBatch | None:
        """One of the draft's later steps in a decode (each request's top-k candidates), or None: it takes one step."""
        last = self._steps
        if last is not None and last[0] is batch:
            return last[1]
        steps = None
        if batch.mode is ForwardMode.DECODE and self._config.num_steps > 1:
            topk = self._config.eagle_topk
            # Each request's top-k candidates over its context and the verified tokens (per rank, from the sums).
            steps = StepBatch(batch.mode, (), tuple(RankLoad.of_uniform(load.requests, topk, load.kv_tokens, 0)
                                                    for load in batch.loads))  # fmt: skip
        self._steps = (batch, steps)
        return steps


# -- acceptance, per request and server-wide ----------------------------------------------------------


@dataclass(slots=True)
class SpecCounters:
    """One request's verify steps, as SGLang's Req counts them."""

    proposed_per_verify: int  # num_draft_tokens - 1
    verify_ct: int = 0
    correct_drafts: int = 0
    histogram: list[int] = field(default_factory=list)  # index: drafts accepted in a step; value: steps

    def add(self, accepted: int) -> None:
        self.verify_ct += 1
        self.correct_drafts += accepted
        if len(self.histogram) <= accepted:
            self.histogram.extend([0] * (accepted + 1 - len(self.histogram)))
        self.histogram[accepted] += 1

    def meta_info(self, completion_tokens: int) -> dict:
        """The fields SGLang adds to a finished request's meta_info (tokenizer_manager's
        fill_spec_decoding_meta), its backward-compatible aliases included; none before a verify."""
        if self.verify_ct == 0:
            return {}
        proposed = self.verify_ct * self.proposed_per_verify
        histogram = list(self.histogram)
        return {
            "spec_accept_rate": self.correct_drafts / proposed,
            "spec_accept_length": completion_tokens / self.verify_ct,  # the prefill's token counts too
            "spec_num_correct_drafts": self.correct_drafts,
            "spec_num_proposed_drafts": proposed,
            "spec_verify_ct": self.verify_ct,
            "spec_accepted_drafts": self.correct_drafts,
            "spec_proposed_drafts": proposed,
            "spec_correct_drafts_histogram": histogram,
            "spec_accept_histogram": histogram,
        }


class HasSpecCounters(Protocol):
    spec: SpecCounters | None


class SpeculativeDecoding:
    """The scheduler's hook: how many tokens a verify computes and each request gains, and the counts."""

    def __init__(self, config: SpecConfig, sampler: AcceptanceSampler) -> None:
        self.config = config
        self.verify_tokens = config.num_draft_tokens
        self._sampler = sampler
        self.total_verify_ct = 0  # request-verifies (SGLang's spec_total_num_forward_ct)
        self.total_accept_tokens = 0  # accepted drafts + bonus tokens
        self._window: deque[tuple[int, int]] = deque(maxlen=GAUGE_WINDOW_STEPS)  # (verifies, tokens) per step

    @classmethod
    def from_config(cls, config: SpecConfig) -> SpeculativeDecoding:
        rng = random.Random(config.seed)
        return cls(
            config, AcceptanceSampler(config.max_accepted_drafts, config.accept_length, config.accept_shape, rng)
        )

    def tokens_gained_each(self, remaining: list[int]) -> list[int]:
        """A verify step's new tokens for requests with `remaining` tokens left each, in order: drawn, then clipped."""
        return self._sampler.gains(remaining)

    def record_step(self, gains: list[tuple[HasSpecCounters, int]]) -> None:
        """A finished verify step: (request, tokens it gained) for each request in it."""
        tokens = 0
        for r, gained in gains:
            if r.spec is None:
                r.spec = SpecCounters(self.verify_tokens - 1)
            r.spec.add(gained - 1)
            tokens += gained
        self.total_verify_ct += len(gains)
        self.total_accept_tokens += tokens
        self._window.append((len(gains), tokens))

    def avg_accept_length(self) -> float | None:
        """/server_info's avg_spec_accept_length: tokens per request-verify since start (None before any)."""
        return self.total_accept_tokens / self.total_verify_ct if self.total_verify_ct else None

    def window_accept_length(self) -> float:
        """sglang:spec_accept_length: accepted drafts + bonus per request-verify over the last steps."""
        verifies = sum(v for v, _ in self._window)
        return sum(t for _, t in self._window) / verifies if verifies else 0.0

    def window_accept_rate(self) -> float:
        """sglang:spec_accept_rate: accepted drafts / proposed drafts over the last steps."""
        verifies = sum(v for v, _ in self._window)
        correct = sum(t for _, t in self._window) - verifies
        return correct / (verifies * (self.verify_tokens - 1)) if verifies else 0.0
