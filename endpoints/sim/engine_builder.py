"""Wires the twin from its parsed arguments: profiles → cost model → KV pool → cache → scheduler → engine."""

from __future__ import annotations

from endpoints.clock import Clock
from endpoints.sim.cost.cold_start import ColdStartCostModel
from endpoints.sim.cost.cost_model import CostModel, GrammarCostModel, RooflineCostModel
from endpoints.sim.cost.profiles import (
    CostConstants,
    cost_constants_for,
    hardware_profile_for,
    model_profile_for,
)
from endpoints.sim.cost.run_variation import JitteredCostModel, draw_run, varied_constants
from endpoints.sim.engine.disaggregation import Disaggregation, DisaggregationMode, KvLink
from endpoints.sim.engine.engine import SimEngine
from endpoints.sim.engine.gpu_counters import GpuCounters
from endpoints.sim.engine.kv_pool import KvPool, kv_capacity_tokens
from endpoints.sim.engine.radix_cache import RadixCache
from endpoints.sim.engine.scheduler import Scheduler, SchedulerConfig
from endpoints.sim.engine.speculative import SpeculativeCostModel, SpeculativeDecoding, mtp_draft_profile
from endpoints.sim.server_args import SimServerArgs
from endpoints.sim.structured.grammar_backend import GrammarBackend

DECODE_EXTRA_SLOTS_MAX_BATCH = 32


def _scheduler_config(args: SimServerArgs) -> SchedulerConfig:
    """The scheduler's limits as SGLang resolves the flags (SimServerArgs' rank_* and resolved_* properties). Under
    DP attention every rank runs at most max(1, --max-running-requests // ranks) requests
    (model_executor/pool_configurator.py, requested_max_running_requests_per_worker)."""
    ranks = args.parallel.attention_ranks
    per_rank = max(1, args.max_running_requests // ranks)
    running = per_rank * ranks if ranks > 1 else args.max_running_requests
    slots = 0
    if args.disaggregation_mode is DisaggregationMode.DECODE:
        # SGLang's default --disaggregation-decode-extra-slots (arg_groups/pd_disaggregation_hook.py): twice a
        # rank's batch where that is at most 32 requests, else none; the pool has that many slots beside the batch.
        extra = 2 * per_rank if per_rank <= DECODE_EXTRA_SLOTS_MAX_BATCH else 0
        slots = (per_rank + extra) * ranks
    return SchedulerConfig(
        policy=args.schedule_policy,
        max_running_requests=running,
        chunked_prefill_size=args.rank_chunked_prefill_size,
        max_prefill_tokens=args.max_prefill_tokens,
        schedule_conservativeness=args.resolved_schedule_conservativeness,
        enable_mixed_chunk=args.enable_mixed_chunk,
        attention_ranks=ranks,
        decode_request_slots=slots,
        decode_graph_max_bs=args.decode_graph_max_bs,
    )


def build_engine(args: SimServerArgs, clock: Clock, cost_constants: CostConstants | None = None) -> SimEngine:
    """Raises UnknownProfileError or KvSizingError with a message naming the flag to change.
    `cost_constants`: the cost model's efficiencies (default: the fitted ones for the GPU's vendor)."""
    model = model_profile_for(args.model_path)
    hardware = hardware_profile_for(args.sim_hardware.value)
    parallel = args.parallel
    constants = cost_constants or cost_constants_for(hardware.vendor)
    draw = None if args.run_variation is None else draw_run(args.run_variation)
    if draw is not None:
        constants = varied_constants(constants, draw)
    spec = args.speculative
    draft_profile = None if spec is None else mtp_draft_profile(model)
    capacity = kv_capacity_tokens(
        model, hardware, parallel, args.mem_fraction_static, args.kv_dtype_bytes, draft=draft_profile
    )
    cost_model: CostModel = RooflineCostModel(model, hardware, parallel, args.kv_dtype_bytes, constants)
    if spec is not None and draft_profile is not None:
        draft = RooflineCostModel(draft_profile, hardware, parallel, args.kv_dtype_bytes, constants)
        cost_model = SpeculativeCostModel(spec, cost_model, draft)
    if draw is not None and args.run_variation is not None:
        cost_model = JitteredCostModel(cost_model, args.run_variation.step_jitter_sd, draw.step_seed)
    if args.sim_cold_start:
        cost_model = ColdStartCostModel(cost_model, constants.cold_prefill_s)
    grammar = GrammarBackend(args.grammar_backend)
    if grammar.costs is not None:
        cost_model = GrammarCostModel(cost_model, grammar.costs)
    # A decode server has no radix cache (SGLang's --disaggregation-decode-enable-radix-cache is off by default): its
    # prompts arrive as KV from the prefill, whose cache is the one that hits.
    no_cache = args.disable_radix_cache or args.disaggregation_mode is DisaggregationMode.DECODE
    ranks = parallel.attention_ranks  # each with its own pool (the capacity is theirs together) and tree
    scheduler = Scheduler(
        _scheduler_config(args),
        cost_model,
        [RadixCache(disabled=no_cache) for _ in range(ranks)],
        [KvPool(capacity // ranks) for _ in range(ranks)],
        None if spec is None else SpeculativeDecoding.from_config(spec),
    )
    disaggregation = None
    if args.disaggregation_mode is not DisaggregationMode.NULL:
        link = KvLink(args.sim_kv_link_gb_s, args.sim_kv_transfer_latency_ms / 1000.0)
        disaggregation = Disaggregation(
            args.disaggregation_mode, link, model.kv_bytes_per_token(args.kv_dtype_bytes),
            args.num_reserved_decode_tokens,
        )  # fmt: skip
    return SimEngine(
        scheduler,
        clock,
        model,
        context_length_tokens=args.context_length or model.max_context_tokens,
        stream_interval=args.stream_interval,
        grammar=grammar,
        disaggregation=disaggregation,
        gpu=GpuCounters(hardware.hbm_bytes_per_s, clock.now_s()),
    )
