"""Shards fix one t0 only once every shard is ready; a shard that never arrives fails the others by name."""

from __future__ import annotations

import threading

import orjson
import pytest

from replay.schedule.rendezvous import READY_FILE, Rendezvous, RendezvousTimeout, agree_start


class ScriptedWall:
    """Epoch time that moves only when the waiting shard sleeps."""

    def __init__(self, start_s: float) -> None:
        self.t = start_s

    def wall_s(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


def test_every_shard_gets_the_same_t0_after_the_last_one_is_ready(tmp_path):
    count = 3
    results: dict[int, float] = {}
    gates = [threading.Event() for _ in range(count)]

    def shard(k: int) -> None:
        gates[k].wait(10)
        results[k] = agree_start(Rendezvous(tmp_path, k, count, timeout_s=30, lead_s=0.5))

    threads = [threading.Thread(target=shard, args=(k,)) for k in range(count)]
    for thread in threads:
        thread.start()
    for gate in gates:  # shards become ready one after another, the last one well after the first
        gate.set()
        threading.Event().wait(0.2)
    for thread in threads:
        thread.join(15)
    assert set(results) == {0, 1, 2}
    assert len(set(results.values())) == 1  # one shared t0
    last_ready = max(orjson.loads((tmp_path / READY_FILE.format(k)).read_bytes())["ready_wall_s"] for k in range(count))
    assert results[0] == pytest.approx(last_ready + 0.5)


def test_a_shard_that_never_arrives_fails_the_wait_naming_it(tmp_path):
    wall = ScriptedWall(1_800_000_000.0)
    (tmp_path / READY_FILE.format(1)).write_bytes(b'{"ready_wall_s": 1800000000.0}')
    with pytest.raises(RendezvousTimeout, match=r"shard 2 of 3 did not become ready within 60 s of shard 0"):
        agree_start(Rendezvous(tmp_path, 0, 3, timeout_s=60), wall.wall_s, wall.sleep)
    assert wall.t >= 1_800_000_060.0  # it waited out the timeout (in scripted time), no longer


def test_one_shard_alone_starts_as_soon_as_it_is_ready(tmp_path):
    wall = ScriptedWall(1_800_000_000.0)
    t0 = agree_start(Rendezvous(tmp_path, 0, 1, lead_s=0.25), wall.wall_s, wall.sleep)
    assert t0 == pytest.approx(1_800_000_000.25)
