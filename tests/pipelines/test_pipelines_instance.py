"""The weekly job as users' runs really run: submitted to a fresh instance under the shipped dagster.yaml,
dequeued by `dagster-daemon`'s queued run coordinator, started by the run launcher and executed by the
job's own executor (pipelines/weekly_executor.py), never by execute_in_process.

- a schedule tick: every run request it yields succeeds;
- a two-week backfill of one scenario: both weeks land, one replay at a time on the endpoint (a twin process);
- a run terminated mid-replay, and a run whose run worker is killed: the lease sensor stops the twin;
- a fleet in real time: two twins behind the real smg router, its run scraped per worker and router, every
  request naming its worker, and nothing of it left running;
- no secret on disk: one endpoint is attached to a server that answers /server_info as SGLang does,
  echoing its api_key; nothing the runs leave (event log, compute logs, daemon log, lake, DuckDB, run
  folders) holds the key.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import dagster as dg
import pyarrow.parquet as pq
import pytest
import yaml
from test_pipelines_run_command import VIRTUAL_WINDOW_S

from assets.resources import ENDPOINTS_ENV, SCENARIOS_ENV, WAREHOUSE_ENV
from code_server import served_code
from endpoints.lease_file import read_leases
from endpoints.process_group import group_alive
from pipelines.definitions import WEEKLY_JOB, defs
from pipelines.instance.instance_runs import (
    BACKFILL_TAG,
    InstancePaths,
    check_evaluations,
    running_daemon,
    submit_backfill,
    submit_run,
    unsuccessful,
    wait_for_runs,
)
from pipelines.schedules import ENDPOINT_TAG, REPLAY_SLOT_TAG
from replay_sglang_peer import PeerBehaviour, peer_in_thread
from stored_text import decoded_text
from warehouse.backends.store import Warehouse
from warehouse.marts.dbt_build import manifest_path

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 420.0  # for a run to reach a stage (its lease, its replay)
# Runs are waited for as long as they progress: given up on only when none started or finished for this long (on a
# loaded 2-core CI machine the schedule tick's runs took over 300 s in all, 2026-12-07).
STALL_S = 300.0
pytestmark = pytest.mark.timeout(1200)  # the schedule tick's test waits for every bundled scenario's runs
STOP_BOUND_S = 60.0  # the lease sensor ticks every 10 s; the daemon may take a few more to evaluate it
KEY_ENV = "COSTBENCH_TEST_ATTACH_KEY"
ATTACHED = "v3-8xh200-chat"  # the endpoint of chat-v3-h200 (and its canary), attached to the SGLang-like server
TWIN_SCENARIO = "reasoning-r1-h200-canary"  # on the twin: r1-8xh200, behind a 2,048-token system prompt
TWIN_ENDPOINT = "r1-8xh200"  # here a twin in real time, its own process (the lease tests stop it)
VIRTUAL_SCENARIO = "reasoning-r1-h200-prompt-json"  # on r1-8xh200-b, a twin on a virtual clock as bundled
# Only in this instance's files (not a bundled partition): the chat canary's seconds through the real smg router in
# front of two twin processes, in real time.
FLEET_SCENARIO = "chat-v3-h200-real-router"
FLEET_ENDPOINT = "v3-2x8xh200-smg"
FLEET_TARGET_RPS = 12.0
# Only in this instance's files too: the chat canary's seconds on v3-8xh200, a twin in real time in its own process
# (short answers: a run's replay takes its window, where the R1 canary's reasoning keeps its twin busy three times
# that), for the backfill, whose two runs go one after the other.
BACKFILL_SCENARIO = "chat-v3-h200-twin"
BACKFILL_ENDPOINT = "v3-8xh200"
# The schedule lag p99 runs_quality allows the real-time replays here (the default is 100 ms): a second, a sixth of
# the shortest window. They share two cores with the daemon, code servers, twins, the router and the other pytest
# workers, so their lag is this machine's load, not what this file tests (the rule itself:
# tests/warehouse/test_warehouse_quality.py).
LAG_BOUND_MS = 1000.0
SECRET = f"sk-{secrets.token_hex(16)}"
ADMIN_SECRET = f"adm-{secrets.token_hex(16)}"


def _sglang_server_info() -> dict:
    """/server_info as SGLang releases have served it: ServerArgs with api_key and admin_api_key in them."""
    return {
        "model_path": "deepseek-ai/DeepSeek-V3", "served_model_name": "deepseek-ai/DeepSeek-V3", "tp_size": 8,
        "api_key": SECRET, "admin_api_key": ADMIN_SECRET, "schedule_policy": "lpm", "max_running_requests": 64,
        "enable_cache_report": True, "enable_metrics": True, "version": "0.5.4",
        "scheduler_info": {"max_total_num_tokens": 400000},
    }  # fmt: skip


def _short_scenarios(path: Path) -> Path:
    """The bundled scenarios (same names, so the same partitions) with windows of seconds, as they came: the
    chat ones replay in real time against the attached server, the twin's ones against a twin process."""
    raw = yaml.safe_load((REPO / "workloads" / "scenarios.yaml").read_text())
    for entry in raw["scenarios"]:
        entry.update(duration_s=6, speedup=1.0, max_schedule_lag_p99_ms=LAG_BOUND_MS)
        if entry["name"] == VIRTUAL_SCENARIO:
            entry["duration_s"] = VIRTUAL_WINDOW_S  # not fewer seconds: see test_pipelines_run_command
            del entry["max_schedule_lag_p99_ms"]  # on the virtual clock: no lag but the engine's
        if entry["name"] == TWIN_SCENARIO:
            # Once a week: the lease tests queue and stop its twin; a canary's repeats are the
            # attached chat canary's (in real time) and the virtual canary's here.
            entry["repeats"] = 1
    [canary] = [entry for entry in raw["scenarios"] if entry["name"] == "chat-v3-h200-canary"]
    # 20 s of the canary's stretch (~150 requests) in real time through the fleet, once (the routing is what is
    # tested here, not the week's repeats), and a target to plan the fleet for
    raw["scenarios"].append({**canary, "name": FLEET_SCENARIO, "endpoint": FLEET_ENDPOINT, "duration_s": 20,
                             "repeats": 1, "target_rps": FLEET_TARGET_RPS})  # fmt: skip
    raw["scenarios"].append({**canary, "name": BACKFILL_SCENARIO, "endpoint": BACKFILL_ENDPOINT, "repeats": 1})
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _endpoints_with_attached(path: Path, url: str) -> Path:
    raw = yaml.safe_load((REPO / "workloads" / "endpoints.yaml").read_text())
    for entry in raw["endpoints"]:
        if entry["name"] == TWIN_ENDPOINT:
            entry.pop("clock")  # a twin process in real time
        if entry["name"] == ATTACHED:
            entry.clear()
            entry.update(name=ATTACHED, mode="attach", model="deepseek-ai/DeepSeek-V3", url=url, api_key_env=KEY_ENV,
                         gpu_type="H200", gpu_count=8, usd_per_gpu_hour=3.5)  # fmt: skip
    raw["endpoints"].append({
        "name": FLEET_ENDPOINT, "mode": "sim", "model": "deepseek-ai/DeepSeek-V3", "replicas": 2,
        "server_args": ["--tp", "8", "--schedule-policy", "lpm", "--sim-hardware", "h200", "--sim-warmup-s", "0"],
        "router": {"policy": "round_robin"}, "gpu_type": "H200", "gpu_count": 16, "usd_per_gpu_hour": 3.5,
    })  # fmt: skip
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def instance_paths(tmp_path_factory):
    """A fresh DAGSTER_HOME with the shipped dagster.yaml and its daemon, a fresh warehouse."""
    root = tmp_path_factory.mktemp("instance")
    home = root / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "dagster.yaml", home / "dagster.yaml")
    previous = os.environ.get("DAGSTER_HOME")
    os.environ["DAGSTER_HOME"] = str(home)
    previous_endpoints = os.environ.get(ENDPOINTS_ENV)
    with peer_in_thread(PeerBehaviour(server_info=_sglang_server_info())) as peer:
        endpoints = _endpoints_with_attached(root / "endpoints.yaml", peer.url)
        scenarios = _short_scenarios(root / "scenarios.yaml")
        env = {WAREHOUSE_ENV: str(root / "warehouse"), ENDPOINTS_ENV: str(endpoints), SCENARIOS_ENV: str(scenarios),
               KEY_ENV: SECRET}  # fmt: skip
        # This process's definitions tag the runs it submits: they read the same endpoints file.
        os.environ[ENDPOINTS_ENV] = str(endpoints)
        paths = InstancePaths(home, workspace=root / "workspace.yaml", env=env)
        with dg.DagsterInstance.get() as fresh:  # its tables made before the daemon's threads race to
            fresh.get_runs(limit=1)
            fresh.fetch_materializations(dg.AssetKey("weekly_report"), limit=1)
            fresh.all_instigator_state()
        # The shipped workspace's code (its module, from the repository), served once for the daemon, the run
        # launcher and the dozen submitting commands (the shipped workspace file itself: test_pipelines_run_command,
        # test_pipelines_demo_signals, test_pipelines_dagster_dev).
        [location] = yaml.safe_load((REPO / "workspace.yaml").read_text())["load_from"]
        module = location["python_module"]
        target = ["--module-name", module["module_name"], "--attribute", module["attribute"]]
        with served_code(paths, [*target, "--working-directory", str(REPO)], module["module_name"], RUN_TIMEOUT_S):
            with running_daemon(paths):
                yield paths
    for name, value in (("DAGSTER_HOME", previous), (ENDPOINTS_ENV, previous_endpoints)):
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture()
def instance(instance_paths):
    with dg.DagsterInstance.get() as instance:
        yield instance


def _warehouse(paths: InstancePaths) -> Path:
    return Path(paths.env[WAREHOUSE_ENV])


def _partition_tags(key: dg.MultiPartitionKey) -> dict[str, str]:
    dims = key.keys_by_dimension
    return {"dagster/partition": str(key), **{f"dagster/partition/{d}": v for d, v in dims.items()}}


def _wait_for(predicate, timeout_s: float, what: str) -> float:
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"{what}: not within {timeout_s:.0f} s")
        time.sleep(0.5)
    return time.monotonic() - started


def test_a_schedule_tick_runs_every_bundled_scenario_through_the_run_queue(instance_paths, instance):
    schedule = defs.resolve_schedule_def(f"{WEEKLY_JOB}_schedule")
    tick = datetime(2026, 11, 23, 6, tzinfo=timezone.utc)  # a Monday 06:00: replays the week of 11-16
    context = dg.build_schedule_context(
        instance=instance, scheduled_execution_time=tick, repository_def=defs.get_repository_def()
    )
    requests = schedule.evaluate_tick(context).run_requests
    scenarios = set(
        defs.resolve_job_def(WEEKLY_JOB)
        .partitions_def.get_partitions_def_for_dimension("scenario")
        .get_partition_keys()
    )
    assert {r.partition_key.keys_by_dimension["scenario"] for r in requests} == scenarios

    run_ids = [
        submit_run(instance_paths, WEEKLY_JOB, {**r.tags, **_partition_tags(r.partition_key)}, str(uuid.uuid4()))
        for r in requests
    ]
    runs = wait_for_runs(instance, dg.RunsFilter(run_ids=run_ids), len(run_ids), None, stall_s=STALL_S)
    failed = unsuccessful(instance, runs)
    assert not failed, f"runs that did not succeed: {failed}; see {instance_paths.dagster_home / 'daemon.log'}"
    # Carried out by the run launcher in a run worker of its own, steps by the job's executor: a one-shard
    # scenario's in that run worker (pipelines/weekly_executor.py; shards: tests/pipelines/test_pipelines_shards.py).
    for run in runs:
        [worker] = {e.dagster_event.pid for e in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.RUN_START)}
        step_pids = {e.dagster_event.pid for e in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_START)}
        assert step_pids == {worker} and worker != os.getpid()
    manifest = json.loads(manifest_path().read_text())
    dbt_tests = {node["name"] for node in manifest["nodes"].values() if node["resource_type"] == "test"}
    assert len(dbt_tests) >= 8
    for run in runs:  # every check ran, and the blocking ones passed
        checks = {e.check_name: e for e in check_evaluations(instance, run)}
        assert set(checks) == {
            "requests_quality",
            "runs_quality",
            "fleet_intact",
            "lake_intact",
            "cost_regression",
            "structured_output",
            *dbt_tests,  # the marts' dbt data tests, each an asset check of the model it tests
        }
        assert checks["requests_quality"].passed and checks["runs_quality"].passed and checks["lake_intact"].passed
        assert checks["fleet_intact"].passed and all(checks[name].passed for name in dbt_tests)
    # Each run's refresh computed its partition's week (the first, of a new warehouse, every week) and kept the rest.
    rebuilt = []
    for run in runs:
        for event in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION):
            materialization = event.dagster_event.event_specific_data.materialization
            if materialization.asset_key == dg.AssetKey("weekly_trends"):
                rebuilt.append(materialization.metadata["rebuilt_weeks"].value)
    assert len(rebuilt) == len(runs) and set(rebuilt) <= {"every week", "2026-11-16"} and "2026-11-16" in rebuilt
    warehouse = _warehouse(instance_paths)
    with Warehouse(warehouse).connect() as con:  # read-only, with the lake's search path
        weeks = con.execute("SELECT scenario, week_start, completed_requests FROM weekly_trends").fetchall()
        cost, hit_rate, completed = con.execute(
            "SELECT realised_cost_per_request_usd, prefix_cache_hit_rate, completed_requests FROM weekly_trends "
            "WHERE scenario = ? AND week_start = DATE '2026-11-16'",
            [TWIN_SCENARIO],
        ).fetchone()
        # The week's cost is its runs' windows over their requests (one run here: repeats 1).
        run_count, window_s = con.execute(
            "SELECT count(*), sum(window_s) FROM runs WHERE scenario = ?", [TWIN_SCENARIO]
        ).fetchone()
        repeats = dict(con.execute("SELECT scenario, count(*) FROM runs GROUP BY scenario").fetchall())
    assert {(s, str(w)) for s, w, _ in weeks} >= {(s, "2026-11-16") for s in scenarios}
    assert all(n > 0 for _, _, n in weeks)
    # The twin's scenario by hand from the lake: every request ok with the server's own usage, and
    # docs/warehouse.md's cost: gpu_count x usd_per_gpu_hour x window_s / 3600 / completed.
    lake = pq.read_table(
        warehouse / f"lake/requests/week=2026-11-16/scenario={TWIN_SCENARIO}/part-0.parquet"
    ).to_pandas()
    assert (lake["status"] == "ok").all() and (lake["completion_tokens"] == lake["output_tokens"]).all()
    assert completed == int((~lake["is_warmup"]).sum()) and run_count == 1
    # Canaries replay twice a week, on an attached server in real time and on a virtual twin alike.
    assert repeats["chat-v3-h200-canary"] == repeats[VIRTUAL_SCENARIO] == 2 and repeats["chat-v3-h200"] == 1
    assert cost == pytest.approx(8 * 3.5 * window_s / 3600 / completed)
    assert hit_rate > 0.3  # the 2,048-token system prompt is shared by every request
    assert read_leases(warehouse / "runs" / "leases") == []  # every endpoint stopped
    # The twin on a virtual clock went the same way (run launcher, executor), served in its run's own process.
    with Warehouse(warehouse).connect() as con:
        clocks = dict(
            con.execute("SELECT scenario, replay_clock FROM runs WHERE week_start = DATE '2026-11-16'").fetchall()
        )
    assert clocks[VIRTUAL_SCENARIO] == "virtual" and clocks[TWIN_SCENARIO] == "wall"
    # The virtual canary's two runs each have an efficiency cost from a sweep of the twin as it ran (their seeds: two
    # capacities). The attached entry gives no flags, as docs/endpoints.md's attach example: its shadow twin takes
    # them from what the server's /server_info said (tp_size 8, lpm, 64 running), so the run has a modelled capacity
    # (without them it would be built at TP1, where DeepSeek-V3's weights do not fit).
    with Warehouse(warehouse).connect() as con:
        capacities = con.execute(
            "SELECT scenario, capacity_source, capacity_rps_at_slo, efficiency_cost_per_request_usd FROM run_summary "
            "WHERE week_start = DATE '2026-11-16'"
        ).fetchall()
    virtual = [(source, rps) for scenario, source, rps, _ in capacities if scenario == VIRTUAL_SCENARIO]
    assert {source for source, _ in virtual} == {"twin_sweep"} and len({rps for _, rps in virtual}) == 2
    attached = [(source, usd) for scenario, source, _, usd in capacities if scenario == "chat-v3-h200-canary"]
    assert attached and all(source == "shadow_twin" and usd > 0 for source, usd in attached)
    assert all(usd > 0 for scenario, source, _, usd in capacities if source == "twin_sweep")
    slots = {r.tags["dagster/partition/scenario"]: r.tags.get(REPLAY_SLOT_TAG) for r in runs}
    assert slots[VIRTUAL_SCENARIO] is None and slots[TWIN_SCENARIO] == TWIN_ENDPOINT


def test_a_two_week_backfill_is_carried_out_one_replay_at_a_time_per_endpoint(instance_paths, instance):
    scenario = BACKFILL_SCENARIO
    keys = [str(dg.MultiPartitionKey({"week": w, "scenario": scenario})) for w in ("2026-11-02", "2026-11-09")]
    backfill = submit_backfill(instance_paths, WEEKLY_JOB, keys)
    runs = wait_for_runs(instance, dg.RunsFilter(tags={BACKFILL_TAG: backfill}), 2, None, stall_s=STALL_S)
    assert len(runs) == 2 and not unsuccessful(instance, runs), unsuccessful(instance, runs)
    assert sorted(r.tags["dagster/partition"] for r in runs) == sorted(keys)
    # The job gives a backfill's runs their endpoint's tag, so the queue ran them one after the other.
    assert {(r.tags[ENDPOINT_TAG], r.tags[REPLAY_SLOT_TAG]) for r in runs} == {(BACKFILL_ENDPOINT, BACKFILL_ENDPOINT)}
    first, second = sorted((instance.get_run_record_by_id(r.run_id) for r in runs), key=lambda rec: rec.start_time)
    assert second.start_time >= first.end_time
    with Warehouse(_warehouse(instance_paths)).connect() as con:
        weeks = con.execute("SELECT week_start FROM weekly_trends WHERE scenario = ?", [scenario]).fetchall()
    assert {"2026-11-02", "2026-11-09"} <= {str(w) for (w,) in weeks}


def _start_and_wait_for_replay(instance_paths, instance, week: str):
    key = dg.MultiPartitionKey({"week": week, "scenario": TWIN_SCENARIO})
    run_id = submit_run(
        instance_paths, WEEKLY_JOB, {ENDPOINT_TAG: TWIN_ENDPOINT, **_partition_tags(key)}, str(uuid.uuid4())
    )
    leases = _warehouse(instance_paths) / "runs" / "leases"
    _wait_for(lambda: any(lease.owner_run_id == run_id for lease in read_leases(leases)), RUN_TIMEOUT_S, "the lease")
    [lease] = [lease for lease in read_leases(leases) if lease.owner_run_id == run_id]
    assert lease.process_group is not None and group_alive(lease.process_group)
    _wait_for(
        lambda: any((_warehouse(instance_paths) / "runs").glob(f"week={week}/scenario=*/*/shard-0/run.json")),
        RUN_TIMEOUT_S, "the replay's start",
    )  # fmt: skip
    return run_id, lease, leases


def test_a_run_terminated_mid_replay_leaves_no_server_running(instance_paths, instance):
    run_id, lease, leases = _start_and_wait_for_replay(instance_paths, instance, "2026-10-26")
    # What the UI's Terminate button does: the run coordinator cancels the run.
    instance.run_coordinator.cancel_run(run_id)
    _wait_for(lambda: not group_alive(lease.process_group), STOP_BOUND_S, "the twin's process group to stop")
    _wait_for(lambda: not (leases / f"{run_id}.json").exists(), STOP_BOUND_S, "the lease file to go")
    _wait_for(lambda: instance.get_run_by_id(run_id).is_finished, STOP_BOUND_S, "the run to end")
    assert instance.get_run_by_id(run_id).status is not dg.DagsterRunStatus.SUCCESS


def test_a_run_whose_run_worker_is_killed_leaves_no_server_running(instance_paths, instance):
    run_id, lease, leases = _start_and_wait_for_replay(instance_paths, instance, "2026-10-19")
    os.kill(lease.owner_pid, signal.SIGKILL)  # the run worker: nothing of the run can clean up now
    _wait_for(lambda: not group_alive(lease.process_group), STOP_BOUND_S, "the twin's process group to stop")
    # end_lease removes the file only once the group is gone, so the file outlives the group by a moment.
    _wait_for(lambda: not (leases / f"{run_id}.json").exists(), STOP_BOUND_S, "the lease file to go")
    # The sensor also marks the run failed, so nothing waits on it and the failure notice goes out.
    _wait_for(
        lambda: instance.get_run_by_id(run_id).status is dg.DagsterRunStatus.FAILURE, STOP_BOUND_S, "the run failed"
    )


def test_a_fleet_behind_the_real_router_runs_the_weekly_job_and_leaves_nothing(instance_paths, instance):
    key = dg.MultiPartitionKey({"week": "2026-11-16", "scenario": FLEET_SCENARIO})
    run_id = submit_run(
        instance_paths, WEEKLY_JOB, {ENDPOINT_TAG: FLEET_ENDPOINT, **_partition_tags(key)}, str(uuid.uuid4())
    )
    leases = _warehouse(instance_paths) / "runs" / "leases"
    groups: list[int] = []

    def leased() -> bool:
        groups.extend(x.process_group for x in read_leases(leases) if x.owner_run_id == run_id and x.process_group)
        return bool(groups) or instance.get_run_by_id(run_id).is_finished

    _wait_for(leased, RUN_TIMEOUT_S, "the fleet's lease")
    runs = wait_for_runs(instance, dg.RunsFilter(run_ids=[run_id]), 1, None, stall_s=STALL_S)
    assert not unsuccessful(instance, runs), unsuccessful(instance, runs)
    # Every twin and the router were in the one leased group, and it is gone with the lease.
    assert groups and not group_alive(groups[0])
    assert not [x for x in read_leases(leases) if x.owner_run_id == run_id]
    with Warehouse(_warehouse(instance_paths)).connect() as con:
        served = con.execute(
            "SELECT worker, count(*) FROM requests WHERE scenario = ? AND NOT is_warmup GROUP BY worker",
            [FLEET_SCENARIO],
        ).fetchall()
        roles = dict(
            con.execute(
                "SELECT role, count(DISTINCT worker) FROM server_samples WHERE scenario = ? GROUP BY role",
                [FLEET_SCENARIO],
            ).fetchall()
        )
    # smg named a worker for every request (x-smg-routed-worker-id), both workers served some
    assert len(served) == 2 and all(worker is not None and n > 0 for worker, n in served), served
    assert set(roles) == {"router", "worker"} and roles["worker"] == 2 and roles["router"] == 2, roles
    # The run's measure_capacity step planned the fleet for the target; the refresh priced it and sized on it.
    store = Warehouse(_warehouse(instance_paths))
    plans = [p for p in store.fleet_plans() if p.scenario == FLEET_SCENARIO and p.run_price]
    [chosen] = [p for p in plans if p.chosen]
    assert {p.router_policy for p in plans} == {"cache_aware", "round_robin"} and chosen.holds_target
    assert chosen.target_rps == FLEET_TARGET_RPS and chosen.gpus == 8 * chosen.replicas
    assert (
        any(
            p.replicas == chosen.replicas - 1 and not p.holds_target
            for p in plans
            if p.router_policy == chosen.router_policy
        )
        or chosen.replicas == 1
    )
    [summary] = [r for r in store.run_summary() if r.scenario == FLEET_SCENARIO]
    assert (summary.replicas_for_target, summary.replicas_for_target_source) == (chosen.replicas, "fleet_plan")
    # It measured the routing reference too, and the diagnosis judged routing on it.
    [diagnosis] = [d for d in store.diagnoses() if d.scenario == FLEET_SCENARIO]
    assert 0 < diagnosis.single_replica_hit_rate <= 1 and 0 < diagnosis.fleet_model_hit_rate <= 1
    routing_lost = diagnosis.single_replica_hit_rate - diagnosis.fleet_model_hit_rate
    assert ("routing" in json.loads(diagnosis.levers)) == (routing_lost >= 0.2)


def _stored_bytes(path: Path) -> bytes:
    # The daemon keeps running: SQLite's -wal and -shm files come and go as its sensors tick (what a WAL held
    # is then in its database file, which is searched too).
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


def test_no_secret_in_anything_the_runs_left(instance_paths, instance):
    # After the schedule tick's runs: chat-v3-h200 replayed against the attached SGLang-like server.
    attached = [r for r in instance.get_runs() if r.tags.get(ENDPOINT_TAG) == ATTACHED]
    if not attached:  # this test run alone
        key = dg.MultiPartitionKey({"week": "2026-11-16", "scenario": "chat-v3-h200"})
        run_id = submit_run(
            instance_paths, WEEKLY_JOB, {ENDPOINT_TAG: ATTACHED, **_partition_tags(key)}, str(uuid.uuid4())
        )
        attached = wait_for_runs(instance, dg.RunsFilter(run_ids=[run_id]), 1, None, stall_s=STALL_S)
    assert not unsuccessful(instance, attached), unsuccessful(instance, attached)
    roots = [Path(instance_paths.dagster_home), _warehouse(instance_paths)]
    files = [p for root in roots for p in root.rglob("*") if p.is_file()]
    assert any(p.name == "server_facts.json" for p in files) and any(p.suffix == ".db" for p in files)
    leaked = [
        str(p) for p in files
        for secret in (SECRET, ADMIN_SECRET)
        if secret.encode() in _stored_bytes(p) or secret in decoded_text(p)
    ]  # fmt: skip
    assert not leaked, f"the API key is stored in {leaked}"
    # The search sees stored server facts: the facts costbench reads are there, the key's field is not kept at all.
    facts = next(p for p in files if p.name == "server_facts.json" and "scenario=chat-v3-h200" in str(p))
    assert b"max_running_requests" in facts.read_bytes() and b"api_key" not in facts.read_bytes()
