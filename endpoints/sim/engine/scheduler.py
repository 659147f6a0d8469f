"""Continuous batching, SGLang style: what runs in the next forward step, and what it produced.

Each step is either an extend (prefill) step or a decode step; prefill goes first, as SGLang's
get_next_batch_to_run does by default, so running decodes wait while a prefill step runs. An extend
step continues the request being prefilled in chunks, then admits waiting requests in policy order
while the step's token budget, the running-request cap and the KV estimate allow. Under
--enable-mixed-chunk (SGLang's mix_with_running, off by default) an extend step also carries every
decoding request's next token, and those tokens come out of the step's token budget. A decode step
gives every prefilled running request one token (under speculative decoding it verifies
num_draft_tokens per request and each gains 1 + the drafts accepted).

KV, the way SGLang's PrefillAdder does it (python/sglang/srt/managers/schedule_policy.py): admission
is optimistic about running requests only. What is free (evictable cache counts as free) is first
reduced by `new_token_ratio` × every running request's remaining output budget (all of it for an
ignore_eos one, which cannot stop early); a waiting request is
then admitted only if its uncached prompt plus its *whole* remaining budget (clipped at
CLIP_MAX_NEW_TOKENS) and a page fits in the rest (`add_one_req`: `total_tokens >= rem_total_tokens` →
NO_TOKEN), and each request admitted in the step is charged that whole budget (`_update_prefill_budget`).
conformance/test_admission.py checks these decisions against SGLang's own PrefillAdder. Real
slots are taken only as tokens are computed. The ratio starts at 0.7 and decays each decode step,
so a busy server admits more than it could hold if every request ran to max_new_tokens. A request
with ignore_eos on a server without a radix cache goes SGLang's `add_one_req_ignore_eos` way: its
length is known, so it is admitted only if every running request (and it) can run to the end
without running out of slots, finishers freeing theirs, with IGNORE_EOS_RESERVE_TOKENS to spare per
request (benchmarks run exactly this way: `--ignore-eos` against `--disable-radix-cache`). Once
admission stops for want of KV (or at the running-request cap), SGLang marks the running batch
full (`batch_is_full`) and tries no admission until a running request leaves; the twin does too.
When a decode step cannot get one slot per request, requests are retracted (fewest output tokens
first, then longest prompt): their KV outside the tree is freed and they queue again, to be
re-prefilled (their prompt is probably still cached) and continue where they stopped. The ratio
then jumps to what the remaining batch really needs. Prompts enter the radix tree when their prefill ends (so concurrent
requests share them); prompt + output enter it when a request finishes.

The scheduler asks the injected cost model how long a step takes; it knows no hardware.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter, itemgetter
from typing import TypeVar

from endpoints.sim.cost.cost_model import CostModel
from endpoints.sim.cost.step_batch import BatchItem, ForwardMode, RankLoad, StepBatch
from endpoints.sim.engine.cuda_graphs import DecodeGraphPasses
from endpoints.sim.engine.decode_cohort import DecodeCohort
from endpoints.sim.engine.kv_pool import KvPool
from endpoints.sim.engine.radix_cache import RadixCache
from endpoints.sim.engine.schedule_policy import POLICIES, SchedulePolicy
from endpoints.sim.engine.sim_request import SimRequest
from endpoints.sim.engine.speculative import SpeculativeDecoding

# SGLang's defaults (global_config / environment): the new-token ratio and retraction constants.
INIT_NEW_TOKEN_RATIO = 0.7
MIN_NEW_TOKEN_RATIO_FACTOR = 0.14
NEW_TOKEN_RATIO_DECAY_STEPS = 600
RETRACT_DECODE_STEPS = 20  # after a retraction, leave room for this many decode steps of the rest
CLIP_MAX_NEW_TOKENS = 4096  # the admission estimate never counts more output than this per request
IGNORE_EOS_RESERVE_TOKENS = 1  # slots per request add_one_req_ignore_eos keeps spare
# The page PrefillAdder's budget charges each request on top of its tokens (per_req_token_overhead: one page;
# the twin's pages are single tokens, as flashinfer's and FlashMLA's MLA pools are). Budget only: no slot is taken.
PAGE_OVERHEAD_TOKENS = 1
KV_EXHAUSTED = {"type": "abort", "message": "The KV pool cannot hold even one request's next token."}
_prompt_tokens = attrgetter("prompt_tokens")
_output_tokens = attrgetter("output_tokens")
_constrained = attrgetter("constrained")
_first = itemgetter(0)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    policy: SchedulePolicy = SchedulePolicy.FCFS
    max_running_requests: int = 2048
    chunked_prefill_size: int = 8192  # -1: no chunking, a prompt is prefilled in one step
    max_prefill_tokens: int = 16384
    schedule_conservativeness: float = 1.0  # scales the initial new-token ratio, like SGLang's flag
    enable_mixed_chunk: bool = False  # decodes ride along in extend steps (needs chunked prefill, as in SGLang)
    # DP attention's ranks, each its own SGLang scheduler: `chunked_prefill_size` and `max_prefill_tokens` are one
    # rank's (engine_builder resolves them as SGLang does), so a step prefills up to that many tokens on every rank,
    # each from its own requests (Scheduler._dispatch), and max_running_requests is the ranks' caps together.
    attention_ranks: int = 1
    # A PD decode server's request slots: running requests plus those whose KV is on its way or has landed
    # (engine_builder: SGLang's req_to_token_pool, --max-running-requests plus --disaggregation-decode-extra-slots);
    # 0: no cap beyond the KV pool.
    decode_request_slots: int = 0
    decode_graph_max_bs: int = 512  # a rank's largest decode batch its CUDA graphs hold (cuda_graphs.py)


@dataclass(frozen=True, slots=True)
class StepPlan:
    batch: StepBatch
    # (request, tokens it computes this step; a speculative verify: tokens it gains). A plain server's decoding
    # requests are not listed: they are the cohort, one token each.
    work: tuple[tuple[SimRequest, int], ...]
    duration_s: float
    retracted: tuple[SimRequest, ...] = ()  # sent back to the queue before this step
    gained_tokens: int = 0  # decode: the output tokens the requests gain (under speculation: accepted drafts + bonus)
    cohort: int = 0  # decoding requests of the cohort (DecodeCohort) in this step, each gaining one token


@dataclass(slots=True)
class RetractionCounters:
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


class Scheduler:
    def __init__(
        self,
        config: SchedulerConfig,
        cost_model: CostModel,
        caches: Sequence[RadixCache],
        pools: Sequence[KvPool],
        speculative: SpeculativeDecoding | None = None,
    ) -> None:
        """`caches`, `pools`: one per attention rank (one without DP attention)."""
        if not len(caches) == len(pools) == config.attention_ranks:
            raise ValueError(f"one radix cache and one KV pool per attention rank ({config.attention_ranks})")
        self._config = config
        self._cost_model = cost_model
        # Speculative decoding: a decode step is a verify of `verify_tokens` per request, which gains
        # 1 + the drafts accepted (speculative.py); None: one token per request per decode step.
        self.speculative = speculative
        self._order = POLICIES[config.policy]
        # Each DP-attention rank is its own SGLang scheduler with its own KV pool and radix tree (a request's
        # prefix hits only on its own rank); a rank's requests take slots from its pool alone.
        self.caches = list(caches)
        self.pools = list(pools)
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []  # admission order
        self._running_seq = 0  # numbers the requests as they join the running batch (SimRequest.running_seq)
        # Without speculative decoding every decoding request gains one token a step: they are counted together.
        self.cohort = DecodeCohort(config.attention_ranks)
        self._prefilling = 0  # running requests whose prefill is not done (none: every running request decodes)
        self.init_new_token_ratio = min(INIT_NEW_TOKEN_RATIO * config.schedule_conservativeness, 1.0)
        self.min_new_token_ratio = min(self.init_new_token_ratio * MIN_NEW_TOKEN_RATIO_FACTOR, 1.0)
        self._ratio_decay = (self.init_new_token_ratio - self.min_new_token_ratio) / NEW_TOKEN_RATIO_DECAY_STEPS
        # Each rank's own ratio (SGLang's NewTokenRatioTracker, a scheduler's): it decays with the rank's decode
        # steps, is set by the rank's retractions, and resets when the server finds no batch at all.
        self.ratios = [self.init_new_token_ratio] * config.attention_ranks
        self.retractions = RetractionCounters()
        self.graph_passes = DecodeGraphPasses(config.decode_graph_max_bs)
        # SGLang's batch_is_full, derived, per rank: how many ran on the rank when its admission last stopped for
        # want of KV or at the cap; it tries no admission until fewer run there (one finished, aborted or was
        # retracted).
        self._stopped_at_running: list[int | None] = [None] * config.attention_ranks
        self.dropped: list[SimRequest] = []  # aborted by the scheduler itself; the engine tells their clients
        self.transferring: list[SimRequest] = []  # PD decode: KV pre-allocated, waiting for it to arrive
        # PD decode: KV landed, waiting for a place in the running batch (SGLang's decode waiting queue, which
        # get_new_prebuilt_batch drains up to --max-running-requests); the first token goes out when it joins.
        self.prebuilt: deque[SimRequest] = deque()
        self._next_rank = 0  # round robin over the DP-attention ranks (_dispatch)
        # PD prefill: requests whose first token is sampled and whose KV is still being sent. Each keeps its request
        # slot until the transfer ends (SGLang's inflight queue holds its req_to_token_pool entry), so it counts
        # against --max-running-requests on its rank; the KV itself is freed at once here (docs/twin.md).
        self.inflight: list[SimRequest] = []

    @property
    def cost_model(self) -> CostModel:
        return self._cost_model

    @property
    def pool(self) -> KvPool:
        """A one-rank server's KV pool (under DP attention each rank has its own: `pools`)."""
        return self._only(self.pools)

    @pool.setter
    def pool(self, pool: KvPool) -> None:
        self._only(self.pools)
        self.pools[0] = pool

    @property
    def cache(self) -> RadixCache:
        """A one-rank server's radix tree (under DP attention each rank has its own: `caches`)."""
        return self._only(self.caches)

    def _only(self, per_rank: list[T]) -> T:
        if len(per_rank) != 1:
            raise AttributeError(f"{len(per_rank)} attention ranks: each has its own KV pool, radix tree and ratio")
        return per_rank[0]

    @property
    def new_token_ratio(self) -> float:
        """A one-rank server's ratio; under DP attention the ranks' mean (as the probe averages their gauges)."""
        ratios = self.ratios
        return ratios[0] if len(ratios) == 1 else sum(ratios) / len(ratios)

    @new_token_ratio.setter
    def new_token_ratio(self, ratio: float) -> None:
        self._only(self.ratios)
        self.ratios[0] = ratio

    @property
    def capacity_tokens(self) -> int:
        """Slots in all the ranks' pools (SGLang's max_total_num_tokens, summed over DP ranks)."""
        return sum(pool.capacity_tokens for pool in self.pools)

    @property
    def rank_capacity_tokens(self) -> int:
        """Slots in one rank's pool: the most one request can ever hold."""
        return min(pool.capacity_tokens for pool in self.pools)

    def used_tokens(self) -> int:
        """Slots in use on all ranks: reserved by requests or held by the radix trees."""
        return sum(p.capacity_tokens - p.available_tokens(c.total_tokens) for p, c in zip(self.pools, self.caches))

    def has_work(self) -> bool:
        return bool(self.waiting or self.running or self.transferring or self.prebuilt)

    @property
    def queued(self) -> int:
        """Requests in the waiting queue (SGLang's num_queue_reqs): to be prefilled, or, on a PD decode server,
        their KV landed and waiting for a place in the batch."""
        return len(self.waiting) + len(self.prebuilt)

    def hold_for_transfer(self, request: SimRequest) -> None:
        self.inflight.append(request)

    def transfer_done(self, request: SimRequest) -> None:
        if request in self.inflight:
            self.inflight.remove(request)

    def add(self, request: SimRequest) -> None:
        request.dp_rank = self._dispatch(request)
        self.waiting.append(request)

    def _dispatch(self, request: SimRequest) -> int:
        """The DP-attention rank a request runs on, as SGLang's DataParallelController picks it (0.5.23
        managers/data_parallel_controller.py; --load-balance-method auto, arg_groups/serving_hook.py): a PD prefill
        server follows the bootstrap room (`bootstrap_room % dp_size`, so its decode knows the rank), every other
        server goes round robin. A rank keeps its requests: no other rank prefills them."""
        ranks = self._config.attention_ranks
        if ranks <= 1:
            return 0
        if request.bootstrap is not None:
            return request.bootstrap.room % ranks
        return self._round_robin()

    def _round_robin(self) -> int:
        rank, self._next_rank = self._next_rank, (self._next_rank + 1) % self._config.attention_ranks
        return rank

    # -- KV slots ---------------------------------------------------------------------------------

    def free_tokens(self, rank: int = 0) -> int:
        """Slots free on the rank now or after evicting its unlocked cache."""
        cache = self.caches[rank]
        return self.pools[rank].available_tokens(cache.total_tokens) + cache.evictable_tokens()

    def _take(self, r: SimRequest, tokens: int) -> bool:
        if not self._reserve(tokens, r.dp_rank):
            return False
        r.held_tokens += tokens
        return True

    def _reserve(self, tokens: int, rank: int = 0) -> bool:
        """Reserve slots on the rank, evicting its unlocked cache if the free ones are too few; False if even that
        falls short."""
        pool, cache = self.pools[rank], self.caches[rank]
        short = tokens - pool.available_tokens(cache.total_tokens)
        if short > 0 and cache.evict(short) < short:
            return False
        pool.reserve(tokens)
        return True

    def _start_running(self, r: SimRequest) -> None:
        self._running_seq += 1
        r.running_seq = self._running_seq
        self.running.append(r)

    def _running_estimate(self, rank: int = 0) -> float:
        """Slots the admission rule sets aside on the rank for its running requests: for each, the rest of its
        prefill, and the new-token ratio's share of the output it may still produce; all of it under ignore_eos
        (SGLang 0.5.23's _get_running_request_total_token_offset: a fixed-length request cannot stop early).
        Summed in running order (floats)."""
        ratio = self.ratios[rank]
        return sum(
            (0 if r.decoding else r.prefill_target - r.prefilled_tokens)
            + min(r.max_new_tokens - r.output_tokens, CLIP_MAX_NEW_TOKENS) * (1.0 if r.ignore_eos else ratio)
            for r in self._on_rank(self.running, rank)
        )

    def _on_rank(self, requests: list[SimRequest], rank: int) -> list[SimRequest]:
        return requests if len(self.pools) == 1 else [r for r in requests if r.dp_rank == rank]

    # -- PD decode: requests whose KV is computed elsewhere ----------------------------------------

    def dispatch_transfer(self, r: SimRequest) -> None:
        """A disaggregated request reaching a PD decode server goes to a DP-attention rank round robin (its
        DataParallelController), whose prealloc queue it then waits in."""
        r.dp_rank = self._round_robin()  # always 0 with one rank

    def preallocate(self, queue: deque[SimRequest], reserved_per_request: int) -> list[SimRequest]:
        """Take the slots the prompt KV of the requests in a PD decode's prealloc `queue` will land in, in queue order,
        and return the requests that got them (removed from the queue; aborted ones are dropped from it). A request
        gets them if its rank's pool holds them beside what every running or arriving request of the rank keeps in
        reserve for its decode (SGLang's decode prealloc queue: `_allocatable_token_budgets`, without its
        retractable-token credit), and only while a request slot of the rank is free (its req_to_token_pool:
        `available_size() <= 0` stops the queue). Each DP-attention rank has its own queue: a rank whose head cannot
        take slots holds only its own requests."""
        ranks = len(self.pools)
        slots = self._config.decode_request_slots // ranks
        held = [0] * ranks  # request slots taken on each rank: running, KV on its way, KV landed
        for q in (self.running, self.transferring, self.prebuilt):
            if ranks == 1:
                held[0] += len(q)
            else:
                for x in q:
                    held[x.dp_rank] += 1
        taken: list[SimRequest] = []
        full: set[int] = set()
        behind: deque[SimRequest] = deque()
        while queue and len(full) < ranks:
            r = queue.popleft()
            if r.aborted:
                continue
            rank = r.dp_rank
            if rank in full or not self._preallocate_one(r, reserved_per_request, slots, held[rank]):
                full.add(rank)
                behind.append(r)
                continue
            held[rank] += 1
            taken.append(r)
        queue.extendleft(reversed(behind))
        return taken

    def _preallocate_one(self, r: SimRequest, reserved_per_request: int, slots: int, held: int) -> bool:
        if slots and held >= slots:
            return False
        if r.prompt_tokens + reserved_per_request > self.free_tokens(r.dp_rank) - reserved_per_request * held:
            return False
        if not self._take(r, r.prompt_tokens):
            return False
        self.transferring.append(r)
        return True

    def add_transferred(self, r: SimRequest, cached_tokens: int) -> None:
        """The prompt's KV has arrived with the first token the prefill sampled: the request waits for a place in
        the running batch (admit_prebuilt)."""
        self.transferring.remove(r)
        if r.aborted:
            self._release(r)
            return
        r.cached_tokens = cached_tokens
        self.prebuilt.append(r)

    def admit_prebuilt(self, now_s: float) -> list[SimRequest]:
        """Transferred requests join the running batch while it has room (--max-running-requests, SGLang's
        get_new_prebuilt_batch); each gets its first token now. Returns them (finished ones included)."""
        joined: list[SimRequest] = []
        ranks = len(self.pools)
        on_rank, rank_cap = self._running_per_rank(), self._config.max_running_requests // ranks
        waiting: deque[SimRequest] = deque()  # on a rank whose batch is full
        while self.prebuilt and len(self.running) < self._config.max_running_requests:
            r = self.prebuilt.popleft()
            if r.aborted:
                continue
            if ranks > 1:
                if on_rank[r.dp_rank] >= rank_cap:
                    waiting.append(r)
                    continue
                on_rank[r.dp_rank] += 1
            r.admitted_s = now_s
            r.prefill_target = r.prefilled_tokens = r.prompt_tokens
            r.decoding = True
            r.output_tokens = 1
            r.first_token_s = now_s
            joined.append(r)
            if r.output_tokens >= r.target_tokens:
                self._finish(r)
                continue
            self._start_running(r)
            if self.speculative is None:
                self.cohort.join(r)
        self.prebuilt.extendleft(reversed(waiting))  # they keep their place in their ranks' queues
        return joined

    def drop_transfer(self, r: SimRequest) -> None:
        """The KV never came (the prefill failed it, or went away): its slots are freed."""
        self.transferring.remove(r)
        r.aborted = True
        self._release(r)

    # -- planning -------------------------------------------------------------------------------

    def plan_step(self, now_s: float = 0.0) -> StepPlan | None:
        mixing = self._mixes_decodes()
        decoding = len(self.running) - self._prefilling if mixing else 0
        work = self._plan_extend(now_s, reserved_tokens=decoding)
        retracted: list[SimRequest] = []
        gained = cohort = 0
        if work:
            mode = ForwardMode.EXTEND
            if decoding:  # mixed chunk: the running decodes take one token each in this extend step
                retracted, cohort = self._plan_cohort_step()
        else:
            mode = ForwardMode.DECODE
            if self.speculative is None:
                retracted, cohort = self._plan_cohort_step()
                gained = cohort
            else:
                work, retracted, gained = self._plan_verify()
        if not work and not cohort:
            if not retracted:
                # Nothing to run: SGLang's event loop re-inits the ratio when it finds no batch (every rank's).
                self.ratios[:] = [self.init_new_token_ratio] * len(self.ratios)
                return None
            return StepPlan(StepBatch(mode, ()), (), 0.0, tuple(retracted))
        if mode is ForwardMode.DECODE:
            if cohort:
                loads = self.cohort.loads()
            else:
                assert self.speculative is not None
                loads = self._decode_loads([r for r, _ in work], self.speculative.verify_tokens)
            self.graph_passes.count(max(load.requests for load in loads))
            batch = StepBatch(mode, (), loads)
        else:
            items = [BatchItem(n, self._context_tokens(r), r.masked, r.prompt_tokens, r.dp_rank) for r, n in work]
            if cohort:  # after the prefills, in running order, as SGLang's mixed batch lists them
                items += [
                    BatchItem(1, r.seq_tokens - 1, r.masked, r.prompt_tokens, r.dp_rank) for r in self._decoding()
                ]
            batch = StepBatch(mode, tuple(items))
        return StepPlan(batch, tuple(work), self._cost_model.step_time_s(batch), tuple(retracted), gained, cohort)

    def _decode_loads(self, requests: list[SimRequest], new_each: int) -> tuple[RankLoad, ...]:
        """A decode (or verify) step's batch summed per rank, straight from the requests: each computes `new_each`
        tokens over the KV of everything before its newest token."""
        ranks = self._config.attention_ranks
        if ranks == 1:
            context = sum(map(_prompt_tokens, requests)) + sum(map(_output_tokens, requests)) - len(requests)
            masked = sum(1 for r in requests if r.masked) if any(map(_constrained, requests)) else 0
            return (RankLoad.of_uniform(len(requests), new_each, context, masked),)
        counts, contexts, masked_counts = [0] * ranks, [0] * ranks, [0] * ranks
        for r in requests:
            rank = r.dp_rank
            counts[rank] += 1
            contexts[rank] += r.prompt_tokens + r.output_tokens - 1
            if r.constrained and r.masked:
                masked_counts[rank] += 1
        return tuple(RankLoad.of_uniform(n, new_each, c, m) for n, c, m in zip(counts, contexts, masked_counts))

    @staticmethod
    def _context_tokens(r: SimRequest) -> int:
        if not r.decoding:
            return r.prefilled_tokens
        return r.seq_tokens - 1  # decode: KV of everything before the newest token

    def _rank_prefill_budget(self) -> int:
        """What one attention rank's PrefillAdder may prefill in a step (tokens); one request's chunk at most."""
        chunk = self._config.chunked_prefill_size
        return min(chunk, self._config.max_prefill_tokens) if chunk > 0 else self._config.max_prefill_tokens

    def _mixes_decodes(self) -> bool:
        """SGLang's is_mixed_chunk: the flag and chunked prefill (the twin does not mix speculative verifies)."""
        config = self._config
        return config.enable_mixed_chunk and config.chunked_prefill_size > 0 and self.speculative is None

    def _plan_extend(self, now_s: float, reserved_tokens: int = 0) -> list[tuple[SimRequest, int]]:
        """`reserved_tokens`: the budget a mixed step's decodes take (SGLang's mixed_with_decode_tokens). Under DP
        attention each rank fills its own budget with its own requests, up to its own running cap, under the KV
        rules applied to its own pool and radix tree; a rank whose admission stops leaves the others going."""
        if not self._prefilling and (not self.waiting or self._admission_stopped()):
            return []  # no prefill to continue and none to start (the usual decode step)
        ranks = self._config.attention_ranks
        # Each rank's prefill budget for this step (tokens) and running requests (count).
        budgets = [self._rank_prefill_budget() - reserved_tokens // ranks] * ranks
        rank_cap = self._config.max_running_requests // ranks
        # Request slots taken on each rank: running, and sending their KV.
        running = [len(self.running) + len(self.inflight)] if ranks == 1 else [0] * ranks
        if ranks > 1:
            for r in (*self.running, *self.inflight):
                running[r.dp_rank] += 1
        chunking = self._config.chunked_prefill_size > 0
        work: list[tuple[SimRequest, int]] = []
        # A request part-way through a chunked prefill continues first.
        for r in self.running if self._prefilling else ():
            budget = budgets[r.dp_rank]
            if not r.decoding and r.prefill_remaining and budget > 0:
                n = min(r.prefill_remaining, budget) if chunking else r.prefill_remaining
                if not self._take(r, n):
                    return work
                work.append((r, n))
                budgets[r.dp_rank] -= n
        if max(budgets) <= 0 or not self.waiting or self._admission_stopped():  # every rank's budget spent
            return work
        stopped, on_rank = self._stopped_at_running, self._running_per_rank()
        for k in range(ranks):
            if not self._rank_stopped(k, on_rank):
                stopped[k] = None
        slots = len(self.running) + len(self.inflight)
        if slots >= self._config.max_running_requests:
            self._stop_all(on_rank)
            return work
        # What each rank's KV estimate leaves (computed when its first candidate comes up), and the page overhead of
        # the requests it admitted in this step (PrefillAdder's current offset).
        rooms: list[float] = [self.free_tokens() - self._running_estimate()] if ranks == 1 else [0.0] * ranks
        measured = [ranks == 1] * ranks
        pages = [0] * ranks
        for r in self._order(self.waiting, self.caches):
            if len(self.running) + len(self.inflight) >= self._config.max_running_requests:
                self._stop_all(on_rank)
                break
            if (
                (budgets[0] <= 0 or running[0] >= rank_cap)
                if ranks == 1
                else all(budgets[k] <= 0 or running[k] >= rank_cap or stopped[k] is not None for k in range(ranks))
            ):
                break  # every rank's step is full: the rest of the queue waits
            rank = r.dp_rank
            budget = budgets[rank]
            if budget <= 0 or running[rank] >= rank_cap or stopped[rank] is not None:
                continue  # its rank is full this step; the other ranks' queues go on
            if not measured[rank]:
                rooms[rank], measured[rank] = self.free_tokens(rank) - self._running_estimate(rank), True
            cache = self.caches[rank]
            # The last token is always computed: its logits give the next output token.
            matched, node = cache.match_prefix(r.sequence(), r.seq_tokens - 1)
            extend = r.seq_tokens - matched
            rest = min(r.max_new_tokens - r.output_tokens, CLIP_MAX_NEW_TOKENS)
            paged = extend + PAGE_OVERHEAD_TOKENS
            room = rooms[rank]
            if r.ignore_eos and cache.disabled:
                charged = paged + pages[rank]
                fits = paged <= min(self.free_tokens(rank) - pages[rank], room) and self._runs_to_completion(r, charged)
            else:
                fits = paged + rest < room
            if not fits:
                # The rank's KV budget is spent: this request and those behind it on the rank wait.
                stopped[rank] = on_rank[rank]
                if ranks == 1:
                    break
                continue
            if not chunking and extend > budget and any(w.dp_rank == rank for w, _ in work):
                if ranks == 1:
                    break  # without chunking only the first prompt of a rank's step may exceed its budget
                continue
            n = min(extend, budget) if chunking else extend
            cache.lock(node)  # before evicting, so eviction cannot take this request's own prefix
            r.lock_node = node
            if not self._take(r, n):
                cache.unlock(node)
                r.lock_node = None
                if ranks == 1:
                    break
                budgets[rank] = 0  # the rank's slots are spent for this step
                continue
            self._admit(r, matched, now_s)
            rooms[rank] = room - (r.prefill_remaining + PAGE_OVERHEAD_TOKENS + rest)  # its whole budget, this step
            pages[rank] += PAGE_OVERHEAD_TOKENS
            work.append((r, n))
            budgets[rank] -= n
            running[rank] += 1
            on_rank[rank] += 1
        return work

    def _running_per_rank(self) -> list[int]:
        if len(self.pools) == 1:
            return [len(self.running)]
        counts = [0] * len(self.pools)
        for r in self.running:
            counts[r.dp_rank] += 1
        return counts

    def _rank_stopped(self, rank: int, on_rank: list[int]) -> bool:
        """The rank's admission stopped and nobody has left it since (with nothing running, it is tried again)."""
        stopped_at = self._stopped_at_running[rank]
        return stopped_at is not None and on_rank[rank] >= stopped_at > 0

    def _stop_all(self, on_rank: list[int]) -> None:
        """At the server's running cap: every rank stops admitting until one of its requests leaves."""
        self._stopped_at_running[:] = [n or None for n in on_rank]

    def _admission_stopped(self) -> bool:
        """Every rank's admission stopped and nobody has left it since."""
        if len(self.pools) == 1:  # every step asks: the one rank's check without building a list
            stopped_at = self._stopped_at_running[0]
            return stopped_at is not None and len(self.running) >= stopped_at > 0
        on_rank = self._running_per_rank()
        return all(self._rank_stopped(k, on_rank) for k in range(len(on_rank)))

    def _runs_to_completion(self, candidate: SimRequest, charged: int) -> bool:
        """SGLang's add_one_req_ignore_eos: with the candidate admitted, can every running request run to
        its end? Taken shortest first: when the i-th finishes, the bs still running have each grown by
        its remaining tokens, and those finished before it have freed what they held. `charged`: what the
        free slots are short of beyond this step's prefills already taken (the candidate's paged prompt,
        the step's page overhead)."""
        states = []
        rank = candidate.dp_rank
        new_token_ratio = self.ratios[rank]
        for r in (*self._on_rank(self.running, rank), candidate):
            output = r.output_tokens
            left = r.max_new_tokens * (1.0 if r.ignore_eos else new_token_ratio) - output
            if left > 0:
                states.append((left, r.prompt_tokens + output))
        states.sort(key=_first)
        free = self.free_tokens(rank) - charged
        freed = 0
        for i, (left, occupied) in enumerate(states):
            still_running = len(states) - i
            if free + freed - left * still_running <= IGNORE_EOS_RESERVE_TOKENS * still_running:
                return False
            freed += occupied
        return True

    def _admit(self, r: SimRequest, matched: int, now_s: float) -> None:
        if r.admitted_s is None:
            r.admitted_s = now_s  # SGLang's queue time ends at the first forward entry
            r.cached_tokens = matched  # reported once: a re-prefill after retraction is not a cache hit
        r.prefix_tokens = matched
        r.prefill_target = r.seq_tokens
        r.prefilled_tokens = matched
        self.waiting.remove(r)
        self._start_running(r)
        self._prefilling += 1

    def _decoding(self) -> list[SimRequest]:
        """The running requests whose prefill is done, in running order."""
        return [r for r in self.running if r.decoding] if self._prefilling else list(self.running)

    def _plan_cohort_step(self) -> tuple[list[SimRequest], int]:
        """A plain server's decoding requests take a slot each for this step (after retracting some if the pool
        cannot give every one a slot): returns the requests retracted and how many decode."""
        cohort = self.cohort
        retracted: list[SimRequest] = []
        if len(self.pools) == 1:
            if cohort.size and self.free_tokens() < cohort.size:
                _, retracted = self._retract(self._decoding())
            if not cohort.size:
                return retracted, 0
            if not self._reserve(cohort.size):  # only when one request alone outgrows the pool
                for r in self._decoding():
                    if not self._reserve(1):
                        self._drop(r, KV_EXHAUSTED)
        else:  # each rank gives its own decoding requests a slot each, retracting on that rank if it must
            retracting = [False] * len(self.pools)
            for rank, n in enumerate(cohort.rank_sizes()):
                if n and self.free_tokens(rank) < n:
                    out = self._retract(self._on_rank(self._decoding(), rank), rank)[1]
                    retracted += out
                    retracting[rank] = bool(out)
            if not cohort.size:
                return retracted, 0
            for rank, n in enumerate(cohort.rank_sizes()):
                if n and not self._reserve(n, rank):
                    for r in self._on_rank(self._decoding(), rank):
                        if not self._reserve(1, rank):
                            self._drop(r, KV_EXHAUSTED)
            cohort.planned += 1
            for rank, n in enumerate(cohort.rank_sizes()):
                if n and not retracting[rank]:  # a rank that decodes decays its own ratio
                    self._decay_new_token_ratio(1, rank)
            return retracted, cohort.size
        cohort.planned += 1
        if cohort.size and not retracted:
            self._decay_new_token_ratio(1)
        return retracted, cohort.size

    def quiet_decode(self) -> tuple[int, int, int] | None:
        """The plain decode steps that can run from here with nothing for the scheduler to decide: no prefill to
        continue or start (an empty queue, or admission stopped until someone leaves), one rank, a slot free for
        every request in each step without evicting, and no request reaching its length. (requests, their context
        tokens in the first step, steps); None: plan step by step. Run them with quiet_decode_done."""
        if (
            self.speculative is not None
            or self._prefilling
            or self.dropped
            or (self.waiting and not self._admission_stopped())
        ):
            return None
        quiet = self.cohort.quiet_steps()
        if quiet is None:
            return None
        n, context, steps = quiet
        steps = min(steps, self.pool.available_tokens(self.cache.total_tokens) // n)
        return (n, context, steps) if steps > 0 else None

    def quiet_decode_done(self, end_times: list[float]) -> None:
        """Steps of a quiet_decode run ended at `end_times`: their slots, their tokens and the ratio's decay, as
        plan_step and complete_step count them step by step."""
        self.pool.reserve(self.cohort.size * len(end_times))
        self.graph_passes.count(self.cohort.size, len(end_times))
        self._decay_new_token_ratio(len(end_times))
        self.cohort.advance_quietly(end_times)

    def _plan_verify(self) -> tuple[list[tuple[SimRequest, int]], list[SimRequest], int]:
        """Speculative decoding: each decoding request's slots for this verify: (request, tokens it gains) each,
        the requests retracted to make room, and the tokens gained in all."""
        spec = self.speculative
        assert spec is not None
        decoding = self._decoding()
        retracted: list[SimRequest] = []
        if len(self.pools) == 1:
            if decoding and self.free_tokens() < len(decoding) * spec.verify_tokens:
                decoding, retracted = self._retract(decoding)
        else:  # each rank retracts its own requests if its pool must
            kept: list[SimRequest] = []
            for rank in range(len(self.pools)):
                mine = self._on_rank(decoding, rank)
                if mine and self.free_tokens(rank) < len(mine) * spec.verify_tokens:
                    mine, out = self._retract(mine, rank)
                    retracted += out
                kept += mine
            kept_ids = set(map(id, kept))
            decoding = [r for r in decoding if id(r) in kept_ids]
        gains = spec.tokens_gained_each([r.target_tokens - r.output_tokens for r in decoding])
        need = sum(gains)
        if len(self.pools) == 1 and self._reserve(need):  # the usual case: the slots for all, in bulk
            for r, n in zip(decoding, gains):
                r.held_tokens += n
            work = list(zip(decoding, gains))
        else:
            work = []
            need = 0
            for r, n in zip(decoding, gains):
                if not self._take(r, n):  # only when one request alone outgrows the pool
                    self._drop(r, KV_EXHAUSTED)
                    continue
                work.append((r, n))
                need += n
        if len(self.pools) == 1:
            if work and not retracted:
                self._decay_new_token_ratio(1)
        else:
            retracted_on = {r.dp_rank for r in retracted}
            for rank in sorted({r.dp_rank for r, _ in work} - retracted_on):
                self._decay_new_token_ratio(1, rank)
        return work, retracted, need

    def _decay_new_token_ratio(self, steps: int, rank: int = 0) -> None:
        """SGLang's per-decode-step decay of the rank's admission estimate ratio, down to its floor, `steps` times
        (one subtraction a step, so a run of steps lands on the same float as the steps one by one)."""
        ratio, decay, floor = self.ratios[rank], self._ratio_decay, self.min_new_token_ratio
        for _ in range(steps):
            ratio = max(ratio - decay, floor)
        self.ratios[rank] = ratio

    def _retract(self, decoding: list[SimRequest], rank: int = 0) -> tuple[list[SimRequest], list[SimRequest]]:
        """SGLang's retract_decode: give up the requests that have done least, until the rest have
        room for RETRACT_DECODE_STEPS more steps (`decoding`: the rank's, whose pool is short)."""
        keep = sorted(decoding, key=lambda r: (r.output_tokens, -r.prompt_tokens), reverse=True)
        retracted = []
        while len(keep) > 1:
            victim = keep.pop()
            self._send_back(victim)
            retracted.append(victim)
            if self.free_tokens(rank) >= len(keep) * RETRACT_DECODE_STEPS:
                break
        budget = sum(r.max_new_tokens for r in keep)
        if budget:
            needed = sum(r.output_tokens for r in keep) + RETRACT_DECODE_STEPS * len(keep)
            self.ratios[rank] = min(1.0, needed / budget)
        kept = set(map(id, keep))
        return [r for r in decoding if id(r) in kept], retracted

    def _send_back(self, r: SimRequest) -> None:
        if r.cohort is not None:
            self.cohort.leave(r)
        self.retractions.requests += 1
        self.retractions.input_tokens += r.prompt_tokens
        self.retractions.output_tokens += r.output_tokens
        r.num_retractions += 1
        self._release(r)
        r.decoding = False
        r.prefilled_tokens = r.prefill_target = r.prefix_tokens = 0
        self.running.remove(r)
        self.waiting.append(r)

    # -- completing -----------------------------------------------------------------------------

    def complete_step(self, plan: StepPlan, now_s: float) -> list[SimRequest]:
        """Apply a finished step; returns the requests that produced a token (or finished) and that the engine
        must look at: every one that was listed in the step, and of the cohort those that finished or stream
        each chunk (decode_cohort.py times the rest's chunks itself)."""
        if plan.batch.mode is ForwardMode.DECODE and self.speculative is not None:
            return self._complete_verify(plan)
        progressed: list[SimRequest] = []
        finished = False
        joining: list[SimRequest] = []
        for r, n in plan.work:  # prefill chunks
            if r.aborted:
                continue
            r.prefilled_tokens += n
            if r.prefilled_tokens < r.prefill_target:
                continue
            self._cache_prefill(r)
            r.decoding = True
            self._prefilling -= 1
            r.output_tokens += 1  # the last prompt token's logits give the first output token
            if r.first_token_s is None:
                r.first_token_s = now_s
            if r.output_tokens >= r.target_tokens:
                self._finish(r)
                finished = True
            elif self.speculative is None:
                joining.append(r)
            progressed.append(r)
        if plan.cohort:
            ended, seen = self.cohort.advance(now_s)
            for r in ended:
                self._finish(r)
            finished = finished or bool(ended)
            progressed += seen
        for r in joining:  # they decode from the next step on
            self.cohort.join(r)
        if finished:
            self.running = [r for r in self.running if not r.finished]
        return progressed

    def _complete_verify(self, plan: StepPlan) -> list[SimRequest]:
        """A speculative verify step: each request gains what its drafts earned."""
        assert self.speculative is not None
        self.speculative.record_step([(r, n) for r, n in plan.work if not r.aborted])
        progressed: list[SimRequest] = []
        finished = False
        # Every request here is decoding, so it has its first token already.
        for r, n in plan.work:
            if r.aborted:
                continue
            output = r.output_tokens + n
            r.output_tokens = output
            if output >= r.target_tokens:
                self._finish(r)
                finished = True
            progressed.append(r)
        if finished:
            self.running = [r for r in self.running if not r.finished]
        return progressed

    def _cache_prefill(self, r: SimRequest) -> None:
        """The sequence's KV now exists: hand it to the radix tree (duplicates of cached tokens are freed)."""
        cache = self.caches[r.dp_rank]
        if cache.disabled:
            return
        sequence = r.sequence()
        cache.insert(sequence)
        moved = len(sequence) - r.prefix_tokens
        self.pools[r.dp_rank].release(moved)
        r.held_tokens -= moved
        _, node = cache.match_prefix(sequence)
        cache.lock(node)
        cache.unlock(r.lock_node)
        r.lock_node = node
        r.prefix_tokens = len(sequence)

    def _finish(self, r: SimRequest) -> None:
        if r.cohort is not None:
            self.cohort.leave(r, finishing=True)
        r.finished = True
        # The newest token has no KV yet, so the tree gets prompt + all but the last output token.
        cache = self.caches[r.dp_rank]
        if not cache.disabled:
            cache.insert(r.input_ids + tuple(r.output_ids[: r.output_tokens - 1]))
        self._release(r)

    def _release(self, r: SimRequest) -> None:
        if r.cohort is not None:
            self.cohort.leave(r)
        if r.lock_node is not None:
            self.caches[r.dp_rank].unlock(r.lock_node)
            r.lock_node = None
        self.pools[r.dp_rank].release(r.held_tokens)
        r.held_tokens = 0

    def _drop(self, r: SimRequest, reason: dict) -> None:
        self.dropped.append(r)
        r.aborted = True
        r.abort_reason = reason
        self._release(r)
        self.running.remove(r)

    def abort(self, r: SimRequest, reason: dict | None = None) -> None:
        """Drop a request the client gave up on (or a fault killed); frees what it held."""
        if r.finished or r.aborted:
            return
        r.aborted = True
        r.abort_reason = reason or {"type": "abort", "message": "Abort before the request finished."}
        if r in self.waiting:
            self.waiting.remove(r)
        elif r in self.transferring:
            pass  # its slots are freed when the transfer ends (add_transferred)
        elif r in self.prebuilt:
            self.prebuilt.remove(r)
            self._release(r)
        elif r in self.running:
            self.running.remove(r)
            if not r.decoding:
                self._prefilling -= 1
            self._release(r)
        # else: still in the engine's inbox; the engine skips aborted arrivals

    def flush_cache(self) -> bool:
        """SGLang's /flush_cache: only when idle."""
        if self.has_work():
            return False
        for cache in self.caches:
            cache.reset()
        return True

    def token_usage(self) -> float:
        """SGLang's token_usage: slots in use (reserved, or locked in a tree: evictable cache counts as free) over all
        the ranks' slots."""
        locked = sum(c.total_tokens - c.evictable_tokens() for c in self.caches)
        return (locked + sum(p.reserved_tokens for p in self.pools)) / self.capacity_tokens
