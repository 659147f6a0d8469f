"""A scenario's replay as a ReplayConfig: the one mapping from a scenario (workloads/scenarios.py) and the
week's window of its trace to the replayer's settings, for every shard the weekly job replays."""

from __future__ import annotations

from replay.clients.client_registry import Backend
from replay.replay_config import ReplayConfig
from workloads.scenarios import Scenario
from workloads.weekly_traffic import WeekTraffic

# How long the first ready shard waits for the others (a scenario's shards are steps, maybe pods, and a pod may
# have to be scheduled first).
SHARD_RENDEZVOUS_TIMEOUT_S = 600.0


def replay_config_for(
    scenario: Scenario,
    traffic: WeekTraffic,
    *,
    url: str,
    api_key_env: str | None,
    run_id: str,
    shard_index: int = 0,
    shard_count: int = 1,
    rendezvous_dir: str | None = None,
    rendezvous_run_id: str | None = None,
    rendezvous_attempt: int = 0,
) -> ReplayConfig:
    """How shard `shard_index` of `shard_count` replays `scenario` at `url`.

    The window is the week's (`traffic`), not the scenario's `start_s`: a weekly window moves it on every week.
    `rendezvous_run_id` and `rendezvous_attempt` say whose ready files count at the rendezvous (the Dagster run
    and the step's retry), so a re-executed run or a retried step never counts a ready file an earlier one left.
    What the scenario does not set (request timeout, seed, flush cadence) keeps ReplayConfig's defaults.
    """
    return ReplayConfig(
        url=url,
        backend=Backend(scenario.backend),  # one of Backend's values: scenarios.yaml is checked against them
        speedup=scenario.speedup,
        start_s=traffic.start_s,
        duration_s=traffic.duration_s,
        api_key_env=api_key_env,
        run_id=run_id,
        warmup_s=scenario.warmup_s,
        max_concurrency=scenario.max_concurrency,
        shard_index=shard_index,
        shard_count=shard_count,
        rendezvous_dir=rendezvous_dir,
        rendezvous_timeout_s=SHARD_RENDEZVOUS_TIMEOUT_S,
        rendezvous_run_id=rendezvous_run_id,
        rendezvous_attempt=rendezvous_attempt,
        require_reasoning=scenario.require_reasoning,
    )
