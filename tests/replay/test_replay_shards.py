"""Sharding end to end: two `costbench replay --shard k/2` processes in parallel meet at a rendezvous
and share one t0, fixed once both are ready."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from pipelines import cli
from replay.recording.requests_reader import read_requests
from replay.recording.run_json import read_run_json
from replay_sglang_peer import PeerBehaviour, peer_in_thread

REPO = Path(__file__).resolve().parents[2]
LINES = 40
# Mooncake JSONL (no sessions, so requests shard by request id; session stickiness is in test_replay_scheduling).
TRACE = "".join(
    f'{{"timestamp": {i * 25}, "input_length": {16 + i % 5}, "output_length": 2, "hash_ids": [{i % 4}]}}\n'
    for i in range(LINES)
)


def _replay(trace: Path, url: str, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "pipelines", "replay", "--trace", str(trace), "--format", "mooncake", "--url", url,
         "--out", str(out), "--no-progress", "--speedup", "2", *extra],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


@pytest.mark.timeout(60)
def test_two_shards_in_parallel_replay_exactly_the_unsharded_requests(tmp_path):
    trace = tmp_path / "trace.jsonl"
    trace.write_text(TRACE)
    with peer_in_thread(PeerBehaviour()) as peer:
        # The unsharded replay, in this process (same command, same code path, no interpreter start-up).
        assert (
            cli.main(
                [
                    "replay",
                    "--trace",
                    str(trace),
                    "--format",
                    "mooncake",
                    "--url",
                    peer.url,
                    "--out",
                    str(tmp_path / "whole"),
                    "--no-progress",
                    "--speedup",
                    "2",
                    "--max-requests",
                    "30",
                ]
            )
            == 0
        )
        rendezvous = tmp_path / "rendezvous"
        shards = [
            _replay(trace, peer.url, tmp_path / f"shard{k}", "--max-requests", "30", "--shard", f"{k}/2",
                    "--rendezvous", str(rendezvous), "--run-id", "two-shards")
            for k in range(2)
        ]  # fmt: skip
        for proc in shards:
            assert proc.wait(30) == 0, proc.stdout.read()
        sent = len(peer.bodies)
    whole_ids = read_requests(tmp_path / "whole").column("request_id").to_pylist()
    shard_ids = [read_requests(tmp_path / f"shard{k}").column("request_id").to_pylist() for k in range(2)]
    assert len(whole_ids) == 30 and sent == 60
    assert shard_ids[0] and shard_ids[1]  # both shards did work
    assert sorted(shard_ids[0] + shard_ids[1]) == sorted(whole_ids)  # union is the whole, no overlap
    runs = [read_run_json(tmp_path / f"shard{k}") for k in range(2)]
    ready = [orjson.loads((rendezvous / f"shard-{k}.ready").read_bytes())["ready_wall_s"] for k in range(2)]
    assert runs[0].t0_wall_s == runs[1].t0_wall_s == pytest.approx(max(ready) + 0.5)  # the last arrival + lead
    assert [(r.shard_index, r.shard_count) for r in runs] == [(0, 2), (1, 2)]
    assert sum(r.requests_total for r in runs) == 30 and all(not r.partial for r in runs)
    # Requests went out on the shared timeline: a request's schedule is the same in a shard as unsharded.
    whole_sched = dict(zip(whole_ids, read_requests(tmp_path / "whole").column("scheduled_mono_s").to_pylist()))
    for k in range(2):
        table = read_requests(tmp_path / f"shard{k}")
        for rid, scheduled in zip(table.column("request_id").to_pylist(), table.column("scheduled_mono_s").to_pylist()):
            assert scheduled == pytest.approx(whole_sched[rid])
