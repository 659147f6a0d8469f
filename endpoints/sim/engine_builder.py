"""Wires the twin from its parsed arguments: profiles → cost model → KV pool → cache → scheduler → engine."""

from __future__ import annotations

from endpoints.sim.clock import Clock
from endpoints.sim.cost_model import ParallelConfig, RooflineCostModel
from endpoints.sim.engine import SimEngine
from endpoints.sim.kv_pool import KvPool, kv_capacity_tokens
from endpoints.sim.profiles import hardware_profile_for, model_profile_for
from endpoints.sim.radix_cache import RadixCache
from endpoints.sim.scheduler import Scheduler, SchedulerConfig
from endpoints.sim.server_args import SimServerArgs


def build_engine(args: SimServerArgs, clock: Clock) -> SimEngine:
    """Raises UnknownProfileError or KvSizingError with a message naming the flag to change."""
    model = model_profile_for(args.model_path)
    hardware = hardware_profile_for(args.sim_hardware.value)
    parallel = ParallelConfig(args.tp_size, args.dp_size, args.enable_dp_attention)
    capacity = kv_capacity_tokens(model, hardware, parallel, args.mem_fraction_static, args.kv_dtype_bytes)
    scheduler = Scheduler(
        SchedulerConfig(
            policy=args.schedule_policy,
            max_running_requests=args.max_running_requests,
            chunked_prefill_size=args.chunked_prefill_size,
            max_prefill_tokens=args.max_prefill_tokens,
            schedule_conservativeness=args.schedule_conservativeness,
        ),
        RooflineCostModel(model, hardware, parallel, args.kv_dtype_bytes),
        RadixCache(disabled=args.disable_radix_cache),
        KvPool(capacity),
    )
    return SimEngine(
        scheduler,
        clock,
        model,
        context_length_tokens=args.context_length or model.max_context_tokens,
        stream_interval=args.stream_interval,
    )
