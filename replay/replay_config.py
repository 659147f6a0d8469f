"""The typed, validated settings of one replay run (STYLE.md 9): built once, checked when built."""

from __future__ import annotations

import re
import secrets
import time
from dataclasses import dataclass, field
from enum import Enum
from urllib.parse import urlsplit

from replay.clients.client_registry import Backend

_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")


class ReplayInputError(ValueError):
    """The replay cannot start: bad configuration, an empty window, an unreachable endpoint."""


class ArrivalProcess(str, Enum):
    TRACE = "trace"  # the trace's own timestamps
    POISSON = "poisson"  # exponential gaps at rate_rps
    GAMMA = "gamma"  # gamma gaps at rate_rps; burstiness < 1 is burstier than Poisson
    CONSTANT = "constant"  # evenly spaced at rate_rps


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(3)


@dataclass(frozen=True, slots=True)
class ReplayConfig:
    url: str  # base URL of the endpoint, e.g. http://127.0.0.1:30000
    backend: Backend = Backend.SGLANG
    speedup: float = 1.0  # request i is due at arrival_s / speedup
    start_s: float = 0.0  # window of the trace to replay: [start_s, start_s + duration_s)
    duration_s: float | None = None  # None: to the end of the trace
    request_timeout_s: float = 600.0
    api_key_env: str | None = None  # name of the environment variable holding the key, never the key
    seed: int = 0  # prompt materialization seed (and synthetic arrivals' seed)
    run_id: str = field(default_factory=new_run_id)
    lag_degraded_ms: float = 10.0  # schedule-lag p99 past this flags the run client_degraded
    flush_every_records: int = 256
    flush_interval_s: float = 1.0  # a completed record reaches a part file within this (README, "Killed runs")
    max_requests: int | None = None  # replay only the first N requests of the window (before sharding)
    max_concurrency: int | None = None  # cap on requests in flight; a delay it causes is recorded
    warmup_s: float = 0.0  # requests due in the first warmup_s replay seconds are flagged is_warmup
    shard_index: int = 0  # replay shard shard_index of shard_count (by session hash)
    shard_count: int = 1
    start_at_epoch_s: float | None = None  # shared t0 for all shards (epoch seconds); None: start when ready
    # Shards meet here (a folder every shard can see) and fix t0 once all are ready (replay/schedule/rendezvous.py).
    rendezvous_dir: str | None = None
    rendezvous_timeout_s: float = 600.0
    # Whose ready files count there: shards of one run and attempt (a ready file of another is stale). None: run_id.
    rendezvous_run_id: str | None = None
    rendezvous_attempt: int = 0  # a retried step's number (Dagster's retry_number)
    arrival_process: ArrivalProcess = ArrivalProcess.TRACE
    rate_rps: float | None = None  # synthetic arrivals: mean request rate
    burstiness: float = 1.0  # gamma shape: 1 = Poisson, < 1 burstier, > 1 smoother
    model: str | None = None  # OpenAI `model`; None: the first id of /v1/models, else "default"
    require_reasoning: bool = False  # native /generate: send require_reasoning (R1 reasoning counts)

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ReplayInputError(f"url {self.url!r}: expected http://host:port or https://host:port")
        if parts.path.strip("/") or parts.query:
            raise ReplayInputError(f"url {self.url!r}: give the endpoint's base URL, without a path")
        object.__setattr__(self, "url", f"{parts.scheme}://{parts.netloc}")
        for name in ("speedup", "start_s", "request_timeout_s", "lag_degraded_ms", "warmup_s", "burstiness"):
            object.__setattr__(self, name, float(getattr(self, name)))  # run.json shows 211.0, not 211
        for name in ("duration_s", "start_at_epoch_s", "rate_rps"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, float(getattr(self, name)))
        self._coerce_enum("backend", Backend)
        self._coerce_enum("arrival_process", ArrivalProcess)
        synthetic = self.arrival_process is not ArrivalProcess.TRACE
        checks = [
            (self.speedup > 0, f"speedup must be > 0, got {self.speedup}"),
            (self.start_s >= 0, f"start_s must be >= 0, got {self.start_s}"),
            (self.duration_s is None or self.duration_s > 0, f"duration_s must be > 0, got {self.duration_s}"),
            (self.request_timeout_s > 0, f"request_timeout_s must be > 0, got {self.request_timeout_s}"),
            (self.seed >= 0, f"seed must be >= 0, got {self.seed}"),
            (self.lag_degraded_ms > 0, f"lag_degraded_ms must be > 0, got {self.lag_degraded_ms}"),
            (self.flush_interval_s > 0, f"flush_interval_s must be > 0, got {self.flush_interval_s}"),
            (self.flush_every_records > 0, f"flush_every_records must be > 0, got {self.flush_every_records}"),
            (self.max_requests is None or self.max_requests > 0, f"max_requests must be > 0, got {self.max_requests}"),
            (self.max_concurrency is None or self.max_concurrency > 0,
             f"max_concurrency must be > 0, got {self.max_concurrency}"),
            (self.warmup_s >= 0, f"warmup_s must be >= 0, got {self.warmup_s}"),
            (self.shard_count >= 1 and 0 <= self.shard_index < self.shard_count,
             f"shard {self.shard_index}/{self.shard_count}: need 0 <= k < n"),
            (not synthetic or (self.rate_rps is not None and self.rate_rps > 0),
             f"arrival process {self.arrival_process.value} needs rate_rps > 0, got {self.rate_rps}"),
            (synthetic or self.rate_rps is None, "rate_rps is only for synthetic arrivals (poisson, gamma, constant)"),
            (self.burstiness > 0, f"burstiness must be > 0, got {self.burstiness}"),
            (self.rendezvous_dir is None or self.start_at_epoch_s is None,
             "give shards either a start time or a rendezvous folder, not both"),
            (self.rendezvous_timeout_s > 0, f"rendezvous_timeout_s must be > 0, got {self.rendezvous_timeout_s}"),
            (self.rendezvous_attempt >= 0, f"rendezvous_attempt must be >= 0, got {self.rendezvous_attempt}"),
            (
                self.api_key_env is None or bool(_ENV_NAME.match(self.api_key_env)),
                "api_key_env must name an environment variable (like SGLANG_API_KEY), not hold the key",
            ),
        ]  # fmt: skip
        for ok, message in checks:
            if not ok:
                raise ReplayInputError(message)

    def _coerce_enum(self, name: str, enum: type[Enum]) -> None:
        value = getattr(self, name)
        if isinstance(value, enum):
            return
        try:
            object.__setattr__(self, name, enum(value))
        except ValueError:
            known = ", ".join(m.value for m in enum)
            label = name.replace("_", " ")
            raise ReplayInputError(f"unknown {label} {value!r}: known {label}s are {known}") from None
