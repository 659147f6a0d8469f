"""A demo stopped before `dagster job backfill` printed its id still finds its backfill to cancel (demo_run._backfill_of):
under load the daemon may have submitted every run of it, so the backfill reads COMPLETED while its runs queue."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import dagster as dg
from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill

from pipelines.demo.demo_run import _backfill_of

KEYS = ["chat-v3-h200|2026-11-30", "chat-v3-h200-canary|2026-11-30"]


def _backfill(instance: dg.DagsterInstance, backfill_id: str, status: BulkActionStatus, at_s: float, keys=KEYS):
    instance.add_backfill(
        PartitionBackfill(
            backfill_id, status, from_failure=False, tags={}, backfill_timestamp=at_s, partition_names=keys
        )  # fmt: skip
    )


def test_a_completed_backfill_of_the_demos_keys_since_it_submitted_is_found(tmp_path):
    with dg.DagsterInstance.local_temp(str(tmp_path)) as instance:
        now_s = time.time()
        since = datetime.fromtimestamp(now_s - 5, timezone.utc)
        _backfill(instance, "earlier", BulkActionStatus.COMPLETED, now_s - 3600)  # a previous demo's, same keys
        assert _backfill_of(instance, KEYS, since) is None
        _backfill(instance, "other-keys", BulkActionStatus.REQUESTED, now_s - 1, keys=KEYS[:1])
        _backfill(instance, "ours", BulkActionStatus.COMPLETED, now_s)  # every run submitted, some still queued
        assert _backfill_of(instance, KEYS, since) == "ours"
        assert _backfill_of(instance, KEYS, since + timedelta(seconds=10)) is None
