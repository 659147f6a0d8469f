"""A demo stopped before `dagster job backfill` printed its id still finds its backfill to cancel (demo_run._backfill_of):
under load the daemon may have submitted every run of it, so the backfill reads COMPLETED while its runs queue."""

from __future__ import annotations

import time
from dataclasses import fields
from datetime import date, datetime, timedelta, timezone

import dagster as dg
from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill

from pipelines.demo.demo_run import _backfill_of, first_regressions
from warehouse.marts.mart_rows import WeeklyTrendRow

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


def test_the_demos_backfill_is_found_whatever_order_the_cli_stored_its_keys_in(tmp_path):
    """The demo queues the keys in its story's order; `dagster job backfill` stores them in the partitions
    definition's (CI, 2026-12-07: a demo stopped mid-submission did not find its backfill and left two runs queued)."""
    demo_order = ["reasoning-r1-h200-canary|2026-11-30", *KEYS]
    with dg.DagsterInstance.local_temp(str(tmp_path)) as instance:
        now_s = time.time()
        _backfill(instance, "ours", BulkActionStatus.COMPLETED, now_s, keys=sorted(demo_order))
        assert _backfill_of(instance, demo_order, datetime.fromtimestamp(now_s - 5, timezone.utc)) == "ours"


def test_the_demo_waits_for_confirmations_only_of_weeks_its_runs_built():
    """A regression row of a partition whose run failed is an earlier demo's: no confirmation run will come for it
    (every run of one demo failed once, and it waited for one until its stall timeout)."""
    blank: dict[str, object] = {f.name: None for f in fields(WeeklyTrendRow)}

    def row(week: str, scenario: str, verdict: str) -> WeeklyTrendRow:
        values = {"week_start": date.fromisoformat(week), "scenario": scenario, "regression_verdict": verdict}
        return WeeklyTrendRow(**(blank | values))  # type: ignore[arg-type]

    def run(week: str, scenario: str, status: dg.DagsterRunStatus) -> dg.DagsterRun:
        tags = {"dagster/partition/week": week, "dagster/partition/scenario": scenario}
        return dg.DagsterRun(job_name="weekly_benchmark", run_id=f"{week}-{scenario}", status=status, tags=tags)

    rows = [row("2026-11-23", "chat", "regression"), row("2026-11-23", "agent", "regression"),
            row("2026-11-30", "chat", "ok")]  # fmt: skip
    succeeded, failed = dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE
    assert first_regressions(rows, [run("2026-11-23", "chat", succeeded), run("2026-11-23", "agent", failed)]) == 1
    assert first_regressions(rows, [run("2026-11-23", "chat", failed), run("2026-11-23", "agent", failed)]) == 0
    assert first_regressions(rows, [run("2026-11-23", "chat", succeeded), run("2026-11-23", "agent", succeeded)]) == 2
