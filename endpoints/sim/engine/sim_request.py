"""A request inside the twin: what was asked, its progress, and the updates it streams out.

Output tokens are deterministic: ids come from a seed taken from the prompt, so the same prompt
always yields the same answer (and the radix tree sees the same sequence). Without ignore_eos a
request stops early at a prompt-determined length, ending with the EOS id, as a model would.
A reasoning model (R1) spends the first part of its output thinking and closes it with `</think>`.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, overload

from endpoints.sim.engine.disaggregation import Bootstrap, RoomDone
from endpoints.sim.engine.radix_cache import RadixNode
from endpoints.sim.engine.speculative import SpecCounters
from endpoints.sim.engine.ttft_parts import TtftParts
from endpoints.sim.engine.update_channel import UpdateChannel
from endpoints.sim.structured.structured_answer import AnswerAsk, answer, answer_tokens_needed

# SGLang's health probes: they log no metrics and, on a PD server, run alone with a fake bootstrap (no transfer).
HEALTH_CHECK_PREFIX = "HEALTH_CHECK_"
_FIRST_ORDINARY_ID = 3  # 0-2 are BOS/EOS/PAD in DeepSeek's vocabulary
_ID_STRIDE = 2_654_435_761  # Knuth's multiplicative hash constant: spreads consecutive steps over the vocabulary


class StepCounts(Protocol):
    """A decode cohort's step counts (decode_cohort.py), as its members' counts read them."""

    planned: int  # steps whose KV slots are taken
    completed: int  # steps whose token is out


@dataclass(frozen=True, slots=True)
class GenerateInput:
    rid: str
    input_ids: tuple[int, ...]
    max_new_tokens: int
    ignore_eos: bool = False
    stream: bool = False
    reasoning_tokens: int | None = None  # twin-only: how many reasoning tokens to emit (R1); None: profile's draw
    answer: AnswerAsk | None = None  # a response format (constrained or prompt-only); None: free-form
    grammar_key: tuple[str, str] | None = None  # the constraint's grammar-cache key when one is enforced
    bootstrap: Bootstrap | None = None  # where its prefill meets its decode (PD disaggregation); None: unified


@dataclass(frozen=True, slots=True)
class OutputPlan:
    """What a request will produce: its ids, how it ends, and how many leading ids are reasoning."""

    output_ids: PlannedIds
    finish_reason: dict  # SGLang's shape: {"type": "length", "length": N} or {"type": "stop", "matched": id}
    reasoning_tokens: int  # leading output tokens up to and including `</think>` (0: no reasoning)
    answer_pieces: tuple[str, ...] | None = None  # text of each answer token (from reasoning_tokens on)
    mask_from: int | None = None  # output index from which a grammar masks each token; None: no grammar


@dataclass(frozen=True, slots=True)
class TokenUpdate:
    """Cumulative state of one request, as the engine reports it at a stream boundary or the end."""

    rid: str
    output_tokens: int
    prompt_tokens: int
    cached_tokens: int
    reasoning_tokens: int  # reasoning tokens emitted so far (including `</think>`)
    num_retractions: int
    finished: bool
    finish_reason: dict | None
    arrival_s: float
    admitted_s: float | None  # first admission into the running batch (queue time ends here)
    first_token_s: float | None
    now_s: float
    spec_meta_info: dict | None = None  # a finished request's spec_* meta_info fields (speculative decoding)
    ttft_parts: TtftParts | None = None  # a finished request's TTFT by stage (ttft_parts.py); None: no first token
    # When it entered this server's waiting queue (SGLang's wait_queue_entry_time): its arrival, a prefill server's
    # end of the bootstrap queue, or a decode server's KV arrival. None: as arrival_s.
    wait_queue_entry_s: float | None = None


def prompt_seed(input_ids: tuple[int, ...]) -> int:
    # The bytes of array("q", input_ids), packed by struct: the same native int64s at half the cost.
    return zlib.crc32(struct.pack(f"{len(input_ids)}q", *input_ids))


def planned_output(
    input_ids: tuple[int, ...],
    max_new_tokens: int,
    ignore_eos: bool,
    vocab_size: int,
    eos_id: int,
    think_end_id: int | None = None,
    reasoning_share: tuple[float, float] | None = None,
    reasoning_tokens: int | None = None,
    ask: AnswerAsk | None = None,
) -> OutputPlan:
    """The output this request will produce. `think_end_id`/`reasoning_share` come from a reasoning
    profile; `reasoning_tokens` (the request's own ask) overrides the profile's share. `ask`: the answer
    after the reasoning follows a response format (structured_answer.py)."""
    seed = prompt_seed(input_ids)
    length = max_new_tokens
    if not ignore_eos and max_new_tokens > 1:
        # Stop somewhere in the upper half of the budget, fixed by the prompt.
        length = max_new_tokens - seed % (max_new_tokens // 2 + 1)
    thinking = 0
    grammar_from_start = ask is not None and ask.enforced and not ask.after_reasoning  # no reasoning at all
    if think_end_id is not None and reasoning_share is not None and not grammar_from_start:
        if reasoning_tokens is None:
            low, high = reasoning_share
            draw = zlib.crc32(b"reasoning", seed) / 0xFFFFFFFF  # fixed per prompt, independent of the ids
            reasoning_tokens = round((low + (high - low) * draw) * length)
        thinking = min(reasoning_tokens, length)
    pieces: tuple[str, ...] | None = None
    eos = length < max_new_tokens
    if ask is not None and thinking < length:
        length, eos, pieces = _answer_length(ask, thinking, length, max_new_tokens, eos)
    overrides: list[tuple[int, int]] = []
    if 0 < thinking < length and think_end_id is not None:
        overrides.append((thinking - 1, think_end_id))  # the answer starts after `</think>`
    if eos:
        overrides.append((length - 1, eos_id))
    ids = PlannedIds(seed, vocab_size - _FIRST_ORDINARY_ID, length, tuple(overrides))
    mask_from: int | None = None
    if ask is not None and ask.enforced:
        mask_from = thinking if ask.after_reasoning else 0
    if eos:
        return OutputPlan(ids, {"type": "stop", "matched": eos_id}, thinking, pieces, mask_from)
    return OutputPlan(ids, {"type": "length", "length": length}, thinking, pieces, mask_from)


class PlannedIds(Sequence[int]):
    """A request's planned output ids, built when first read: the i-th is (seed + i·stride) mod span, offset, except at
    the `overrides`' positions (`</think>`, the EOS). The in-process bench reads only their count, so they are never
    built there; the HTTP twin's chunks and the radix cache's insert read slices, which build the whole list once."""

    __slots__ = ("_seed", "_span", "_length", "_overrides", "_built")

    def __init__(self, seed: int, span: int, length: int, overrides: tuple[tuple[int, int], ...] = ()) -> None:
        self._seed, self._span, self._length, self._overrides = seed, span, length, overrides
        self._built: list[int] | None = None

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> list[int]: ...

    def __getitem__(self, index: int | slice) -> int | list[int]:
        return self._list()[index]

    def _list(self) -> list[int]:
        built = self._built
        if built is None:
            span, stride, seed = self._span, _ID_STRIDE, self._seed
            # The range steps through seed + i·stride without a multiply per id.
            built = [x % span + _FIRST_ORDINARY_ID for x in range(seed, seed + self._length * stride, stride)]
            for position, token in self._overrides:
                built[position] = token
            self._built = built
        return built

    def head(self, n: int) -> PlannedIds:
        """The first `n` ids, planned the same way (a PD prefill server samples only the first)."""
        n = max(0, min(n, self._length))
        return PlannedIds(self._seed, self._span, n, tuple((p, t) for p, t in self._overrides if p < n))

    def __iter__(self) -> Iterator[int]:
        return iter(self._list())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PlannedIds | list | tuple):
            return len(other) == self._length and list(other) == self._list()
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # compares equal to lists, which do not hash

    def __repr__(self) -> str:
        return f"PlannedIds({self._list()!r})"


def _answer_length(
    ask: AnswerAsk, thinking: int, length: int, max_new_tokens: int, eos: bool
) -> tuple[int, bool, tuple[str, ...]]:
    """(output length, ends with EOS, answer pieces) for an answer after `thinking` reasoning tokens. Without
    ignore_eos the answer runs at least to its smallest complete form (the budget allowing); a constrained
    answer that cannot fill its tokens ends with EOS when complete (its grammar terminated)."""
    room = max_new_tokens - thinking
    if eos:
        tokens = max(length - thinking - 1, answer_tokens_needed(ask))
        if tokens + 1 > room:
            tokens, eos = room, False  # the budget ends the answer first: cut, finish_reason length
    else:
        tokens = room
    written = answer(ask, tokens)
    if len(written.pieces) < tokens:
        eos = True  # the grammar terminated: SGLang finishes the request (ignore_eos or not)
        tokens = len(written.pieces)
    return thinking + tokens + (1 if eos else 0), eos, written.pieces


class SimRequest:
    """Mutable progress of one request; owned by the scheduler, read by the engine."""

    __slots__ = (
        "rid", "input_ids", "max_new_tokens", "stream", "output_ids", "final_reason", "reasoning_target",
        "arrival_s", "admitted_s", "cached_tokens", "prefix_tokens", "prefill_target", "prefilled_tokens", "decoding",
        "_output_tokens", "_held_tokens", "lock_node", "first_token_s", "sent_tokens", "last_sent_s",
        "num_retractions", "finished", "aborted", "abort_reason", "updates", "spec", "answer_pieces", "mask_from",
        "grammar_key", "ignore_eos", "bootstrap", "queued_s", "preallocated_s", "kv_arrived_s", "kv_done", "dp_rank",
        "chunk_times", "chunk_stride", "prompt_tokens", "constrained", "cohort", "cohort_joined", "running_seq",
        "target_tokens",
    )  # fmt: skip

    def __init__(self, spec: GenerateInput, plan: OutputPlan, arrival_s: float) -> None:
        self.rid = spec.rid
        self.input_ids = spec.input_ids
        self.prompt_tokens = len(spec.input_ids)  # kept, not derived: the scheduler sums it over the batch every step
        self.max_new_tokens = spec.max_new_tokens
        self.ignore_eos = spec.ignore_eos  # runs to max_new_tokens: admission can count its KV exactly
        self.stream = spec.stream
        self.output_ids = plan.output_ids
        self.target_tokens = len(plan.output_ids)  # kept, not derived: read for every running request every step
        self.final_reason = plan.finish_reason
        self.reasoning_target = plan.reasoning_tokens
        self.answer_pieces = plan.answer_pieces  # the text of the answer tokens under a response format
        self.mask_from = plan.mask_from  # a grammar masks output tokens from this index on (None: none)
        self.constrained = plan.mask_from is not None
        self.grammar_key = spec.grammar_key
        self.bootstrap = spec.bootstrap
        self.arrival_s = arrival_s
        self.admitted_s: float | None = None
        self.cached_tokens = 0  # prompt tokens found in the radix tree at first admission (what is reported)
        self.prefix_tokens = 0  # tokens matched in the tree at the current admission (re-admission too)
        self.prefill_target = 0  # sequence length this (re-)prefill covers, set at admission
        self.prefilled_tokens = 0  # tokens of it with KV so far (matched prefix included)
        self.decoding = False  # prefill done: one token per decode step from here on
        # While it decodes in a DecodeCohort these are offsets from the cohort's step counts (output_tokens and
        # held_tokens read them); otherwise the counts themselves.
        self.cohort: StepCounts | None = None
        self.cohort_joined = 0  # the cohort's completed steps when it joined
        self._output_tokens = 0
        self._held_tokens = 0
        self.running_seq = 0  # its place in the running batch: the scheduler numbers requests as they join it
        self.lock_node: RadixNode | None = None
        self.first_token_s: float | None = None
        self.sent_tokens = -1  # output count at the last update sent; -1: none sent yet
        self.last_sent_s: float | None = None
        self.num_retractions = 0
        self.finished = False
        self.aborted = False
        self.abort_reason: dict | None = None
        self.updates = UpdateChannel()
        # When its consumer needs only when each chunk went out (the in-process bench), the engine appends each
        # update's time here and sends only the final update through `updates` (SimEngine.submit); None: every update.
        self.chunk_times: list[float] | None = None
        # Tokens between its chunks when only their times are wanted and nobody watches its updates (the engine's
        # stream interval): while it decodes in a cohort the cohort times them (decode_cohort.py). 0: delivered.
        self.chunk_stride = 0
        self.spec: SpecCounters | None = None  # verify steps so far, under speculative decoding
        # PD stage times for its TTFT's parts (ttft_parts.py), on this server's clock. Prefill: when its bootstrap
        # queue ended (it joined the waiting queue). Decode: when its pool took the prompt's slots, when the KV
        # arrived, and what the prefill said of its own parts.
        self.queued_s: float | None = None
        self.preallocated_s: float | None = None
        self.kv_arrived_s: float | None = None
        self.kv_done: RoomDone | None = None
        self.dp_rank = 0  # the DP-attention rank that runs it (the scheduler's dispatch; 0 without DP attention)

    @property
    def output_tokens(self) -> int:
        cohort = self.cohort
        return self._output_tokens if cohort is None else self._output_tokens + cohort.completed

    @output_tokens.setter
    def output_tokens(self, tokens: int) -> None:
        cohort = self.cohort
        self._output_tokens = tokens if cohort is None else tokens - cohort.completed

    @property
    def held_tokens(self) -> int:
        """KV slots this request holds outside the radix tree."""
        cohort = self.cohort
        return self._held_tokens if cohort is None else self._held_tokens + cohort.planned

    @held_tokens.setter
    def held_tokens(self, tokens: int) -> None:
        cohort = self.cohort
        self._held_tokens = tokens if cohort is None else tokens - cohort.planned

    @property
    def seq_tokens(self) -> int:
        """Prompt plus output so far: what a (re-)prefill must cover before the next token."""
        return len(self.input_ids) + self.output_tokens

    def sequence(self) -> tuple[int, ...]:
        if self.output_tokens == 0:
            return self.input_ids
        return self.input_ids + tuple(self.output_ids[: self.output_tokens])

    @property
    def prefill_remaining(self) -> int:
        return 0 if self.decoding else self.prefill_target - self.prefilled_tokens

    @property
    def masked(self) -> bool:
        """The next token is sampled under a grammar mask (constrained, past the reasoning)."""
        return self.mask_from is not None and self.output_tokens >= self.mask_from

    @property
    def reasoning_tokens(self) -> int:
        return min(self.output_tokens, self.reasoning_target)

    def ttft_parts(self) -> TtftParts | None:
        """Its TTFT on this server by stage, once it has a first token (None before, or without one)."""
        if self.first_token_s is None or self.admitted_s is None:
            return None
        done = self.kv_done
        if done is not None and self.preallocated_s is not None and self.kv_arrived_s is not None:
            return TtftParts.decode_server(
                self.arrival_s, self.preallocated_s, self.kv_arrived_s, self.first_token_s,
                done.prefill_queue_s, done.prefill_forward_s, done.transfer_s,
            )  # fmt: skip
        if self.queued_s is not None:
            return TtftParts.prefill_server(self.arrival_s, self.queued_s, self.admitted_s, self.first_token_s)
        return TtftParts.unified(self.arrival_s, self.admitted_s, self.first_token_s)

    def update(self, now_s: float) -> TokenUpdate:
        # Per chunk: the output count read once, positional fields (TokenUpdate's order), the final-only parts only
        # when done.
        cohort = self.cohort
        output = self._output_tokens if cohort is None else self._output_tokens + cohort.completed
        target = self.reasoning_target
        kv_arrived_s = self.kv_arrived_s
        wait_s = kv_arrived_s if kv_arrived_s is not None else self.queued_s
        if not (self.finished or self.aborted):
            return TokenUpdate(
                self.rid, output, self.prompt_tokens, self.cached_tokens, output if output < target else target,
                self.num_retractions, False, None, self.arrival_s, self.admitted_s, self.first_token_s, now_s,
                None, None, wait_s,
            )  # fmt: skip
        spec = self.spec
        return TokenUpdate(
            self.rid, output, self.prompt_tokens, self.cached_tokens, output if output < target else target,
            self.num_retractions, True, self.abort_reason or self.final_reason, self.arrival_s, self.admitted_s,
            self.first_token_s, now_s, spec.meta_info(output) if spec is not None else None, self.ttft_parts(), wait_s,
        )  # fmt: skip
