"""Continuous batching, SGLang style: what runs in the next forward step, and what it produced.

Each step is either an extend (prefill) step or a decode step; prefill goes first, as in SGLang
without --enable-mixed-chunk. An extend step continues the request being prefilled in chunks,
then admits waiting requests in policy order while the step's token budget, the running-request
cap and the KV pool allow (evicting cached prefixes when the pool is short; a request that still
does not fit waits, and so do the ones behind it). A decode step gives every prefilled running
request one token.

KV accounting: an admitted request reserves its uncached prompt tokens plus max_new_tokens. When
its prefill ends, the prompt moves into the radix tree (so concurrent requests share it, like
SGLang's cache_unfinished_req); when it finishes, prompt + output move in and the rest is freed.
Reserving the whole output up front means no retraction is ever needed (first cut).

The scheduler asks the injected cost model how long a step takes; it knows no hardware.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from endpoints.sim.cost_model import CostModel
from endpoints.sim.kv_pool import KvPool
from endpoints.sim.radix_cache import RadixCache
from endpoints.sim.schedule_policy import POLICIES, SchedulePolicy
from endpoints.sim.sim_request import SimRequest
from endpoints.sim.step_batch import BatchItem, ForwardMode, StepBatch


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    policy: SchedulePolicy = SchedulePolicy.FCFS
    max_running_requests: int = 2048
    chunked_prefill_size: int = 8192  # -1: no chunking, a prompt is prefilled in one step
    max_prefill_tokens: int = 16384


@dataclass(frozen=True, slots=True)
class StepPlan:
    batch: StepBatch
    work: tuple[tuple[SimRequest, int], ...]  # (request, tokens it computes this step)
    duration_s: float


class Scheduler:
    def __init__(self, config: SchedulerConfig, cost_model: CostModel, cache: RadixCache, pool: KvPool) -> None:
        self._config = config
        self._cost_model = cost_model
        self._order = POLICIES[config.policy]
        self.cache = cache
        self.pool = pool
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []  # admission order

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def add(self, request: SimRequest) -> None:
        self.waiting.append(request)

    # -- planning -------------------------------------------------------------------------------

    def plan_step(self) -> StepPlan | None:
        work = self._plan_extend()
        if work:
            mode = ForwardMode.EXTEND
        else:
            work = [(r, 1) for r in self.running if r.prefill_remaining == 0 and not r.finished]
            mode = ForwardMode.DECODE
        if not work:
            return None
        batch = StepBatch(mode, tuple(BatchItem(n, self._context_tokens(r)) for r, n in work))
        return StepPlan(batch, tuple(work), self._cost_model.step_time_s(batch))

    @staticmethod
    def _context_tokens(r: SimRequest) -> int:
        if r.prefill_remaining:
            return r.prefilled_tokens
        return r.prompt_tokens + r.output_tokens - 1  # decode: KV of everything before the newest token

    def _prefill_budget(self) -> int:
        chunk = self._config.chunked_prefill_size
        return min(chunk, self._config.max_prefill_tokens) if chunk > 0 else self._config.max_prefill_tokens

    def _plan_extend(self) -> list[tuple[SimRequest, int]]:
        budget = self._prefill_budget()
        chunking = self._config.chunked_prefill_size > 0
        work: list[tuple[SimRequest, int]] = []
        for r in self.running:  # a request part-way through a chunked prefill continues first
            if r.prefill_remaining and budget > 0:
                n = min(r.prefill_remaining, budget) if chunking else r.prefill_remaining
                work.append((r, n))
                budget -= n
        if budget <= 0 or not self.waiting or len(self.running) >= self._config.max_running_requests:
            return work
        for r in self._order(self.waiting, self.cache):
            if len(self.running) >= self._config.max_running_requests or budget <= 0:
                break
            if not chunking and work and r.prompt_tokens > budget:
                break  # without chunking only the first prompt of a step may exceed the budget
            if not self._admit(r):
                break  # the KV pool is full: this request and those behind it wait
            n = min(r.prefill_remaining, budget) if chunking else r.prefill_remaining
            work.append((r, n))
            budget -= n
        return work

    def _admit(self, r: SimRequest) -> bool:
        # The last prompt token is always computed: its logits give the first output token.
        matched, node = self.cache.match_prefix(r.input_ids[:-1])
        need = r.prompt_tokens - matched + r.max_new_tokens
        self.cache.lock(node)  # before evicting, so eviction cannot take this request's own prefix
        short = need - self.pool.available_tokens(self.cache.total_tokens)
        if short > 0 and self.cache.evict(short) < short:
            self.cache.unlock(node)
            return False
        self.pool.reserve(need)
        r.reserved_tokens = need
        r.lock_node = node
        r.cached_tokens = matched
        r.prefilled_tokens = matched
        self.waiting.remove(r)
        self.running.append(r)
        return True

    # -- completing -----------------------------------------------------------------------------

    def complete_step(self, plan: StepPlan, now_s: float) -> list[SimRequest]:
        """Apply a finished step; returns the requests that produced a token (or finished)."""
        progressed: list[SimRequest] = []
        for r, n in plan.work:
            if r.aborted:
                continue
            if plan.batch.mode is ForwardMode.EXTEND:
                r.prefilled_tokens += n
                if r.prefill_remaining:
                    continue
                self._cache_prompt(r)
            if r.output_tokens < r.target_tokens:
                r.output_tokens += 1
                if r.first_token_s is None:
                    r.first_token_s = now_s
            if r.output_tokens >= r.target_tokens:
                self._finish(r)
            progressed.append(r)
        if any(r.finished for r, _ in plan.work):
            self.running = [r for r in self.running if not r.finished]
        return progressed

    def _cache_prompt(self, r: SimRequest) -> None:
        """The prompt's KV now exists: hand it to the radix tree (duplicates of cached tokens are freed)."""
        if self.cache.disabled:
            return
        self.cache.insert(r.input_ids)
        moved = r.prompt_tokens - r.cached_tokens
        self.pool.release(moved)
        r.reserved_tokens -= moved
        _, node = self.cache.match_prefix(r.input_ids)
        self.cache.lock(node)
        self.cache.unlock(r.lock_node)
        r.lock_node = node

    def _finish(self, r: SimRequest) -> None:
        r.finished = True
        # The newest token has no KV yet, so the tree gets prompt + all but the last output token.
        self.cache.insert(r.input_ids + tuple(r.output_ids[:-1]))
        self._release(r)

    def _release(self, r: SimRequest) -> None:
        if r.lock_node is not None:
            self.cache.unlock(r.lock_node)
            r.lock_node = None
        self.pool.release(r.reserved_tokens)
        r.reserved_tokens = 0

    def abort(self, r: SimRequest) -> None:
        """Drop a request the client gave up on; frees what it held."""
        if r.finished or r.aborted:
            return
        r.aborted = True
        if r in self.waiting:
            self.waiting.remove(r)
            return
        self.running.remove(r)
        self._release(r)

    def flush_cache(self) -> bool:
        """SGLang's /flush_cache: only when idle."""
        if self.has_work():
            return False
        self.cache.reset()
        return True

    def token_usage(self) -> float:
        locked = self.cache.total_tokens - self.cache.evictable_tokens()
        return self.pool.usage(locked)
