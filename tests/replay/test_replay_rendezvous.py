"""Shards fix one t0 only once every shard of the same run and attempt is ready; a shard that never arrives
fails the others by name; a ready file left by another run or attempt is waited past, never counted."""

from __future__ import annotations

import logging
import re
import threading

import orjson
import pytest

from replay.schedule.rendezvous import READY_FILE, Rendezvous, RendezvousError, RendezvousTimeout, agree_start

RUN = "20261116T000000Z-abc123"


class ScriptedWall:
    """Epoch time that moves only when the waiting shard sleeps."""

    def __init__(self, start_s: float) -> None:
        self.t = start_s

    def wall_s(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


def _leave_ready_file(folder, shard_index: int, run_id: str | None, attempt: int, ready_wall_s: float) -> None:
    body = {"attempt": attempt, "ready_wall_s": ready_wall_s}
    if run_id is not None:
        body["run_id"] = run_id
    (folder / READY_FILE.format(shard_index)).write_bytes(orjson.dumps(body))


def _meet(folder, count: int, run_id: str = RUN) -> dict[int, float]:
    """`count` shards of `run_id` in threads, becoming ready one after another; each one's t0."""
    results: dict[int, float] = {}
    gates = [threading.Event() for _ in range(count)]

    def shard(k: int) -> None:
        gates[k].wait(10)
        results[k] = agree_start(Rendezvous(folder, k, count, run_id, timeout_s=30, lead_s=0.5))

    threads = [threading.Thread(target=shard, args=(k,)) for k in range(count)]
    for thread in threads:
        thread.start()
    for gate in gates:  # shards become ready one after another, the last one well after the first
        gate.set()
        threading.Event().wait(0.2)
    for thread in threads:
        thread.join(15)
    return results


def test_every_shard_gets_the_same_t0_after_the_last_one_is_ready(tmp_path):
    results = _meet(tmp_path, 3)
    assert set(results) == {0, 1, 2}
    assert len(set(results.values())) == 1  # one shared t0
    last_ready = max(orjson.loads((tmp_path / READY_FILE.format(k)).read_bytes())["ready_wall_s"] for k in range(3))
    assert results[0] == pytest.approx(last_ready + 0.5)


def test_shards_meet_past_ready_files_an_earlier_run_left_in_the_folder(tmp_path):
    for k in range(2):
        _leave_ready_file(tmp_path, k, "an-earlier-run", 0, 1_700_000_000.0)
    results = _meet(tmp_path, 2)
    assert set(results) == {0, 1} and len(set(results.values())) == 1
    mine = [orjson.loads((tmp_path / READY_FILE.format(k)).read_bytes()) for k in range(2)]
    assert {m["run_id"] for m in mine} == {RUN}  # each shard's file now carries this run's id
    assert results[0] == pytest.approx(max(m["ready_wall_s"] for m in mine) + 0.5)  # not the earlier run's times


@pytest.mark.parametrize(
    ("run_id", "attempt", "mine"),
    [
        ("an-earlier-run", 0, 0),  # a CLI replay before this one, or a re-executed Dagster run
        (RUN, 0, 1),  # this run's step, on its first attempt; this shard is its retry
        (None, 0, 0),  # a costbench that wrote no run id
    ],
)
def test_a_ready_file_of_another_run_or_attempt_is_waited_past_and_said(tmp_path, caplog, run_id, attempt, mine):
    wall = ScriptedWall(1_800_000_000.0)
    _leave_ready_file(tmp_path, 1, run_id, attempt, 1_800_000_000.0)
    with caplog.at_level(logging.WARNING, logger="replay.schedule.rendezvous"):
        with pytest.raises(RendezvousTimeout, match=r"shard 1 of 2 did not become ready within 60 s of shard 0") as err:
            agree_start(Rendezvous(tmp_path, 0, 2, RUN, attempt=mine, timeout_s=60), wall.wall_s, wall.sleep)
    assert "shard-1.ready there is stale" in str(err.value)
    stale_lines = [r.getMessage() for r in caplog.records if "shard-1.ready" in r.getMessage()]
    assert len(stale_lines) == 1  # said once, not once per poll
    assert f"not this run's ({RUN!r} attempt {mine})" in stale_lines[0]


def test_a_shard_that_never_arrives_fails_the_wait_naming_it(tmp_path):
    wall = ScriptedWall(1_800_000_000.0)
    _leave_ready_file(tmp_path, 1, RUN, 0, 1_800_000_000.0)
    with pytest.raises(RendezvousTimeout, match=r"shard 2 of 3 did not become ready within 60 s of shard 0"):
        agree_start(Rendezvous(tmp_path, 0, 3, RUN, timeout_s=60), wall.wall_s, wall.sleep)
    assert wall.t >= 1_800_000_060.0  # it waited out the timeout (in scripted time), no longer


def test_a_shard_that_gave_up_takes_its_ready_file_away(tmp_path):
    # Shard 1 waited in vain and failed; shard 0 of the same run, arriving later, must not count it as ready.
    wall = ScriptedWall(1_800_000_000.0)
    with pytest.raises(RendezvousTimeout):
        agree_start(Rendezvous(tmp_path, 1, 2, RUN, timeout_s=60), wall.wall_s, wall.sleep)
    assert not (tmp_path / READY_FILE.format(1)).exists()
    with pytest.raises(RendezvousTimeout, match=r"shard 1 of 2 did not become ready"):
        agree_start(Rendezvous(tmp_path, 0, 2, RUN, timeout_s=60), wall.wall_s, wall.sleep)


@pytest.mark.parametrize(
    ("content", "found"),
    [
        (b"", "an empty file"),
        (b'{"run_id": "x", "ready_wall', "not JSON"),
        (b"[1800000000.0]", "not a JSON object"),
        (b'{"run_id": "x", "attempt": 0}', "no number ready_wall_s"),
        (b'{"run_id": 7, "attempt": 0, "ready_wall_s": 1800000000.0}', "run_id is not a string"),
        (b'{"run_id": "x", "attempt": "0", "ready_wall_s": 1800000000.0}', "attempt is not a whole number"),
    ],
)
def test_a_ready_file_that_cannot_be_read_is_an_error_naming_it(tmp_path, content, found):
    (tmp_path / READY_FILE.format(1)).write_bytes(content)
    wall = ScriptedWall(1_800_000_000.0)
    with pytest.raises(RendezvousError, match=rf"{re.escape(str(tmp_path / 'shard-1.ready'))}: .*{found}") as err:
        agree_start(Rendezvous(tmp_path, 0, 2, RUN, timeout_s=60), wall.wall_s, wall.sleep)
    assert not isinstance(err.value, RendezvousTimeout)
    assert (tmp_path / READY_FILE.format(1)).read_bytes() == content  # nothing it did not write is touched
    assert not (tmp_path / READY_FILE.format(0)).exists()  # it gave up: its own file went with it


def test_one_shard_alone_starts_as_soon_as_it_is_ready(tmp_path):
    wall = ScriptedWall(1_800_000_000.0)
    t0 = agree_start(Rendezvous(tmp_path, 0, 1, RUN, lead_s=0.25), wall.wall_s, wall.sleep)
    assert t0 == pytest.approx(1_800_000_000.25)


@pytest.mark.parametrize("ahead_s", [3600.0, -3600.0])  # the peer's clock an hour ahead, or this shard's
def test_ready_files_dated_further_apart_than_the_timeout_fail_every_shard_at_once(tmp_path, ahead_s):
    # A t0 an hour off would hold the shards an hour past their 60 s timeout: refused, naming both files.
    wall = ScriptedWall(1_800_000_000.0)
    _leave_ready_file(tmp_path, 1, RUN, 0, 1_800_000_000.0 + ahead_s)
    with pytest.raises(RendezvousError, match=r"dated 3600 s after shard-\d\.ready .*more than the 60 s a shard waits"):
        agree_start(Rendezvous(tmp_path, 0, 2, RUN, timeout_s=60), wall.wall_s, wall.sleep)
    assert wall.t == 1_800_000_000.0  # at once, no wait
    assert not (tmp_path / READY_FILE.format(0)).exists()  # its file withdrawn: the peer cannot meet it either


def test_ready_files_apart_by_less_than_the_timeout_still_meet(tmp_path):
    wall = ScriptedWall(1_800_000_000.0)
    _leave_ready_file(tmp_path, 1, RUN, 0, 1_800_000_059.0)  # a peer whose clock is 59 s ahead
    t0 = agree_start(Rendezvous(tmp_path, 0, 2, RUN, timeout_s=60, lead_s=0.5), wall.wall_s, wall.sleep)
    assert t0 == pytest.approx(1_800_000_059.5)
