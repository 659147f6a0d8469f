"""A scenario's replay settings: replay_config_for maps each scenario field the replayer takes, and the week's
window of the trace (not the scenario's start_s), for every shard."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import yaml

from replay.clients.client_registry import Backend
from replay.replay_config import ReplayConfig
from replay.scenario_config import SHARD_RENDEZVOUS_TIMEOUT_S, replay_config_for
from workloads.scenarios import load_scenarios
from workloads.weekly_traffic import week_traffic

REPO = Path(__file__).resolve().parents[2]
AZURE = REPO / "workloads" / "traces" / "azure_conv_2023.csv"


def test_a_scenario_shard_replays_the_weeks_window_with_the_scenarios_settings(tmp_path):
    path = tmp_path / "scenarios.yaml"
    entry = {
        "name": "chat", "trace": str(AZURE), "format": "azure", "weekly_window": {"start_s": 0, "step_s": 900},
        "duration_s": 600, "speedup": 0.5, "endpoint": "e", "slo": {"ttft_ms": 1000, "tpot_ms": 100},
        "backend": "openai-chat", "warmup_s": 30, "max_concurrency": 64, "require_reasoning": True,
    }  # fmt: skip
    path.write_text(yaml.safe_dump({"scenarios": [entry]}))
    scenario = load_scenarios(path, tmp_path)["chat"]
    traffic = week_traffic(scenario, date(2026, 11, 16), tmp_path / "cache")
    assert traffic.start_s != scenario.start_s  # a weekly window: this week's start, not week 0's

    config = replay_config_for(
        scenario, traffic, url="http://127.0.0.1:30000/", api_key_env="SGLANG_API_KEY", run_id="r",
        shard_index=1, shard_count=2, rendezvous_dir=str(tmp_path / "rendezvous"),
    )  # fmt: skip
    assert config == ReplayConfig(
        url="http://127.0.0.1:30000",
        backend=Backend.OPENAI_CHAT,
        speedup=0.5,
        start_s=traffic.start_s,
        duration_s=600.0,
        api_key_env="SGLANG_API_KEY",
        run_id="r",
        warmup_s=30.0,
        max_concurrency=64,
        shard_index=1,
        shard_count=2,
        rendezvous_dir=str(tmp_path / "rendezvous"),
        rendezvous_timeout_s=SHARD_RENDEZVOUS_TIMEOUT_S,
        require_reasoning=True,
    )
    # One shard by default, starting when ready; what a scenario does not set keeps the replayer's defaults.
    alone = replay_config_for(scenario, traffic, url="http://h:1", api_key_env=None, run_id="r")
    defaults = ReplayConfig(url="http://h:1")
    assert (alone.shard_index, alone.shard_count, alone.rendezvous_dir, alone.api_key_env) == (0, 1, None, None)
    kept = ("request_timeout_s", "seed", "lag_degraded_ms", "flush_interval_s", "max_requests", "start_at_epoch_s",
            "arrival_process", "model")  # fmt: skip
    assert {n: getattr(alone, n) for n in kept} == {n: getattr(defaults, n) for n in kept}
