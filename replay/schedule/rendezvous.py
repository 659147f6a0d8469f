"""Shards agree on one t0 once every shard is ready, instead of guessing a lead time.

Each shard, once its prompts are built and the server has answered, writes `shard-<k>.ready` (the wall
time it became ready) into a folder all shards can see (the run folder: a shared volume on Kubernetes)
and waits until all n files are there. Every shard then computes the same t0 from the same files:
the latest ready time plus `lead_s`, the margin for the slowest shard to notice the last arrival.
A shard that does not arrive within `timeout_s` fails every waiting shard, by name.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

from common.atomic_file import write_bytes_atomically

READY_FILE = "shard-{}.ready"
POLL_S = 0.02


class RendezvousTimeout(RuntimeError):
    """Not every shard arrived in time; the message names the ones that did not."""


@dataclass(frozen=True, slots=True)
class Rendezvous:
    folder: Path
    shard_index: int
    shard_count: int
    timeout_s: float = 600.0  # a shard's pod may need to be scheduled and pull its image first
    lead_s: float = 0.5  # from the last arrival to t0; far above POLL_S

    def __post_init__(self) -> None:
        if not 0 <= self.shard_index < self.shard_count:
            raise ValueError(f"shard {self.shard_index}/{self.shard_count}: need 0 <= k < n")
        if self.timeout_s <= 0 or self.lead_s <= 0:
            raise ValueError("rendezvous timeout_s and lead_s must be > 0")


def agree_start(
    rendezvous: Rendezvous,
    wall_s: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> float:
    """Announce this shard ready, wait for the others; returns the shared t0 in epoch seconds. Blocking."""
    folder = Path(rendezvous.folder)
    folder.mkdir(parents=True, exist_ok=True)
    ready_at = wall_s()
    # Atomic, so another shard never reads half a file.
    write_bytes_atomically(folder / READY_FILE.format(rendezvous.shard_index), orjson.dumps({"ready_wall_s": ready_at}))
    deadline = ready_at + rendezvous.timeout_s
    while True:
        arrived = _arrivals(folder, rendezvous.shard_count)
        if len(arrived) == rendezvous.shard_count:
            return max(arrived.values()) + rendezvous.lead_s
        if wall_s() >= deadline:
            missing = [f"shard {k}" for k in range(rendezvous.shard_count) if k not in arrived]
            raise RendezvousTimeout(
                f"{folder}: {', '.join(missing)} of {rendezvous.shard_count} did not become ready within "
                f"{rendezvous.timeout_s:.0f} s of shard {rendezvous.shard_index}; no request was sent"
            )
        sleep(POLL_S)


def _arrivals(folder: Path, shard_count: int) -> dict[int, float]:
    arrived = {}
    for k in range(shard_count):
        path = folder / READY_FILE.format(k)
        if path.exists():
            arrived[k] = float(orjson.loads(path.read_bytes())["ready_wall_s"])
    return arrived
