"""Replay shards run in parallel under the job's own (multiprocess) executor: two shard steps in two
processes meet at a rendezvous and share one t0 on one endpoint, and the merged run holds exactly the
unsharded request set. On the command line, a shard never counts a ready file another run left behind."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import dagster as dg
import orjson
import pyarrow.parquet as pq

from pipelines import cli
from pipelines.definitions import WEEKLY_JOB, build_definitions
from replay.recording.run_json import read_run_json
from replay_sglang_peer import PeerBehaviour, peer_in_thread
from workloads.readers.reader_registry import read_trace

REPO = Path(__file__).resolve().parents[2]
SCENARIOS_ENV = "COSTBENCH_TEST_SHARD_SCENARIOS"
WAREHOUSE_ENV = "COSTBENCH_TEST_SHARD_WAREHOUSE"


def sharded_job() -> dg.JobDefinition:
    """Rebuilt in every step process (reconstructable), from paths the test puts in the environment."""
    defs = build_definitions(
        scenarios_path=Path(os.environ[SCENARIOS_ENV]), warehouse_root=Path(os.environ[WAREHOUSE_ENV])
    )
    return defs.resolve_job_def(WEEKLY_JOB)


def test_two_shards_replay_in_parallel_processes_and_merge_to_the_whole_window(tmp_path, monkeypatch):
    scenarios = tmp_path / "scenarios.yaml"
    scenarios.write_text(
        "scenarios:\n  - name: sharded\n    trace: workloads/traces/azure_conv_2023.csv\n    format: azure\n"
        "    start_s: 2614\n    duration_s: 4\n    speedup: 1\n    endpoint: v3-8xh200\n    shards: 2\n"
        "    slo: {ttft_ms: 2000, tpot_ms: 100}\n"
    )
    warehouse = tmp_path / "warehouse"
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "dagster.yaml", home / "dagster.yaml")
    monkeypatch.setenv(SCENARIOS_ENV, str(scenarios))
    monkeypatch.setenv(WAREHOUSE_ENV, str(warehouse))
    monkeypatch.setenv("DAGSTER_HOME", str(home))

    key = dg.MultiPartitionKey({"week": "2026-11-16", "scenario": "sharded"})
    with dg.DagsterInstance.get() as instance:
        result = dg.execute_job(
            # Step processes import sharded_job from this file, found from the tests folder.
            dg.build_reconstructable_job(
                Path(__file__).stem, sharded_job.__name__, reconstructor_working_directory=str(Path(__file__).parent)
            ),
            instance,
            tags={
                "dagster/partition": str(key),
                "dagster/partition/week": "2026-11-16",
                "dagster/partition/scenario": "sharded",
            },
        )
        assert result.success
        starts = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_START]
    shard_pids = {e.pid for e in starts if e.step_key.startswith("replay_run.replay_shard")}
    assert len(shard_pids) == 2  # each shard in its own process

    [run_dir] = [p for p in (warehouse / "runs" / "week=2026-11-16" / "scenario=sharded").iterdir() if p.is_dir()]
    shard_infos = [read_run_json(run_dir / f"shard-{k}") for k in (0, 1)]
    assert {i.shard_index for i in shard_infos} == {0, 1}
    assert shard_infos[0].t0_wall_s == shard_infos[1].t0_wall_s  # one shared t0
    assert sorted(p.name for p in (run_dir / "rendezvous").iterdir()) == ["shard-0.ready", "shard-1.ready"]
    ready = [orjson.loads((run_dir / "rendezvous" / f"shard-{k}.ready").read_bytes()) for k in (0, 1)]
    assert {(r["run_id"], r["attempt"]) for r in ready} == {(result.run_id, 0)}  # this Dagster run, first attempt
    assert all(i.requests_total > 0 for i in shard_infos)

    expected = read_trace(REPO / "workloads/traces/azure_conv_2023.csv", "azure").window(2614, 4)
    lake = pq.read_table(warehouse / "lake" / "requests" / "week=2026-11-16" / "scenario=sharded" / "part-0.parquet")
    ids = lake.column("request_id").to_pylist()
    assert sorted(ids) == sorted(expected.table.column("request_id").to_pylist())  # the union, nothing twice
    assert set(lake.column("status").to_pylist()) == {"ok"}
    merged = read_run_json(run_dir)
    assert (merged.shard_count, merged.requests_total, merged.requests_ok) == (1, len(ids), len(ids))
    assert merged.config_fingerprint  # the endpoint's configuration, from its server facts


MOONCAKE_LINES = "".join(
    f'{{"timestamp": {i * 25}, "input_length": 16, "output_length": 2, "hash_ids": [{i % 4}]}}\n' for i in range(10)
)


def _cli_shard(trace: Path, url: str, *extra: str) -> int:
    argv = ["replay", "--trace", str(trace), "--format", "mooncake", "--url", url, "--no-progress", *extra]
    return cli.main(argv)


def test_a_cli_shard_waits_past_a_ready_file_an_earlier_run_left_and_fails_naming_the_missing_shard(
    tmp_path, capsys, caplog
):
    trace = tmp_path / "trace.jsonl"
    trace.write_text(MOONCAKE_LINES)
    rendezvous = tmp_path / "rendezvous"
    rendezvous.mkdir()
    leftover = rendezvous / "shard-1.ready"
    leftover.write_bytes(orjson.dumps({"run_id": "nightly-1", "attempt": 0, "ready_wall_s": 1_800_000_000.0}))
    with peer_in_thread(PeerBehaviour()) as peer, caplog.at_level("WARNING"):
        status = _cli_shard(trace, peer.url, "--shard", "0/2", "--run-id", "nightly-2", "--out", str(tmp_path / "s0"),
                            "--rendezvous", str(rendezvous), "--rendezvous-timeout-s", "1")  # fmt: skip
        sent = len(peer.bodies)
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and sent == 0  # it did not replay its half alone
    assert len(err) == 1 and err[0].startswith("costbench: error: ")
    assert "shard 1 of 2 did not become ready within 1 s of shard 0" in err[0] and "no request was sent" in err[0]
    assert any(str(leftover) in r.getMessage() and "'nightly-1'" in r.getMessage() for r in caplog.records)
    assert not (rendezvous / "shard-0.ready").exists()  # it gave up, so a later shard 1 does not count it


def test_an_empty_ready_file_stops_a_cli_shard_with_a_line_naming_it(tmp_path, capsys):
    trace = tmp_path / "trace.jsonl"
    trace.write_text(MOONCAKE_LINES)
    rendezvous = tmp_path / "rendezvous"
    rendezvous.mkdir()
    (rendezvous / "shard-1.ready").write_bytes(b"")
    with peer_in_thread(PeerBehaviour()) as peer:
        status = _cli_shard(trace, peer.url, "--shard", "0/2", "--run-id", "nightly-2", "--out", str(tmp_path / "s0"),
                            "--rendezvous", str(rendezvous))  # fmt: skip
        sent = len(peer.bodies)
    [line] = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and sent == 0
    assert line.startswith(f"costbench: error: {rendezvous / 'shard-1.ready'}: ") and "an empty file" in line
    assert (rendezvous / "shard-1.ready").exists()  # not its file: left as it was


def test_cli_shards_meeting_at_a_rendezvous_need_one_run_id(tmp_path, capsys):
    trace = tmp_path / "trace.jsonl"
    trace.write_text(MOONCAKE_LINES)
    status = _cli_shard(trace, "http://127.0.0.1:9", "--shard", "1/2", "--rendezvous", str(tmp_path / "rendezvous"),
                        "--out", str(tmp_path / "s1"))  # fmt: skip
    [line] = capsys.readouterr().err.strip().splitlines()
    assert status == 2
    assert "--rendezvous" in line and "--run-id" in line and "same for every shard" in line
    assert not (tmp_path / "rendezvous").exists() and not (tmp_path / "s1").exists()


def test_a_cli_shard_refuses_a_run_id_that_is_not_a_folder_name(tmp_path, capsys):
    trace = tmp_path / "trace.jsonl"
    trace.write_text(MOONCAKE_LINES)
    status = _cli_shard(trace, "http://127.0.0.1:9", "--run-id", "../elsewhere", "--out", str(tmp_path / "s"))
    [line] = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and "--run-id '../elsewhere'" in line
