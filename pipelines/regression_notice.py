"""Regression notices: a `regression` verdict of weekly_trends is told to people through the same channel as a
failed run (pipelines/failure_notice.py: a JSON line in $COSTBENCH_FAILURE_NOTICE_FILE and/or a POST to
$COSTBENCH_FAILURE_WEBHOOK_URL), one notice per metric that regressed.

The sensor watches the weekly report's materializations (the report is built after weekly_trends, and a
regression does not block it): for each newly reported (week, scenario) it reads that partition's
weekly_trends rows and sends what regressed, with the size of the change, the threshold, the week's
interval and the report's path. Its cursor is the last materialization it handled, so a notice is sent
once per materialization (a re-run week that still regresses is told again). It moves past a report only
once every notice of it is written to the notice file (when set) and POSTed or kept in the outbox (when a
webhook is set); each tick first POSTs again what the outbox keeps (pipelines/failure_notice.py), failure
notices included.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from datetime import date

import dagster as dg

from assets.resources import WarehouseResource
from pipelines.failure_notice import NoticeChannels, outbox_dir
from warehouse.marts.judged_metrics import judged_metric
from warehouse.marts.mart_rows import WeeklyTrendRow

REPORT_ASSET = dg.AssetKey("weekly_report")


@dataclass(frozen=True, slots=True)
class RegressionNotice:
    kind: str  # "regression" (failure notices have no kind)
    week_start: str  # Monday of the week, YYYY-MM-DD
    scenario: str
    role: str | None  # the scenario's role (canary: only the runtime changed)
    endpoint: str
    config_fingerprint: str | None
    metric: str  # the weekly_trends metric that regressed
    # The figures are those of warehouse/marts/judged_metrics.py's reading: a regressed metric has every one.
    value: float | None  # this week's value
    baseline: float | None  # the baseline's (median of the earlier weeks)
    change: float | None  # value against baseline, in change_unit
    change_unit: str  # "%" or "points"
    threshold: float | None  # the rule's threshold on the change, same unit
    interval_low: float | None  # this week's 95% block-bootstrap interval of the metric
    interval_high: float | None
    reason: str  # the rule's own sentence (weekly_trends.regression_reasons)
    report_path: str | None  # the week's HTML report
    run_id: str | None  # the Dagster run that built the report
    noticed_wall_s: float  # epoch seconds when the notice was made


def regression_notices(
    row: WeeklyTrendRow, report_path: str | None, run_id: str | None = None, now_s: float | None = None
) -> list[RegressionNotice]:
    """One notice per metric that regressed in a weekly_trends row (none unless its verdict is 'regression')."""
    if row.regression_verdict != "regression" or not row.regressed_metrics:
        return []
    reasons = json.loads(row.regression_reasons or "[]")
    noticed = time.time() if now_s is None else now_s
    notices = []
    for name in json.loads(row.regressed_metrics):
        metric = judged_metric(name)
        notices.append(
            RegressionNotice(
                kind="regression",
                week_start=row.week_start.isoformat(),
                scenario=row.scenario,
                role=row.role,
                endpoint=row.endpoint,
                config_fingerprint=row.config_fingerprint,
                metric=name,
                change_unit=metric.change_unit,
                **asdict(metric.reading(row)),  # value, baseline, change, threshold, interval_low, interval_high
                reason=next((r for r in reasons if r.startswith(name + " ")), ""),
                report_path=report_path,
                run_id=run_id,
                noticed_wall_s=noticed,
            )
        )
    return notices


def _week_and_scenario(partition_key: str) -> tuple[str, str]:
    # A (week, scenario) multi-partition key: its two values joined by "|"; the week is the ISO date.
    first, second = partition_key.split("|")
    return (first, second) if _is_date(first) else (second, first)


def _is_date(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


@dg.sensor(
    name="regression_notice",
    minimum_interval_seconds=5,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Sends every regression verdict of a newly reported week to the failure-notice file and/or webhook.",
)
def regression_notice_sensor(context: dg.SensorEvaluationContext, warehouse: WarehouseResource) -> dg.SkipReason:
    channels = NoticeChannels(outbox_dir(warehouse.root_path()))
    retried, kept = channels.retry_outbox()
    if retried:
        context.log.info(f"{retried} notice(s) kept in {channels.outbox} POSTed to the webhook")
    if kept:
        why = channels.webhook_failure or "no webhook is configured"
        context.log.warning(f"{kept} notice(s) still kept in {channels.outbox}: {why}")
    after = int(context.cursor) if context.cursor else None
    records = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=REPORT_ASSET, after_storage_id=after), limit=100, ascending=True
    ).records
    if not records:
        return dg.SkipReason("no new weekly report")
    trends = warehouse.warehouse().weekly_trends()
    told = 0
    for record in records:
        if record.partition_key is None:
            continue
        week, scenario = _week_and_scenario(record.partition_key)
        materialization = record.asset_materialization
        report = materialization.metadata.get("report") if materialization is not None else None
        report_path = str(report.value) if report is not None else None
        for row in trends:
            if row.week_start.isoformat() == week and row.scenario == scenario:
                for notice in regression_notices(row, report_path, record.run_id):
                    delivery = channels.send(notice)  # raises when the notice could not be kept: cursor stays
                    told += 1
                    log = context.log.warning if delivery.kept_in else context.log.info
                    log(
                        f"regression notice: {notice.scenario} week {notice.week_start} {notice.metric} "
                        f"{notice.change:+.1f} {notice.change_unit}: {delivery.describe()}"
                    )
        context.update_cursor(str(record.storage_id))
    return dg.SkipReason(f"{told} regression notice(s) sent for {len(records)} weekly report(s)")
