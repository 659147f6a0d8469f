"""A failed weekly run leaves a notice in the file and at the webhook named by the environment; a webhook that is
down (refused, answering 500, hanging) loses no notice: it is retried, kept in the outbox and POSTed later."""

from __future__ import annotations

import time
from pathlib import Path

import dagster as dg
import orjson
import pytest

from assets.resources import WarehouseResource
from pipelines.definitions import WEEKLY_JOB, build_definitions
from pipelines.failure_notice import (
    NOTICE_FILE_ENV,
    WEBHOOK_URL_ENV,
    FailureNotice,
    NoticeChannels,
    WebhookPolicy,
    failure_notice_sensor,
    outbox_dir,
)
from pipelines.regression_notice import build_regression_notice_sensor
from webhook_collector import closed_port, start_webhook

SECRET_URL_PARTS = ("PATHSECRET", "QUERYSECRET")


@pytest.fixture(scope="module")
def failed_run(tmp_path_factory):
    """A run of the weekly job that failed (a scenario whose trace does not exist), its instance and warehouse."""
    tmp_path = tmp_path_factory.mktemp("failed")
    scenarios = tmp_path / "scenarios.yaml"
    scenarios.write_text(
        "scenarios:\n  - name: broken\n    trace: workloads/traces/missing.jsonl\n    format: mooncake\n"
        "    start_s: 0\n    duration_s: 1\n    speedup: 1\n    endpoint: v3-8xh200\n"
        "    slo: {ttft_ms: 2000, tpot_ms: 100}\n"
    )
    defs = build_definitions(scenarios_path=scenarios, warehouse_root=tmp_path / "warehouse")
    with dg.instance_for_test() as instance:
        key = dg.MultiPartitionKey({"week": "2026-11-16", "scenario": "broken"})
        result = defs.resolve_job_def(WEEKLY_JOB).execute_in_process(
            partition_key=key, instance=instance, raise_on_error=False
        )
        assert not result.success
        yield instance, result, tmp_path / "warehouse"


def _notice_failure(failed_run, warehouse_root) -> None:
    """One evaluation of the failure_notice sensor for the failed run."""
    instance, result, _warehouse = failed_run
    failure = next(e for e in result.all_events if e.event_type == dg.DagsterEventType.RUN_FAILURE)
    context = dg.build_run_status_sensor_context(
        sensor_name="failure_notice",
        dagster_event=failure,
        dagster_instance=instance,
        dagster_run=result.dagster_run,
        resources={"warehouse": WarehouseResource(root=str(warehouse_root))},
    ).for_run_failure()
    failure_notice_sensor(context)


def _lines(path) -> list[bytes]:
    return path.read_bytes().splitlines() if path.exists() else []


def _outbox(warehouse_root) -> list[bytes]:
    folder = outbox_dir(warehouse_root)
    return [p.read_bytes() for p in sorted(folder.glob("*.json"))] if folder.exists() else []


def test_failed_run_is_noticed_in_file_and_webhook(failed_run, tmp_path, monkeypatch):
    webhook = start_webhook()
    notice_file = tmp_path / "notices" / "failures.jsonl"
    monkeypatch.setenv(NOTICE_FILE_ENV, str(notice_file))
    monkeypatch.setenv(WEBHOOK_URL_ENV, webhook.url())
    try:
        _notice_failure(failed_run, tmp_path / "warehouse")
    finally:
        webhook.stop()

    result = failed_run[1]
    notice = orjson.loads(notice_file.read_bytes().splitlines()[-1])
    assert notice["run_id"] == result.run_id
    assert notice["job"] == WEEKLY_JOB
    assert "broken" in notice["partition"] and "2026-11-16" in notice["partition"]
    assert notice["message"]
    assert [orjson.loads(b)["run_id"] for b in webhook.delivered] == [result.run_id]
    assert _outbox(tmp_path / "warehouse") == []


def test_with_no_channel_set_the_notice_lands_in_the_instance_folder(failed_run, tmp_path, monkeypatch):
    # `make dagster` sets neither variable: the README's .dagster_home/notices.jsonl, never "sent nowhere".
    monkeypatch.delenv(NOTICE_FILE_ENV, raising=False)
    monkeypatch.delenv(WEBHOOK_URL_ENV, raising=False)
    instance = failed_run[0]
    notices = Path(instance.root_directory) / "notices.jsonl"
    before = _lines(notices)
    _notice_failure(failed_run, tmp_path / "warehouse")
    (line,) = _lines(notices)[len(before) :]
    assert orjson.loads(line)["run_id"] == failed_run[1].run_id


def test_a_refused_webhook_keeps_the_notice_in_the_file_and_the_outbox_until_it_is_back(
    failed_run, tmp_path, monkeypatch, capfd
):
    port = closed_port()
    notice_file = tmp_path / "failures.jsonl"
    warehouse_root = tmp_path / "warehouse"
    monkeypatch.setenv(NOTICE_FILE_ENV, str(notice_file))
    monkeypatch.setenv(WEBHOOK_URL_ENV, f"http://127.0.0.1:{port}/hook/PATHSECRET?token=QUERYSECRET")

    _notice_failure(failed_run, warehouse_root)  # does not raise: the notice is kept, not lost
    [line] = _lines(notice_file)
    assert _outbox(warehouse_root) == [line]
    logged = capfd.readouterr().err  # Dagster's log handler writes to stderr
    assert f"webhook at http://127.0.0.1:{port} failed after 3 attempt(s)" in logged
    assert str(outbox_dir(warehouse_root)) in logged
    assert not any(secret in logged for secret in SECRET_URL_PARTS)

    # The webhook is back: the regression_notice sensor's next tick (no new report) POSTs what was kept.
    webhook = start_webhook(port=port)
    try:
        with dg.instance_for_test() as instance:
            resources = {"warehouse": WarehouseResource(root=str(warehouse_root))}
            sensor = build_regression_notice_sensor(dg.define_asset_job("weekly_benchmark"), lambda key: {})
            sensor(dg.build_sensor_context(instance=instance, resources=resources))
            sensor(dg.build_sensor_context(instance=instance, resources=resources))
    finally:
        webhook.stop()
    assert webhook.delivered == [line]  # once: the second tick found the outbox empty
    assert _outbox(warehouse_root) == []
    assert _lines(notice_file) == [line]  # the file channel is not written again


def test_a_webhook_answering_500_is_retried_within_the_tick(failed_run, tmp_path, monkeypatch):
    webhook = start_webhook(statuses=(500, 500))
    notice_file = tmp_path / "failures.jsonl"
    monkeypatch.setenv(NOTICE_FILE_ENV, str(notice_file))
    monkeypatch.setenv(WEBHOOK_URL_ENV, webhook.url())
    try:
        _notice_failure(failed_run, tmp_path / "warehouse")
    finally:
        webhook.stop()
    [line] = _lines(notice_file)
    assert webhook.posts == 3 and webhook.delivered == [line]
    assert _outbox(tmp_path / "warehouse") == []


def test_a_hanging_webhook_is_given_up_within_the_tick_budget(tmp_path):
    webhook = start_webhook(hang=True)
    notice_file = tmp_path / "failures.jsonl"
    environ = {NOTICE_FILE_ENV: str(notice_file), WEBHOOK_URL_ENV: webhook.url()}
    policy = WebhookPolicy(attempts=2, timeout_s=0.3, backoff_s=0.1, tick_budget_s=1.0)
    channels = NoticeChannels(outbox_dir(tmp_path / "warehouse"), environ=environ, policy=policy)
    notices = [FailureNotice(f"run-{i}", WEEKLY_JOB, None, None, 0.0, "run failed") for i in range(3)]
    started_s = time.monotonic()
    try:
        deliveries = [channels.send(notice) for notice in notices]
    finally:
        webhook.stop()
    elapsed_s = time.monotonic() - started_s
    # Two POSTs of 0.3 s and one wait of 0.1 s for the first notice; the webhook is down for the rest of the tick.
    # Unbounded, three notices would take 3 x (2 x 0.3 + 0.1) = 2.1 s; the budget holds the tick to 1 s (and the
    # writes of the file and the outbox).
    assert elapsed_s < policy.tick_budget_s + 0.5
    assert webhook.posts == 2
    assert all(not d.posted and d.kept_in is not None for d in deliveries)
    assert "no answer within 0.3 s" in (deliveries[0].failure or "")
    assert _lines(notice_file) == _outbox(tmp_path / "warehouse")  # every notice in the file and in the outbox
    assert len(_lines(notice_file)) == 3


def test_a_failed_workload_starts_no_endpoint(failed_run):
    """The endpoint waits for the workload: when the workload step fails no server is left running."""
    _instance, result, warehouse_root = failed_run
    started = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_START]
    assert not any(e.step_key.endswith("start_endpoint") for e in started)
    assert not (warehouse_root / "runs" / "week=2026-11-16").exists()  # no run dir, no server log


FAST = WebhookPolicy(attempts=2, timeout_s=0.5, backoff_s=0.1, tick_budget_s=3.0)


def _notices(count: int) -> list[FailureNotice]:
    return [FailureNotice(f"run-{i}", WEEKLY_JOB, None, None, 0.0, "run failed") for i in range(count)]


def test_a_webhook_answering_302_delivers_nothing_and_the_notice_is_kept(tmp_path):
    # A client that follows the redirect sends a body-less GET, which the landing answers 200: not a delivery.
    webhook = start_webhook(statuses=(302, 302))
    environ = {WEBHOOK_URL_ENV: webhook.url("/hook/PATHSECRET?token=QUERYSECRET")}
    try:
        [delivery] = [NoticeChannels(outbox_dir(tmp_path), environ=environ, policy=FAST).send(n) for n in _notices(1)]
    finally:
        webhook.stop()
    assert (webhook.posts, webhook.gets, webhook.delivered) == (2, 0, [])
    assert not delivery.posted and delivery.kept_in is not None and len(_outbox(tmp_path)) == 1
    assert "HTTP 302, a redirect: not followed" in (delivery.failure or "")
    assert not any(secret in delivery.describe() for secret in SECRET_URL_PARTS)


def test_a_full_disk_under_the_notice_file_does_not_stop_the_post(failed_run, tmp_path, monkeypatch, capfd):
    # /dev/full: every write to it fails with ENOSPC, as a notice file on a full disk does.
    webhook = start_webhook()
    monkeypatch.setenv(NOTICE_FILE_ENV, "/dev/full")
    monkeypatch.setenv(WEBHOOK_URL_ENV, webhook.url())
    try:
        _notice_failure(failed_run, tmp_path / "warehouse")  # does not raise
    finally:
        webhook.stop()
    assert [orjson.loads(b)["run_id"] for b in webhook.delivered] == [failed_run[1].run_id]
    logged = capfd.readouterr().err
    assert "not written to the notice file /dev/full: No space left on device; POSTed to the webhook" in logged


def test_a_full_disk_and_a_failing_webhook_keep_the_notice_in_the_outbox(tmp_path):
    webhook = start_webhook(statuses=(500, 500, 204))
    environ = {NOTICE_FILE_ENV: "/dev/full", WEBHOOK_URL_ENV: webhook.url()}
    try:
        [delivery] = [NoticeChannels(outbox_dir(tmp_path), environ=environ, policy=FAST).send(n) for n in _notices(1)]
        assert webhook.posts == 2 and webhook.delivered == []
        assert delivery.written_to is None and "/dev/full" in (delivery.file_failure or "")
        [kept] = _outbox(tmp_path)
        # The next tick POSTs it.
        assert NoticeChannels(outbox_dir(tmp_path), environ=environ, policy=FAST).retry_outbox() == (1, 0)
    finally:
        webhook.stop()
    assert webhook.delivered == [kept] and _outbox(tmp_path) == []


def test_a_full_disk_with_no_webhook_fails_naming_the_file(tmp_path):
    channels = NoticeChannels(outbox_dir(tmp_path), environ={NOTICE_FILE_ENV: "/dev/full"}, policy=FAST)
    with pytest.raises(OSError, match="notice file /dev/full: No space left on device"):
        channels.send(_notices(1)[0])


def test_a_webhook_dribbling_its_status_line_is_cut_at_the_deadline_and_the_notice_kept(tmp_path):
    # A byte every 0.1 s: a timeout per socket read never fires; the POST's deadline does.
    webhook = start_webhook(dribble_s=0.1)
    channels = NoticeChannels(outbox_dir(tmp_path), environ={WEBHOOK_URL_ENV: webhook.url()}, policy=FAST)
    started_s = time.monotonic()
    try:
        deliveries = [channels.send(notice) for notice in _notices(3)]
    finally:
        webhook.stop()
    elapsed_s = time.monotonic() - started_s
    # Two POSTs cut at 0.5 s each and a wait of 0.1 s (about 1.1 s), then the webhook is down for the rest of the
    # tick; what is promised is the tick's budget (a status line dribbled whole would take seconds a POST).
    assert elapsed_s < FAST.tick_budget_s
    assert webhook.posts == 2 and webhook.delivered == []
    assert all(not d.posted and d.kept_in is not None for d in deliveries) and len(_outbox(tmp_path)) == 3
    assert "no answer within 0.5 s" in (deliveries[0].failure or "")
