"""The decoding requests of a plain (non-speculative) server, counted together.

Every decoding request gains exactly one token per decode step (and per mixed-chunk extend step), so none is
touched per step: a member's output count is its offset plus the cohort's count of completed steps, and the KV
slots it holds its offset plus the count of planned ones (a step's slots are taken when it is planned, its
tokens come when it ends). SimRequest's output_tokens and held_tokens read and write through these offsets, so
every reader sees the same figures as if each request were counted one by one. What a step needs of them in all
(requests and context per attention rank) is kept as sums that change only when a request joins or leaves;
finishes come off a heap keyed by the step at which each request reaches its length.

A member whose consumer only times its chunks (SimRequest.chunk_stride: the in-process bench, no observer) is
not delivered to step by step: the cohort keeps the end time of each step, and when the request leaves its chunk
times for its stay are read off that list, every `chunk_stride` tokens as the engine would have sent them.
"""

from __future__ import annotations

import heapq
from bisect import insort
from operator import attrgetter
from typing import TYPE_CHECKING

from endpoints.sim.cost.step_batch import RankLoad

if TYPE_CHECKING:
    from endpoints.sim.engine.sim_request import SimRequest

_running_seq = attrgetter("running_seq")
TRIM_STEPS = 1 << 16  # step times kept at least before the list is cut back to what its members still need


class DecodeCohort:
    def __init__(self, attention_ranks: int = 1) -> None:
        self.planned = 0  # cohort steps whose slots are taken
        self.completed = 0  # cohort steps that ended (their token is out)
        self.size = 0
        self._counts = [0] * attention_ranks  # members per attention rank
        self._context_base = [0] * attention_ranks  # Σ (prompt + output offset − 1) of each rank's members
        # (completed count at which it reaches its length, running_seq, request); entries of requests that left
        # stay until they surface (a request that rejoins does so under a new running_seq).
        self._ends: list[tuple[int, int, SimRequest]] = []
        self._constrained: list[SimRequest] = []  # members under a grammar: a masked token costs extra
        self.watched: list[SimRequest] = []  # members streaming each chunk to a consumer, in running order
        self._timed: set[SimRequest] = set()  # members whose chunks are timed from the step times
        self._step_end_s: list[float] = []  # end of each completed step, from step number _first_step on
        self._first_step = 1
        self._trim_at = TRIM_STEPS

    # -- membership -------------------------------------------------------------------------------

    def join(self, r: SimRequest) -> None:
        """`r` decodes from the next step on (its prefill is done, or its KV arrived); its counts are taken over."""
        output, held = r.output_tokens, r.held_tokens
        r.cohort, r.cohort_joined = self, self.completed
        r.output_tokens, r.held_tokens = output, held  # now offsets from the cohort's counts
        self.size += 1
        rank = r.dp_rank
        self._counts[rank] += 1
        self._context_base[rank] += r.prompt_tokens + output - self.completed - 1
        heapq.heappush(self._ends, (r.target_tokens - output + self.completed, r.running_seq, r))
        if r.constrained:
            self._constrained.append(r)
        if r.chunk_stride:
            self._timed.add(r)
        elif r.stream:
            insort(self.watched, r, key=_running_seq)

    def leave(self, r: SimRequest, finishing: bool = False) -> None:
        """`r` stops decoding here (finished, retracted, aborted or dropped): its counts become its own again.
        `finishing`: it reached its length in the step that just ended, whose update the engine sends itself."""
        output, held = r.output_tokens, r.held_tokens
        if r.chunk_stride:
            self._timed.discard(r)
            self._time_chunks(r, output - self.completed, self.completed - 1 if finishing else self.completed)
        r.cohort = None
        r.output_tokens, r.held_tokens = output, held
        self.size -= 1
        rank = r.dp_rank
        self._counts[rank] -= 1
        self._context_base[rank] -= r.prompt_tokens + output - self.completed - 1
        if r.constrained:
            self._constrained.remove(r)
        if not r.chunk_stride and r.stream:
            self.watched.remove(r)

    def _time_chunks(self, r: SimRequest, offset: int, last_step: int) -> None:
        """The chunks a timed-only member sent in steps (joined, last_step]: one whenever it is `chunk_stride`
        tokens past its last one (or at once if it sent none), as SimEngine._deliver sends them."""
        stride, sent = r.chunk_stride, r.sent_tokens
        first = r.cohort_joined + 1 if sent < 0 else max(r.cohort_joined + 1, sent + stride - offset)
        if first > last_step:
            return
        times = r.chunk_times
        assert times is not None
        base = self._first_step
        times.extend(self._step_end_s[first - base : last_step - base + 1 : stride])
        last = first + (last_step - first) // stride * stride
        r.sent_tokens = offset + last
        r.last_sent_s = self._step_end_s[last - base]

    def rank_sizes(self) -> list[int]:
        """Members per attention rank."""
        return list(self._counts)

    # -- steps ------------------------------------------------------------------------------------

    def loads(self) -> tuple[RankLoad, ...]:
        """The step about to run, summed per rank: each member computes one token over the KV of everything
        before its newest one (prompt + output − 1)."""
        completed = self.completed
        if len(self._counts) == 1 and not self._constrained:
            n = self.size
            return (RankLoad.of_uniform(n, 1, self._context_base[0] + n * completed, 0),)
        masked = [0] * len(self._counts)
        for r in self._constrained:
            if r.masked:
                masked[r.dp_rank] += 1
        return tuple(
            RankLoad.of_uniform(n, 1, base + n * completed, m)
            for n, base, m in zip(self._counts, self._context_base, masked)
        )

    def advance(self, now_s: float) -> tuple[list[SimRequest], list[SimRequest]]:
        """A step ended at `now_s`: every member has one more token. Returns the members that reached their length
        (still members: the scheduler finishes them) and those the engine must see, the finished and the watched
        ones, both in running order."""
        self.completed += 1
        step = self.completed
        self._step_end_s.append(now_s)
        if len(self._step_end_s) >= self._trim_at:
            self._trim()
        ends = self._ends
        done: list[SimRequest] = []
        while ends and ends[0][0] <= step:
            _, seq, r = heapq.heappop(ends)
            if r.cohort is self and r.running_seq == seq:
                done.append(r)  # popped by (step, running_seq): already in running order
        if not done:
            return done, list(self.watched)
        if not self.watched:
            return done, list(done)
        return done, sorted({*self.watched, *done}, key=_running_seq)

    def quiet_steps(self) -> tuple[int, int, int] | None:
        """A run of steps in which nothing about a member needs telling: (members, their context tokens in the next
        step, how many steps can end before a heap entry surfaces or the step times are trimmed). One attention
        rank only, no member under a grammar (its mask may turn on) or streaming each chunk; else None."""
        if len(self._counts) != 1 or self._constrained or self.watched or not self.size:
            return None
        completed, n = self.completed, self.size
        steps = self._trim_at - len(self._step_end_s) - 1
        if self._ends:
            steps = min(steps, self._ends[0][0] - completed - 1)
        return n, self._context_base[0] + n * completed, steps

    def advance_quietly(self, end_times: list[float]) -> None:
        """Steps of a quiet_steps run were planned and ended at `end_times`: as `advance` counts them, one by one."""
        steps = len(end_times)
        self.planned += steps
        self.completed += steps
        self._step_end_s += end_times

    def _trim(self) -> None:
        """Drop the step times no timed member can still need (those up to the earliest one's joining)."""
        keep_from = min((r.cohort_joined for r in self._timed), default=self.completed) + 1
        del self._step_end_s[: keep_from - self._first_step]
        self._first_step = keep_from
        self._trim_at = max(TRIM_STEPS, 2 * len(self._step_end_s))
