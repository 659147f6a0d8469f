"""Regression notices: a verdict of weekly_trends worth a person's time is told through the same channel as a
failed run (pipelines/failure_notice.py: a JSON line in $COSTBENCH_FAILURE_NOTICE_FILE and/or a POST to
$COSTBENCH_FAILURE_WEBHOOK_URL), one notice per metric.

Who is told, and in which week, is the notice rule (warehouse/marts/notice_rule.py): a regression episode is told
once, in the week that starts it (regression or sustained while its series did not regress the week before), not
again for each `sustained` week while it goes on; a `drift` (a change point over the canary's weeks,
warehouse/marts/change_points.py) is told the week it is flagged, with the week it started.

Confirm before telling (Chromium Pinpoint's idea): a week that starts an episode is not told at once. The sensor
launches a confirmation run of that (week, scenario) through the same run queue (the weekly job, tagged
CONFIRMS_TAG with the run it checks); its replays replace the week's, and only if the rule still tells the week is
the notice sent, saying which run confirmed it. A confirmation that does not agree is logged, and nobody is paged;
the week after it, judged again, may then start the episode: if its report was already handled (as `sustained`,
so nobody was told), it gets its own confirmation run then, so the episode is not lost.

The sensor watches the weekly report's materializations (the report is built after weekly_trends, and a
regression does not block it): for each newly reported (week, scenario) it reads that partition's
weekly_trends rows, and the report's `confirms` metadata (the run a confirmation run checks; assets/
trend_assets.py copies it from the run's tag). Its cursor is the last materialization it handled, so a report is
acted on once. It moves past a report only
once every notice of it is written to the notice file (when set) and POSTed or kept in the outbox (when a
webhook is set); each tick first POSTs again what the outbox keeps (pipelines/failure_notice.py), failure
notices included.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import date, timedelta

import dagster as dg

from assets.resources import WarehouseResource
from assets.trend_assets import CONFIRMS_METADATA, CONFIRMS_TAG
from pipelines.failure_notice import NoticeChannels, default_notice_file, outbox_dir
from warehouse.marts.judged_metrics import judged_metric
from warehouse.marts.mart_rows import WeeklyTrendRow
from warehouse.marts.notice_rule import EPISODE_VERDICTS, NoticeKind, row_notice, series_of
from warehouse.report.first_screen import verdict_anchor

REPORT_ASSET = dg.AssetKey("weekly_report")
# How weekly_trends.sql's reasons begin the line naming a week's change of configuration.
CONFIGURATION_CHANGED = "configuration changed this week:"

# The queued run coordinator starts higher priorities first (Dagster's run-queue tag; the default is 0).
PRIORITY_TAG = "dagster/priority"
CONFIRMATION_PRIORITY = "1"


@dataclass(frozen=True, slots=True)
class RegressionNotice:
    kind: str  # what is told (notice_rule.NoticeKind): "regression" (an episode starts, confirmed) or "drift"
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
    # The week's change of configuration, as the reasons say it (the flags that changed and the revision's note);
    # None: the configuration did not change against the week before.
    configuration_change: str | None
    report_path: str | None  # the week's HTML report
    report_anchor: str  # the id of the row's line in the report's verdicts: open report_path#report_anchor
    run_id: str | None  # the Dagster run that built the report (for a regression: the confirmation run)
    confirms_run_id: str | None  # regression: the run whose first verdict the confirmation run agreed with
    drift_start_week: str | None  # drift: the Monday of the first week after the change point
    noticed_wall_s: float  # epoch seconds when the notice was made


def regression_notices(
    row: WeeklyTrendRow,
    kind: NoticeKind,
    report_path: str | None,
    run_id: str | None = None,
    now_s: float | None = None,
    confirms_run_id: str | None = None,
) -> list[RegressionNotice]:
    """One notice of `kind` per metric the weekly_trends row regressed on (a regression) or drifted on (a drift).
    Whether the row is told at all is the notice rule's call (warehouse/marts/notice_rule.py)."""
    names = json.loads((row.regressed_metrics if kind is NoticeKind.REGRESSION else row.drift_metrics) or "[]")
    reasons = json.loads(row.regression_reasons or "[]")
    noticed = time.time() if now_s is None else now_s
    notices = []
    for name in names:
        metric = judged_metric(name)
        notices.append(
            RegressionNotice(
                kind=kind.value,
                week_start=row.week_start.isoformat(),
                scenario=row.scenario,
                role=row.role,
                endpoint=row.endpoint,
                config_fingerprint=row.config_fingerprint,
                metric=name,
                change_unit=metric.change_unit,
                **asdict(metric.reading(row)),  # value, baseline, change, threshold, interval_low, interval_high
                reason=next((r for r in reasons if r.startswith(name + " ")), ""),
                configuration_change=next((r for r in reasons if r.startswith(CONFIGURATION_CHANGED)), None),
                report_path=report_path,
                report_anchor=verdict_anchor(asdict(row)),
                run_id=run_id,
                confirms_run_id=confirms_run_id,
                drift_start_week=row.drift_start_week.isoformat() if row.drift_start_week else None,
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


def build_regression_notice_sensor(
    job: dg.UnresolvedAssetJobDefinition, tags_for: Callable[[str], dict[str, str]]
) -> dg.SensorDefinition:
    """The sensor, launching confirmation runs of `job` (the weekly job) with `tags_for(partition_key)`'s tags: the
    same run queue, replay slot and scenario limits as the schedule's runs."""

    @dg.sensor(
        name="regression_notice",
        job=job,
        minimum_interval_seconds=5,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Confirms the week that starts a regression episode with a rerun of it, then tells the "
        "confirmed ones (once an episode) and drifts to the failure-notice file and/or webhook.",
    )
    def regression_notice(context: dg.SensorEvaluationContext, warehouse: WarehouseResource) -> dg.SensorResult:
        return _evaluate(context, warehouse, tags_for)

    return regression_notice


def _evaluate(
    context: dg.SensorEvaluationContext, warehouse: WarehouseResource, tags_for: Callable[[str], dict[str, str]]
) -> dg.SensorResult:
    channels = NoticeChannels(outbox_dir(warehouse.root_path()), default_notice_file(context.instance))
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
        return dg.SensorResult(skip_reason="no new weekly report")
    trends = warehouse.warehouse().weekly_trends()
    told = 0
    confirming: dict[str | None, dg.RunRequest] = {}  # the confirmation runs, by run key: one a report
    for record in records:
        if record.partition_key is None:
            continue
        week, scenario = _week_and_scenario(record.partition_key)
        metadata = record.asset_materialization.metadata if record.asset_materialization is not None else {}
        report = metadata.get("report")
        report_path = str(report.value) if report is not None else None
        confirms = metadata.get(CONFIRMS_METADATA)
        confirms_run = str(confirms.value) if confirms is not None and confirms.value else None
        for row in trends:
            if row.week_start.isoformat() != week or row.scenario != scenario:
                continue
            verdict, kind = row.regression_verdict, row_notice(row, trends)
            if confirms_run is not None and verdict not in EPISODE_VERDICTS:
                context.log.info(f"{scenario} week {week}: the confirmation run does not agree ({verdict}): "
                                 f"the regression of run {confirms_run} is not told")  # fmt: skip
                for request in _episode_handed_on(context, record.storage_id, row, trends, tags_for):
                    confirming[request.run_key] = request
                    context.log.info(f"{scenario} week {week}: the week after now starts the episode: "
                                     f"confirmation run of {request.partition_key} requested")  # fmt: skip
            if kind is None:
                if verdict in EPISODE_VERDICTS:
                    context.log.info(f"{scenario} week {week}: {verdict}, the episode was told the week it started")
                continue
            if kind is NoticeKind.REGRESSION and confirms_run is None:
                request = _confirmation(record.partition_key, record.run_id, record.storage_id, tags_for)
                confirming[request.run_key] = request
                context.log.info(f"{scenario} week {week}: {verdict}, confirmation run requested before telling")
                continue
            for notice in regression_notices(row, kind, report_path, record.run_id, confirms_run_id=confirms_run):
                delivery = channels.send(notice)  # raises when the notice could not be kept: cursor stays
                told += 1
                log = context.log.warning if delivery.troubled else context.log.info
                log(
                    f"{notice.kind} notice: {notice.scenario} week {notice.week_start} {notice.metric} "
                    f"{_change(notice)}: {delivery.describe()}"
                )
        context.update_cursor(str(record.storage_id))
    return dg.SensorResult(  # the cursor is context's, moved report by report above
        run_requests=list(confirming.values()),
        skip_reason=None if confirming else f"{told} notice(s) sent for {len(records)} weekly report(s)",
    )


def _change(notice: RegressionNotice) -> str:
    return "" if notice.change is None else f"{notice.change:+.1f} {notice.change_unit}"


def _confirmation(partition_key: str, run_id: str | None, storage_id: int, tags_for) -> dg.RunRequest:
    checks = run_id or f"report-{storage_id}"
    return dg.RunRequest(
        run_key=f"confirm|{partition_key}|{storage_id}",
        partition_key=partition_key,
        # Ahead of the routine runs already queued (a backfill's later weeks): the notice waits on this run.
        tags={**tags_for(partition_key), CONFIRMS_TAG: checks, PRIORITY_TAG: CONFIRMATION_PRIORITY},
    )


def _episode_handed_on(
    context: dg.SensorEvaluationContext,
    storage_id: int,
    row: WeeklyTrendRow,
    trends: list[WeeklyTrendRow],
    tags_for: Callable[[str], dict[str, str]],
) -> list[dg.RunRequest]:
    """A confirmation that does not agree leaves the episode unstarted. The week after it, judged again, may now
    start it (the notice rule); if that week's report was handled already (then `sustained`: nobody was told), its
    confirmation run, as a first regression's. Not reported yet: its report is handled as any other."""
    after = row.week_start + timedelta(days=7)
    if not any(
        r.week_start == after and series_of(r) == series_of(row) and row_notice(r, trends) is NoticeKind.REGRESSION
        for r in trends
    ):
        return []
    key = dg.MultiPartitionKey({"week": after.isoformat(), "scenario": row.scenario})
    handled = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=REPORT_ASSET, asset_partitions=[key], before_storage_id=storage_id),
        limit=1,
        ascending=False,
    ).records
    return [_confirmation(str(key), r.run_id, r.storage_id, tags_for) for r in handled]
