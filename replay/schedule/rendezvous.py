"""Shards agree on one t0 once every shard is ready, instead of guessing a lead time.

Each shard, once its prompts are built and the server has answered, writes `shard-<k>.ready` (its run id,
attempt and the wall time it became ready) into a folder all shards can see (the run folder: a shared volume
on Kubernetes) and waits until all n files of its run and attempt are there. Every shard then computes the
same t0 from the same files: the latest ready time plus `lead_s`, the margin for the slowest shard to notice
the last arrival. A ready file of another run or attempt (an earlier replay's, a failed step's before its
retry) is stale: waited past, said once in the log, never counted. A shard that does not arrive within
`timeout_s` fails every waiting shard, by name; the one that gives up takes its own file away, so a shard
arriving later does not count it. The wait is bounded by `timeout_s` whatever the files' dates say: ready times
further apart than `timeout_s` (a host whose clock is an hour ahead) fail every shard, instead of a t0 that far off.

Only files of the same run id and the same attempt count, on both sides: a shard counts a peer exactly when
the peer counts it, so two shards never start on two different t0s. The cost: a retried shard meets only
shards of its own attempt.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

from common.atomic_file import write_bytes_atomically
from common.run_folder import READY_FILE

POLL_S = 0.02

log = logging.getLogger(__name__)


class RendezvousError(RuntimeError):
    """The shards cannot meet: a ready file that is not one, or (RendezvousTimeout) a shard that did not come."""


class RendezvousTimeout(RendezvousError):
    """Not every shard arrived in time; the message names the ones that did not."""


@dataclass(frozen=True, slots=True)
class Rendezvous:
    folder: Path
    shard_index: int
    shard_count: int
    run_id: str  # every shard of one run shares it; a ready file of another run is stale
    attempt: int = 0  # the step's retry number; a ready file of another attempt is stale
    timeout_s: float = 600.0  # a shard's pod may need to be scheduled and pull its image first
    lead_s: float = 0.5  # from the last arrival to t0; far above POLL_S

    def __post_init__(self) -> None:
        if not 0 <= self.shard_index < self.shard_count:
            raise ValueError(f"shard {self.shard_index}/{self.shard_count}: need 0 <= k < n")
        if self.timeout_s <= 0 or self.lead_s <= 0:
            raise ValueError("rendezvous timeout_s and lead_s must be > 0")
        if not self.run_id or self.attempt < 0:
            raise ValueError(f"rendezvous run id {self.run_id!r} attempt {self.attempt}: need an id and attempt >= 0")


@dataclass(frozen=True, slots=True)
class _ReadyFile:
    run_id: str | None  # None: written by a costbench that wrote no run id
    attempt: int
    ready_wall_s: float

    def label(self) -> str:
        run = "no run id" if self.run_id is None else f"run {self.run_id!r}"
        return f"{run} attempt {self.attempt}"


def agree_start(
    rendezvous: Rendezvous,
    wall_s: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> float:
    """Announce this shard ready, wait for the others; returns the shared t0 in epoch seconds. Blocking."""
    folder = Path(rendezvous.folder)
    folder.mkdir(parents=True, exist_ok=True)
    mine = _ReadyFile(rendezvous.run_id, rendezvous.attempt, wall_s())
    own_path = folder / READY_FILE.format(rendezvous.shard_index)
    own_bytes = orjson.dumps({"run_id": mine.run_id, "attempt": mine.attempt, "ready_wall_s": mine.ready_wall_s})
    write_bytes_atomically(own_path, own_bytes)  # atomic, so another shard never reads half a file
    try:
        return _wait_for_all(rendezvous, folder, mine, wall_s, sleep)
    except RendezvousError:
        # A shard that gives up takes its file away, so a shard arriving later does not count it as ready.
        _withdraw(own_path, own_bytes)
        raise


def _wait_for_all(
    rendezvous: Rendezvous,
    folder: Path,
    mine: _ReadyFile,
    wall_s: Callable[[], float],
    sleep: Callable[[float], None],
) -> float:
    deadline = mine.ready_wall_s + rendezvous.timeout_s
    said: dict[int, _ReadyFile] = {}  # the stale file last logged per shard, so each is said once, not every poll
    while True:
        arrived, stale = _arrivals(folder, rendezvous.shard_count, mine)
        for k, ready in stale.items():
            if said.get(k) != ready:
                said[k] = ready
                log.warning(
                    f"{folder / READY_FILE.format(k)}: ready file of {ready.label()}, not this run's "
                    f"({mine.run_id!r} attempt {mine.attempt}): ignored; waiting for shard {k} of this run"
                )
        if len(arrived) == rendezvous.shard_count:
            _check_spread(folder, arrived, rendezvous, mine, wall_s())
            return max(arrived.values()) + rendezvous.lead_s
        if wall_s() >= deadline:
            missing = [f"shard {k}" for k in range(rendezvous.shard_count) if k not in arrived]
            notes = "".join(
                f"; {READY_FILE.format(k)} there is stale ({ready.label()})" for k, ready in sorted(stale.items())
            )
            raise RendezvousTimeout(
                f"{folder}: {', '.join(missing)} of {rendezvous.shard_count} did not become ready within "
                f"{rendezvous.timeout_s:.0f} s of shard {rendezvous.shard_index} ({mine.label()}){notes}; "
                "no request was sent"
            )
        sleep(POLL_S)


def _check_spread(
    folder: Path, arrived: dict[int, float], rendezvous: Rendezvous, mine: _ReadyFile, now_s: float
) -> None:
    """The ready times, this shard's among them, within `timeout_s` of each other: no shard waits longer for a peer,
    so a wider spread is hosts' clocks that disagree (or an edited file), and t0 would be that far off. Every shard
    reads the same files, so every one refuses."""
    late = max(arrived, key=lambda k: arrived[k])
    early = min(arrived, key=lambda k: arrived[k])
    spread_s = arrived[late] - arrived[early]
    if spread_s > rendezvous.timeout_s:
        raise RendezvousError(
            f"{folder}: {READY_FILE.format(late)} is dated {spread_s:.0f} s after {READY_FILE.format(early)} "
            f"({arrived[late]:.3f} and {arrived[early]:.3f} epoch s), more than the {rendezvous.timeout_s:.0f} s a "
            f"shard waits: the shards' clocks disagree; t0 would be {arrived[late] + rendezvous.lead_s - now_s:.0f} s "
            f"from now on shard {rendezvous.shard_index}'s clock ({mine.label()}). No request was sent"
        )


def _arrivals(folder: Path, shard_count: int, mine: _ReadyFile) -> tuple[dict[int, float], dict[int, _ReadyFile]]:
    """(ready time of each shard of this run and attempt, the stale file of each other shard that has one)."""
    arrived, stale = {}, {}
    for k in range(shard_count):
        ready = _read_ready_file(folder / READY_FILE.format(k))
        if ready is None:
            continue
        if (ready.run_id, ready.attempt) == (mine.run_id, mine.attempt):
            arrived[k] = ready.ready_wall_s
        else:
            stale[k] = ready
    return arrived, stale


def _read_ready_file(path: Path) -> _ReadyFile | None:
    """The ready file at `path`, None if there is none; RendezvousError naming it if it is not one."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        data = None
    problem = _problem(raw, data)
    if problem is not None or not isinstance(data, dict):
        raise RendezvousError(
            f"{path}: not a shard's ready file ({problem}); expected JSON like "
            '{"run_id": "...", "attempt": 0, "ready_wall_s": 1800000000.0}: remove it, or give the shards a '
            "rendezvous folder of their own"
        )
    return _ReadyFile(data.get("run_id"), data.get("attempt", 0), float(data["ready_wall_s"]))


def _problem(raw: bytes, data: object) -> str | None:
    if not raw.strip():
        return "an empty file"
    if data is None:
        return "not JSON"
    if not isinstance(data, dict):
        return "not a JSON object"
    ready = data.get("ready_wall_s")
    if isinstance(ready, bool) or not isinstance(ready, int | float) or not math.isfinite(ready):
        return "no number ready_wall_s"
    if not isinstance(data.get("run_id", ""), str):
        return "run_id is not a string"
    attempt = data.get("attempt", 0)
    if isinstance(attempt, bool) or not isinstance(attempt, int):
        return "attempt is not a whole number"
    return None


def _withdraw(path: Path, written: bytes) -> None:
    # Only the file this shard wrote: a retry of this shard may already have put its own there.
    try:
        if path.read_bytes() == written:
            path.unlink()
    except FileNotFoundError:
        pass
