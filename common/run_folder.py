"""A run's folder: where it lies under the data directory, and the name of everything it holds.

The one owner of these names: the replay, the endpoints, the capacity measurements, the warehouse and the
assets all take them from here. docs/endpoints.md ("What a run's folder holds") has the table of who writes
and who reads each; tests/common/test_run_folder.py keeps that table and these names equal. A `{}` in a name
is filled with `.format` (an endpoint's name, a shard or worker index).
"""

from __future__ import annotations

from pathlib import Path

# The replay (replay/): records and summary, written by each shard and merged into the run folder.
RUN_FILE = "run.json"  # replay/recording/run_json.py: the run's RunInfo (window, settings, counts, server_info)
REQUESTS_FILE = "requests.parquet"  # replay/recording/part_sink.py, shard_merge.py: one row per request
REQUESTS_PARTS_DIR = "requests.parts"  # replay/recording/part_sink.py: a part file per flushed batch until merged
SHARD_DIR = "shard-{}"  # assets/replay_asset.py: shard k's own replay folder (its run.json, requests), merged
RENDEZVOUS_DIR = "rendezvous"  # assets/replay_asset.py: where a sharded run's shards agree on their t0
READY_FILE = "shard-{}.ready"  # replay/schedule/rendezvous.py, in RENDEZVOUS_DIR: shard k has its prompts ready

# The endpoint (endpoints/): what the server said about itself, its logs and the probes' samples.
SERVER_FACTS_FILE = "server_facts.json"  # endpoints/provision.py: server_info, model_info, fingerprint, command
SERVER_LOG_FILE = "{}.server.log"  # endpoints/provision.py, virtual_twin.py: the endpoint's (router's) log
WORKER_LOG_FILE = "{}.worker-{}.server.log"  # endpoints/provision.py, virtual_twin.py: a fleet worker's log
SERVER_SAMPLES_FILE = "server_samples.parquet"  # endpoints/probes/probe_session.py: /metrics, scrape by scrape
GPU_SAMPLES_FILE = "gpu_samples.parquet"  # endpoints/probes/probe_session.py: per-GPU NVML/DCGM/twin samples
PROBES_SUMMARY_FILE = "probes.json"  # endpoints/probes/probe_session.py: scrapes, failures and their reasons

# The capacity measurements (endpoints/capacity/, after the replay or beside a twin's).
CAPACITY_FILE = "capacity.json"  # endpoints/capacity/slo_capacity.py: the rate sustained inside the SLO
CAPACITY_INPUTS_FILE = "capacity_inputs.pickle"  # endpoints/capacity/capacity_alongside.py: the child's inputs
CAPACITY_LOG_FILE = "capacity_alongside.log"  # endpoints/capacity/capacity_alongside.py: the child's output
ROUTING_REFERENCE_FILE = "routing_reference.json"  # endpoints/capacity/routing_reference.py: one replica vs fleet
FLEET_PLANS_FILE = "fleet_plans.json"  # endpoints/capacity/fleet_plan.py: the fleet plan for the target_rps
SHADOW_CANARY_FILE = "shadow_canary.json"  # endpoints/capacity/shadow_canary.py: a real run vs its twin's replay
SHADOW_REPLAY_DIR = "shadow_canary"  # assets/shadow_replay.py, in the week's first run folder: the twin's replay
CAPACITY_RAMP_DIR = "capacity_ramp"  # replay/capacity_ramp.py, in the week's last run folder: a replay per step


def _runs_root(data_dir: Path) -> Path:
    return Path(data_dir) / "runs"


def run_dir(data_dir: Path, week: str, scenario: str, run_id: str) -> Path:
    """A run's folder under the data directory (the warehouse root): by week (its Monday), scenario, run id."""
    return _runs_root(data_dir) / f"week={week}" / f"scenario={scenario}" / run_id


def leases_dir(data_dir: Path) -> Path:
    """The leases of endpoints started by runs (endpoints/lease_file.py), beside the week folders."""
    return _runs_root(data_dir) / "leases"


def capacity_cache_dir(data_dir: Path) -> Path:
    """Capacity sweeps and fleet plans kept by their inputs' hash (endpoints/capacity/), beside the week folders."""
    return _runs_root(data_dir) / "capacity_cache"
