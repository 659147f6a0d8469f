"""Stage 2: provision the endpoint, replay the workload against it in shards, tear it down.

One graph-backed asset, so a GPU endpoint lives no longer than its replay: `start_endpoint` starts (or
attaches to) the endpoint as the partition's week had it configured and fans out one task per shard;
`replay_shard` steps run in parallel under the multiprocess (or Kubernetes) executor and fix one
shared t0 only once every shard has its prompts ready (replay/schedule/rendezvous.py); `finish_replay` stops
the endpoint and merges the shards into one run; `measure_capacity` then finds, in virtual time on the
twin, the load the endpoint sustains inside the SLO (capacity.json; a real endpoint's is its shadow twin's, scaled by
its measured throughput, unless the scenario's opt-in rate ramp measured it in replay_shard while the endpoint was
up: assets/real_capacity.py). Any failing step stops the endpoint too (a failure
hook reading the run's lease file), and the lease sensor stops it when the run ends any other way
(terminated, run worker killed). One replay per endpoint at a time is enforced on runs, by their
endpoint tag (pipelines/schedules.py, dagster.yaml).
"""

import multiprocessing
import os
import shutil
import uuid
from dataclasses import dataclass, replace
from pathlib import Path

import dagster as dg
import orjson

from assets.partition_context import PartitionContext
from assets.real_capacity import ramp_real_endpoint, ramp_wanted, write_shadow_capacities
from assets.resources import ScenarioCatalog, WarehouseResource
from assets.shadow_replay import write_shadow_canary
from common.run_folder import (
    CAPACITY_LOG_FILE,
    RENDEZVOUS_DIR,
    ROUTING_REFERENCE_FILE,
    SERVER_FACTS_FILE,
    SHARD_DIR,
    capacity_cache_dir,
)
from endpoints.capacity.capacity_alongside import measuring_alongside
from endpoints.capacity.fleet_plan import write_fleet_plans_json
from endpoints.capacity.routing_reference import write_routing_reference_json
from endpoints.capacity.run_capacity import CapacityInputs, measure_run_capacity
from endpoints.capacity.slo_capacity import write_capacity_json
from endpoints.lease_file import end_lease, new_lease, write_lease
from endpoints.probes.cache_prep import prepare_cache
from endpoints.probes.probe_session import probing
from endpoints.provision import start_detached
from endpoints.running_endpoint import RunningEndpoint
from endpoints.spec import EndpointClock, EndpointMode, EndpointSpec
from endpoints.virtual_twin import VirtualTime, replay_on_virtual_twin
from replay.recording.run_json import write_run_json
from replay.recording.shard_merge import merge_shard_runs
from replay.runner import ReplayConfig, run_replay, run_replay_async
from replay.scenario_config import replay_config_for
from warehouse.marts.price_table import resolve_gpu_price
from workloads.scenarios import Scenario
from workloads.weekly_traffic import WeekTraffic
from workloads.workload import Workload

POST_REPLAY_NICE = 10  # added to the process's nice value once its replay is over
# Executors that give each step its own pod or container: a server start_endpoint started would end
# with that step's pod, so only attach endpoints work under them (endpoints/provision.py).
STEP_PER_POD_EXECUTORS = frozenset({"k8s", "celery-k8s", "docker", "ecs"})


@dataclass(frozen=True, slots=True)
class ReplayOutput:
    # One per repeat of the window (scenario.repeats), in order; each holds requests.parquet, run.json,
    # server_samples.parquet, the server's log and facts.
    run_dirs: tuple[str, ...]
    run_ids: tuple[str, ...]
    endpoint: str


@dataclass(frozen=True, slots=True)
class PlannedRun:
    run_id: str
    run_dir: str
    rendezvous_dir: str | None  # where the shards meet to fix t0; None: one shard starts when ready


@dataclass(frozen=True, slots=True)
class ShardTask:
    runs: tuple[PlannedRun, ...]  # the week's repeats, replayed one after another
    shard_index: int
    shard_count: int
    endpoint: RunningEndpoint | None  # None: a twin on a virtual clock, which replay_shard serves itself


def run_seed(run_id: str) -> int:
    """The twin's --sim-run-seed for a run: from its id, so every run draws its own node and a run's seed is
    known from its id (server_facts.json records it too)."""
    return int(run_id.rsplit("-", 1)[-1], 16)


def varied_spec(spec: EndpointSpec, scenario: Scenario, run_id: str) -> EndpointSpec:
    """The endpoint as this run has it: a twin with run-to-run variation on gets the run's seed."""
    if spec.mode is not EndpointMode.SIM or not scenario.twin_run_variation or "--sim-run-seed" in spec.server_args:
        return spec
    return replace(spec, server_args=(*spec.server_args, "--sim-run-seed", str(run_seed(run_id))))


def _run_worker_pid(context: dg.OpExecutionContext) -> int:
    # The process that started the run (its RUN_START event): a launched run's worker, which the run
    # launcher starts as a child of the code server, and whose steps run either in it or in processes of
    # their own (pipelines/weekly_executor.py), so neither this process nor its parent is it in general.
    records = context.instance.get_records_for_run(
        context.run_id, of_type=dg.DagsterEventType.RUN_START, limit=1
    ).records
    event = records[0].event_log_entry.dagster_event if records else None
    return event.pid if event is not None and event.pid is not None else os.getpid()


def _stop_leased(warehouse: WarehouseResource, dagster_run_id: str) -> None:
    end_lease(warehouse.leases_dir(), dagster_run_id)


# The part-file flush interval of a replay on a virtual clock, in virtual seconds. A virtual run covers about 20
# of them a wall second, so a 1 s interval wrote a Parquet part every ~50 ms of CPU (15% of the replay's CPU on
# the bundled chat window); at 20 a record still reaches disk within 20 virtual seconds of completing.
VIRTUAL_FLUSH_INTERVAL_S = 20.0


def _yield_cpu_to_replays() -> None:
    # What this process does after its replay (merging, the capacity sweep, the lake, checks, marts, the
    # report), and a replay on a twin on a virtual clock, is CPU work with no clock to keep; another run's
    # replay in real time on the same host keeps one (its client and twin send and stream on schedule). A
    # lower priority from here on lets that replay go first (a one-shard run's later steps run in this run
    # worker: pipelines/weekly_executor.py). Only in a process started for the run (the run launcher's run
    # worker and the executor's step processes are both started by multiprocessing): never in the caller of
    # execute_in_process, whose later work is not this run's. Once per process.
    if multiprocessing.parent_process() is None:
        return
    try:
        if os.nice(0) < POST_REPLAY_NICE:
            os.nice(POST_REPLAY_NICE)
    except OSError:
        pass


@dg.failure_hook(required_resource_keys={"warehouse"})
def stop_endpoint_on_failure(context: dg.HookContext) -> None:
    _stop_leased(context.resources.warehouse, context.run_id)


# Waits for the workload (without loading it): an endpoint is started only when there is something to
# replay, so a failed workload step cannot leave a started server with no step left to stop it.
@dg.op(out=dg.DynamicOut(ShardTask), ins={"workload_ready": dg.In(dg.Nothing)}, tags={"kind": "sglang"})
def start_endpoint(context: dg.OpExecutionContext, catalog: ScenarioCatalog, warehouse: WarehouseResource):
    part = catalog.partition(context)
    scenario, spec = part.scenario, part.endpoint
    resolve_gpu_price(spec)  # a price book that does not exist fails here, before a GPU is paid for
    runs = []
    for _ in range(scenario.repeats):
        run_id = f"{part.week_start:%Y%m%d}-{scenario.name}-{uuid.uuid4().hex[:8]}"
        run_dir = warehouse.run_dir(part.week_start.isoformat(), scenario.name, run_id)
        runs.append(PlannedRun(run_id, str(run_dir), str(run_dir / RENDEZVOUS_DIR) if scenario.shards > 1 else None))
    run_dir = Path(runs[0].run_dir)
    steps_share_host = context.job_def.executor_def.name not in STEP_PER_POD_EXECUTORS
    worker_pid = _run_worker_pid(context)

    def lease_it(process_group: int | None) -> None:
        # Written the moment the server exists, so the lease sensor can stop it even if this step dies
        # during the health wait (minutes for a real server).
        write_lease(warehouse.leases_dir(), new_lease(context.run_id, spec.name, process_group, worker_pid))

    if spec.clock is EndpointClock.VIRTUAL:
        # Nothing to start here: the replay step serves the twin in its own event loop (endpoints/virtual_twin.py).
        if scenario.shards != 1:
            raise dg.Failure(
                f"scenario {scenario.name!r} has {scenario.shards} shards, but endpoint {spec.name!r} runs on a "
                "virtual clock, which one process keeps: give it shards: 1, or the endpoint clock: wall"
            )
        lease_it(None)  # finish_replay and the lease sensor find the run's lease as for any endpoint
        context.log.info(
            f"endpoint {spec.name} (sim, virtual clock, {' '.join(spec.server_args)}): served in the replay step"
        )
        yield dg.DynamicOutput(ShardTask(tuple(runs), 0, 1, None), mapping_key="shard_0")
        return
    # A server in real time is started once for the week's repeats (as one deployment would be measured again).
    spec = varied_spec(spec, scenario, runs[0].run_id)
    lease = start_detached(spec, run_dir, steps_share_host=steps_share_host, on_spawned=lease_it)
    if lease.process_group is None:
        lease_it(None)  # attached: nothing to stop, but finish_replay and the sensor find the lease alike
    try:
        cache = prepare_cache(lease.endpoint, scenario.cold_start)
    except BaseException:
        _stop_leased(warehouse, context.run_id)
        raise
    context.log.info(
        f"endpoint {spec.name} ({spec.mode.value}, {' '.join(spec.server_args)}) ready at {lease.endpoint.url}; "
        f"{cache.note}"
    )
    for later in runs[1:]:  # the same server's facts and log stand for every repeat
        Path(later.run_dir).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(run_dir / SERVER_FACTS_FILE, Path(later.run_dir) / SERVER_FACTS_FILE)
    for index in range(scenario.shards):
        task = ShardTask(tuple(runs), index, scenario.shards, lease.endpoint)
        yield dg.DynamicOutput(task, mapping_key=f"shard_{index}")


@dg.op(tags={"kind": "sglang"})
def replay_shard(
    context: dg.OpExecutionContext,
    workload: Workload,
    task: ShardTask,
    catalog: ScenarioCatalog,
    warehouse: WarehouseResource,
) -> list[str]:
    """This shard of each of the week's repeats, one after another; returns the shard folders, in run order."""
    part = catalog.partition(context)
    scenario = part.scenario
    # The week's window (the same the workload step took: the spooled trace is only looked up, not read).
    traffic = part.traffic(warehouse.workloads_dir())
    if task.endpoint is None:
        # A virtual clock's replay keeps a core busy and no schedule: it lets real-time replays on the host go
        # first (a run of the instance tests failed runs_quality's schedule lag beside one).
        _yield_cpu_to_replays()
    shard_dirs = []
    for repeat, run in enumerate(task.runs):
        if repeat > 0 and task.endpoint is not None and task.shard_index == 0:
            # Each repeat starts from the cache state the first did (a flush waits for the other shards' last
            # requests: SGLang flushes only an idle server; they wait for this shard at the rendezvous).
            prepare_cache(task.endpoint, scenario.cold_start)
        shard_dirs.append(str(_replay_one(context, part, workload, traffic, task, run, warehouse)))
    if task.endpoint is not None and ramp_wanted(task.endpoint.spec, scenario):
        # The opt-in rate ramp needs the endpoint up and to itself: here, after the week's replays (a ramp scenario
        # has one shard), before finish_replay stops it.
        run_dirs = [Path(run.run_dir) for run in task.runs]
        ramp = ramp_real_endpoint(task.endpoint, workload, traffic, scenario, run_dirs, task.runs[-1].run_id)
        context.log.info(
            f"rate ramp: capacity at SLO {ramp.capacity_rps_at_slo} requests/s"
            + ("" if ramp.broke else " (never broke: a lower bound)")
            + f", {len(ramp.steps)} steps, {ramp.wall_s:.0f} s, {ramp.gpu_minutes:.1f} GPU-minutes"
        )
    return shard_dirs


def _replay_one(
    context: dg.OpExecutionContext,
    part: PartitionContext,
    workload: Workload,
    traffic: WeekTraffic,
    task: ShardTask,
    run: PlannedRun,
    warehouse: WarehouseResource,
) -> Path:
    scenario = part.scenario
    shard_dir = Path(run.run_dir) / SHARD_DIR.format(task.shard_index)
    # The endpoint start_endpoint started (a virtual clock's twin is served here, from the partition's spec).
    spec = task.endpoint.spec if task.endpoint is not None else varied_spec(part.endpoint, scenario, run.run_id)

    def config_at(url: str) -> ReplayConfig:
        return replay_config_for(
            scenario,
            traffic,
            url=url,
            api_key_env=spec.api_key_env,
            run_id=run.run_id,
            shard_index=task.shard_index,
            shard_count=task.shard_count,
            rendezvous_dir=run.rendezvous_dir,
            # The rendezvous folder outlives a Dagster run (re-execution reuses start_endpoint's task) and a step
            # attempt: only this run's and this attempt's ready files count.
            rendezvous_run_id=context.run_id,
            rendezvous_attempt=context.retry_number,
        )

    if task.endpoint is None:

        def replay(endpoint: RunningEndpoint, clock: VirtualTime):
            config = replace(config_at(endpoint.url), flush_interval_s=VIRTUAL_FLUSH_INTERVAL_S)
            return run_replay_async(workload, config, shard_dir, clock, exchange=endpoint.exchange)

        first = run is task.runs[0]
        if task.shard_index == 0 and first:  # the capacity measurements overlap the replay: neither keeps a schedule
            inputs = _capacity_inputs(part, workload, traffic, warehouse, run.run_id)
            with measuring_alongside(inputs, Path(run.run_dir)) as child:
                info = replay_on_virtual_twin(spec, Path(run.run_dir), run.run_id, scenario.cold_start, replay)
            if child.returncode:
                child_log = Path(run.run_dir) / CAPACITY_LOG_FILE
                context.log.warning(f"the capacity measurement beside the replay failed (exit {child.returncode}, "
                                    f"{child_log}): measure_capacity measures it")  # fmt: skip
        else:
            info = replay_on_virtual_twin(spec, Path(run.run_dir), run.run_id, scenario.cold_start, replay)
    elif task.shard_index == 0:
        # One prober per run: shard 0 scrapes the server for the whole replay (shards share t0).
        with probing(task.endpoint, Path(run.run_dir), run.run_id):
            info = run_replay(workload, config_at(task.endpoint.url), shard_dir)
    else:
        info = run_replay(workload, config_at(task.endpoint.url), shard_dir)
    context.log.info(
        f"run {run.run_id} shard {task.shard_index}/{task.shard_count}: {info.requests_ok}/{info.requests_total} ok"
    )
    return shard_dir


@dg.op(tags={"kind": "sglang"})
def finish_replay(
    context: dg.OpExecutionContext, shard_dirs: list[list[str]], warehouse: WarehouseResource
) -> ReplayOutput:
    _stop_leased(warehouse, context.run_id)
    _yield_cpu_to_replays()
    by_run: dict[Path, list[Path]] = {}
    for shard in shard_dirs:
        for shard_dir in shard:
            by_run.setdefault(Path(shard_dir).parent, []).append(Path(shard_dir))
    run_dirs, run_ids, endpoint = [], [], ""
    for run_dir in [Path(d).parent for d in shard_dirs[0]]:  # in the order they were replayed
        facts = orjson.loads((run_dir / SERVER_FACTS_FILE).read_bytes())
        info = merge_shard_runs(sorted(by_run[run_dir]), run_dir)
        info = replace(info, config_fingerprint=facts.get("config_fingerprint"))
        write_run_json(run_dir, info)
        context.log.info(f"run {info.run_id}: {info.requests_ok}/{info.requests_total} ok, window {info.window_s} s")
        run_dirs.append(str(run_dir))
        run_ids.append(info.run_id)
        endpoint = facts["endpoint"]
    context.add_output_metadata(
        {
            "run_dirs": dg.MetadataValue.json(run_dirs),
            "runs": len(run_dirs),
            "requests_ok": info.requests_ok,
            "requests_total": info.requests_total,
            "window_s": info.window_s,
            "schedule_lag_p99_ms": info.schedule_lag_p99_ms,
            "client_degraded": info.client_degraded,
            "config_fingerprint": info.config_fingerprint or "",
        }
    )
    return ReplayOutput(run_dirs=tuple(run_dirs), run_ids=tuple(run_ids), endpoint=endpoint)


@dg.op(tags={"kind": "python"})
def measure_capacity(
    context: dg.OpExecutionContext,
    workload: Workload,
    replay: ReplayOutput,
    catalog: ScenarioCatalog,
    warehouse: WarehouseResource,
) -> ReplayOutput:
    """After the replay (the endpoint already stopped): the load sweep in virtual time that finds the rate
    the endpoint sustains inside the SLO on this week's window (endpoints/capacity/slo_capacity.py, for one
    server, a fleet through its router's model or a PD fleet alike), written as capacity.json beside run.json for
    the runs row; for a fleet, the routing reference (routing_reference.py: the same requests through one replica and
    through the fleet) as routing_reference.json; with a target_rps, the fleet plan for it (fleet_plan.py), as
    fleet_plans.json."""
    part = catalog.partition(context, endpoint=replay.endpoint)
    scenario, spec = part.scenario, part.endpoint
    traffic = part.traffic(warehouse.workloads_dir())
    # One sweep per run, on the twin as that run had it (its run-to-run variation seed): a week's repeats then
    # differ in capacity as in everything else. Beside a virtual-clock replay the first run's measurements ran
    # already (replay_shard): they are read back, and the routing reference and plan (the week's) are shared.
    measured_runs = [
        measure_run_capacity(_capacity_inputs(part, workload, traffic, warehouse, run_id)) for run_id in replay.run_ids
    ]
    capacity, reference, plan = measured_runs[0].capacity, measured_runs[0].reference, measured_runs[0].plan
    # A real endpoint's shadow canary: the same window on the twin with its flags, twin/real ratios per run.
    canaries = write_shadow_canary(spec, workload, traffic, scenario, replay.run_dirs)
    if capacity is None:
        # A real endpoint's capacity: the rate ramp's (replay_shard wrote it), else the shadow twin's, scaled.
        inputs = _capacity_inputs(part, workload, traffic, warehouse, replay.run_ids[0])
        real = write_shadow_capacities(spec, inputs.window, inputs.slo, canaries, replay.run_dirs, inputs.cache_dir)
        if not canaries:
            context.log.info(f"no capacity for {spec.name} ({spec.mode.value}): no sweep applies to its window")
        for run_id, found in zip(replay.run_ids, real):
            context.log.info(f"run {run_id}: capacity at SLO " + (
                "none (no sweep applies, or the shadow twin cannot model the endpoint)" if found is None
                else f"{found.capacity_rps_at_slo} requests/s ({found.source})"))  # fmt: skip
        return replay
    for run_dir, run_id, measured in zip(replay.run_dirs, replay.run_ids, measured_runs, strict=True):
        if measured.capacity is None:
            continue
        write_capacity_json(Path(run_dir), measured.capacity)
        context.log.info(
            f"run {run_id}: capacity at SLO {measured.capacity.capacity_rps_at_slo} requests/s (this window at "
            f"speedup 1: {measured.capacity.offered_rps:.3g}); {len(measured.capacity.probes)} probes, "
            f"{measured.capacity.cpu_s:.1f} s CPU"
        )
    if reference is not None:
        for run_dir in replay.run_dirs:
            write_routing_reference_json(Path(run_dir) / ROUTING_REFERENCE_FILE, reference)
        context.log.info(
            f"routing reference on {reference.requests} requests: one replica "
            f"{reference.single_replica_hit_rate:.3f}, {reference.replicas} x {reference.policy} "
            f"{reference.fleet_model_hit_rate:.3f} ({reference.cpu_s:.1f} s CPU)"
        )
    if plan is not None:
        for run_dir in replay.run_dirs:
            write_fleet_plans_json(Path(run_dir), plan)
        chosen = plan.chosen
        context.log.info(
            f"fleet plan for {scenario.target_rps:g} requests/s: "
            + ("no shape tried held it" if chosen is None else chosen.label)
            + f" ({len(plan.shapes)} shapes, {plan.probes} replays, {plan.cpu_s:.1f} s CPU)"
        )
    return replay


def _capacity_inputs(
    part: PartitionContext, workload: Workload, traffic: WeekTraffic, warehouse: WarehouseResource, run_id: str
) -> CapacityInputs:
    return CapacityInputs(
        endpoint=part.endpoint,
        run_endpoint=varied_spec(part.endpoint, part.scenario, run_id),
        window=workload.window(traffic.start_s, traffic.duration_s),
        slo=(part.scenario.slo_ttft_ms, part.scenario.slo_tpot_ms),
        target_rps=part.scenario.target_rps,
        speedup=part.scenario.speedup,
        # Each measured once per (requests, flags, SLO, fleet shape): a canary's fixed window only when its
        # configuration changes.
        cache_dir=capacity_cache_dir(warehouse.root_path()),
        plan_disaggregated=part.scenario.plan_disaggregated,
        plan_ep_widths=part.scenario.plan_ep_widths,
    )


def build_replay_asset(partitions: dg.PartitionsDefinition) -> dg.AssetsDefinition:
    @dg.graph_asset(
        partitions_def=partitions,
        group_name="replay",
        kinds={"sglang"},
        description="Provisions the scenario's endpoint, replays the workload open-loop (in shards sharing "
        "one t0), probes the server, tears the endpoint down.",
    )
    def replay_run(workload: Workload) -> ReplayOutput:
        tasks = start_endpoint.with_hooks({stop_endpoint_on_failure})(workload_ready=workload)
        shard_dirs = tasks.map(lambda task: replay_shard.with_hooks({stop_endpoint_on_failure})(workload, task))
        replayed = finish_replay.with_hooks({stop_endpoint_on_failure})(shard_dirs.collect())
        return measure_capacity(workload, replayed)

    return replay_run
