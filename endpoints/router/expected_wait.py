"""smg's expected-wait score (policies/least_load.rs `select_min_expected_wait`), which power_of_two and
cache_aware's no-match branch (smg 1.13 logs it as `expected_wait_fallback`) both use.

A worker with a polled load scores (queued tokens + tokens dispatched to it since the poll) / its
generation throughput (the default throughput when it reports none) + kv_weight × u / (1 − u), u its KV
usage (clamped below 0.999). Queued tokens are the waiting requests × the mean prefill (SGLang's /metrics
has no waiting-token gauge). Without any poll in the fleet the score is the router's in-flight count. The
lowest score wins, ties uniformly at random; the winner is credited with the request's tokens (the mean
prefill when the router did not tokenize) until the next poll resets the credit.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from endpoints.router.worker_loads import EngineLoad, FleetView


@dataclass(frozen=True, slots=True)
class ExpectedWaitParams:
    kv_pressure_weight_s: float = 0.15  # --least-load-kv-pressure-weight
    default_throughput_tok_s: float = 2000.0  # --least-load-default-throughput
    mean_prefill_tokens: int = 1024  # --least-load-mean-prefill-tokens


class ExpectedWaitScorer:
    def __init__(self, params: ExpectedWaitParams, rng: random.Random) -> None:
        self._params = params
        self._rng = rng
        self._loads: dict[int, EngineLoad] = {}
        self._since_poll_tokens: dict[int, int] = {}

    def update_loads(self, loads: Mapping[int, EngineLoad]) -> None:
        self._loads.update(loads)
        for worker in loads:
            self._since_poll_tokens[worker] = 0

    def pick(self, candidates: Sequence[int], fleet: FleetView) -> int:
        polled = [self._loads[i].gen_throughput_tok_s for i in candidates if i in self._loads]
        live = [t for t in polled if t > 0]
        nominal = sum(live) / len(live) if live else self._params.default_throughput_tok_s
        any_polled = bool(polled)
        best, best_score, tied = candidates[0], self._score(candidates[0], fleet, nominal, any_polled), 1
        for worker in candidates[1:]:
            score = self._score(worker, fleet, nominal, any_polled)
            if score < best_score:
                best, best_score, tied = worker, score, 1
            elif score == best_score:
                tied += 1
                if self._rng.randrange(tied) == 0:  # keeps each tie with chance 1/k: uniform over ties
                    best = worker
        self._since_poll_tokens[best] = self._since_poll_tokens.get(best, 0) + self._params.mean_prefill_tokens
        return best

    def _score(self, worker: int, fleet: FleetView, nominal_tok_s: float, any_polled: bool) -> float:
        load = self._loads.get(worker)
        p = self._params
        if load is None:
            if any_polled:  # peers report: this one's in-flight at the fleet's nominal throughput
                return fleet.in_flight[worker] * p.mean_prefill_tokens / nominal_tok_s
            return float(fleet.in_flight[worker])
        queued = load.waiting_uncached_tokens or load.waiting_reqs * p.mean_prefill_tokens
        throughput = load.gen_throughput_tok_s if load.gen_throughput_tok_s > 0 else p.default_throughput_tok_s
        usage = min(max(load.token_usage, 0.0), 0.999)
        return (queued + self._since_poll_tokens.get(worker, 0)) / throughput + p.kv_pressure_weight_s * usage / (
            1.0 - usage
        )
