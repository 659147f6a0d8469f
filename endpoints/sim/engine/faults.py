"""Fault injection for reliability tests of the replayer and the pipeline; everything off by default.

Per request, drawn in arrival order from one seeded PRNG (so a run repeats exactly):
- error (`--fault-error-rate P`): after its first token the request is aborted by the "server";
  a non-streaming call gets HTTP 500, a stream gets an error event, then `data: [DONE]`.
- stall (`--fault-stall-s S`, for a share `--fault-stall-rate P` of requests, default all): after
  the first token the response goes quiet for S seconds, then catches up.
- disconnect (`--fault-disconnect-rate P`): after its first token the connection is dropped with
  no final chunk and no `[DONE]` (a non-streaming call gets no response at all).
Whole server:
- unavailable (`--fault-503-after-s S --fault-503-for-s D`): from S seconds after the warm-up ends,
  for D seconds, generation and health routes answer 503.
- crash (`--fault-crash-after N`): the first N generation requests to arrive are answered in full (each
  answer counts, whatever it says), and the process exits (status 70) once the last of them is written.
  Every later request is held and dropped by the crash, so exactly N answers go out, never more.
"""

from __future__ import annotations

import argparse
import random
from dataclasses import asdict, dataclass

CRASH_EXIT_STATUS = 70  # EX_SOFTWARE: an internal error, as a crashed server would die


@dataclass(frozen=True, slots=True)
class FaultConfig:
    error_rate: float = 0.0
    stall_s: float = 0.0
    stall_rate: float = 1.0
    disconnect_rate: float = 0.0
    unavailable_after_s: float | None = None
    unavailable_for_s: float = 0.0
    crash_after_requests: int | None = None
    seed: int = 0

    @staticmethod
    def add_arguments(group: argparse._ArgumentGroup) -> None:
        group.add_argument(
            "--fault-error-rate", type=float, default=0.0, help="share of requests that fail after their first token"
        )
        group.add_argument(
            "--fault-stall-s", type=float, default=0.0, help="seconds a response goes quiet after its first token"
        )
        group.add_argument(
            "--fault-stall-rate", type=float, default=1.0, help="share of requests that stall (with --fault-stall-s)"
        )
        group.add_argument(
            "--fault-disconnect-rate", type=float, default=0.0, help="share of responses dropped mid-stream"
        )
        group.add_argument(
            "--fault-503-after-s", type=float, default=None, help="start of a 503 period, seconds after warm-up"
        )
        group.add_argument("--fault-503-for-s", type=float, default=0.0, help="length of the 503 period")
        group.add_argument(
            "--fault-crash-after", type=int, default=None, help="answer the first N requests, then exit (status 70)"
        )
        group.add_argument("--fault-seed", type=int, default=0, help="seed of the per-request fault draws")

    @classmethod
    def from_namespace(cls, ns: argparse.Namespace) -> FaultConfig:
        for flag, value in (("--fault-error-rate", ns.fault_error_rate), ("--fault-stall-rate", ns.fault_stall_rate),
                            ("--fault-disconnect-rate", ns.fault_disconnect_rate)):  # fmt: skip
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{flag} must be in [0, 1], got {value}")
        for flag, value in (("--fault-stall-s", ns.fault_stall_s), ("--fault-503-for-s", ns.fault_503_for_s)):
            if value < 0:
                raise ValueError(f"{flag} must be >= 0, got {value}")
        if ns.fault_503_after_s is not None and ns.fault_503_after_s < 0:
            raise ValueError(f"--fault-503-after-s must be >= 0, got {ns.fault_503_after_s}")
        if ns.fault_503_for_s > 0 and ns.fault_503_after_s is None:
            raise ValueError("--fault-503-for-s needs --fault-503-after-s (when the 503 period starts)")
        if ns.fault_crash_after is not None and ns.fault_crash_after < 1:
            raise ValueError(f"--fault-crash-after must be >= 1, got {ns.fault_crash_after}")
        return cls(
            error_rate=ns.fault_error_rate, stall_s=ns.fault_stall_s, stall_rate=ns.fault_stall_rate,
            disconnect_rate=ns.fault_disconnect_rate, unavailable_after_s=ns.fault_503_after_s,
            unavailable_for_s=ns.fault_503_for_s, crash_after_requests=ns.fault_crash_after, seed=ns.fault_seed,
        )  # fmt: skip

    def as_server_info(self) -> dict:
        return {f"sim_fault_{name}": value for name, value in asdict(self).items()}


@dataclass(frozen=True, slots=True)
class RequestFaults:
    error: bool = False
    stall_s: float = 0.0
    disconnect: bool = False

    @property
    def any(self) -> bool:
        return self.error or self.disconnect or self.stall_s > 0


NO_FAULTS = RequestFaults()


class FaultInjector:
    """Draws each request's faults and keeps the server-wide fault state (503 window, crash count)."""

    def __init__(self, config: FaultConfig) -> None:
        self.config = config
        self._rng = random.Random(config.seed)
        self._per_request = config.error_rate > 0 or config.disconnect_rate > 0 or config.stall_s > 0
        self.admitted = 0  # generation requests let in under --fault-crash-after
        self.responses = 0  # answers of admitted requests that are done

    def draw(self) -> RequestFaults:
        if not self._per_request:
            return NO_FAULTS
        c, rng = self.config, self._rng
        error, disconnect, stall = (
            rng.random() < c.error_rate,
            rng.random() < c.disconnect_rate,
            rng.random() < c.stall_rate,
        )
        return RequestFaults(error=error, stall_s=c.stall_s if stall else 0.0, disconnect=disconnect and not error)

    def unavailable(self, since_ready_s: float) -> bool:
        start = self.config.unavailable_after_s
        return start is not None and start <= since_ready_s < start + self.config.unavailable_for_s

    def admit(self) -> bool:
        """Let in one generation request that just arrived; False once the crash's N answers are all taken.

        Arrival, not completion, is what is counted against N: requests that finish in the same engine
        step all complete before anything scheduled after them runs, so a limit checked at completion let
        every one of them through (62 answers for N = 60 under a replay's load)."""
        limit = self.config.crash_after_requests
        if limit is not None and self.admitted >= limit:
            return False
        self.admitted += 1
        return True

    def count_response(self) -> bool:
        """Count one admitted request's answer as done; True for the N-th, after which the server crashes."""
        self.responses += 1
        limit = self.config.crash_after_requests
        return limit is not None and self.responses == limit
