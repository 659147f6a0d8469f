"""A step waiting for a pool slot (the marts' `warehouse_writer`) waits asleep, not at 100% of a core.

Dagster's in-process executor, when no step can start, sleeps for ActiveExecution.sleep_interval(), which asks the
instance concurrency context how long until its next claim of a pending pool slot. Dagster (1.13) answers min(0,
time to the next claim), which is never positive, so the executor loops without sleeping until the slot frees: a run
waiting its turn for the warehouse keeps a core busy while the refresh it waits for runs (5.6 s of CPU in a 5.7 s
wait, measured on the 2-core machine; dagster-io/dagster#20367 named the bug and was closed unmerged). The claims
themselves are unchanged: Dagster retries a blocked claim 1 s later, 10% longer each time up to 15 s, and this only
sleeps until the next retry is due. Applied on import: every process that loads the code location (run workers
included) imports pipelines/weekly_executor.py, which imports this.
"""

from __future__ import annotations

import time

from dagster._core.execution.plan.instance_concurrency_context import InstanceConcurrencyContext


def _seconds_to_next_claim(self: InstanceConcurrencyContext) -> float:
    """How long until a pending claim is due to be retried: 0 when one is due now or none is pending."""
    timeouts = self._pending_timeouts.values() if self._pending_claims else ()
    return max(0.0, min((ready_at - time.time() for ready_at in timeouts), default=0.0))


InstanceConcurrencyContext.interval_to_next_pending_claim_check = _seconds_to_next_claim  # type: ignore[method-assign]
