"""The replay steps get the endpoint's advertised URL: a twin bound on 127.0.0.1 and advertised as
http://localhost:<port> is replayed at that URL by the replay_shard step, and the run's facts say so."""

from __future__ import annotations

import json
import urllib.request

import dagster as dg
import pytest
import yaml

from endpoints.provision import free_port
from pipelines.definitions import WEEKLY_JOB, build_definitions
from replay.recording.run_json import read_run_json

pytestmark = pytest.mark.filterwarnings("ignore:Specifying a partitions_def on an AssetCheckSpec")


@pytest.mark.timeout(180)
def test_replay_shard_dials_the_advertised_url(tmp_path):
    port = free_port()
    advertised = f"http://localhost:{port}"
    endpoints = tmp_path / "endpoints.yaml"
    endpoints.write_text(yaml.safe_dump({"endpoints": [{
        "name": "twin", "mode": "sim", "model": "deepseek-ai/DeepSeek-V3",
        "server_args": ["--tp", "8", "--sim-hardware", "h200", "--sim-warmup-s", "0"],
        "gpu_type": "H200", "gpu_count": 8, "usd_per_gpu_hour": 3.5,
        "host": "127.0.0.1", "port": port, "advertise_url": advertised,
    }]}))  # fmt: skip
    scenarios = tmp_path / "scenarios.yaml"
    scenarios.write_text(
        "scenarios:\n  - name: advertised\n    trace: workloads/traces/mooncake_conversation.jsonl\n"
        "    format: mooncake\n    start_s: 0\n    duration_s: 2\n    speedup: 2.0\n    endpoint: twin\n"
        "    slo: {ttft_ms: 2000, tpot_ms: 100}\n"
    )
    defs = build_definitions(scenarios_path=scenarios, warehouse_root=tmp_path / "warehouse", endpoints_path=endpoints)
    key = dg.MultiPartitionKey({"week": "2026-11-16", "scenario": "advertised"})
    result = defs.resolve_job_def(WEEKLY_JOB).execute_in_process(
        partition_key=key,
        instance=dg.DagsterInstance.ephemeral(),
        asset_selection=[dg.AssetKey("workload"), dg.AssetKey("replay_run")],
    )
    assert result.success

    [run_dir] = [
        p for p in (tmp_path / "warehouse" / "runs" / "week=2026-11-16" / "scenario=advertised").iterdir() if p.is_dir()
    ]
    shard = read_run_json(run_dir / "shard-0")
    assert shard.url == advertised  # what replay_shard was handed and replayed against
    assert shard.requests_total > 0 and shard.requests_ok == shard.requests_total
    facts = json.loads((run_dir / "server_facts.json").read_text())
    assert facts["url"] == advertised and facts["metrics_urls"] == [advertised]
    with pytest.raises(OSError):  # finish_replay stopped it
        urllib.request.urlopen(f"{advertised}/health", timeout=2)
