"""The regression rule judges the canary, and a regression verdict reaches people through the failure channel once a
confirmation run agrees: a JSON line in the notice file and a POST to a loopback webhook, with what moved, by how
much, the threshold, the week's interval, the report's path and the run that confirmed it. A first regression asks
for that run (through the weekly job, with the partition's tags) and tells nobody; a confirmation that disagrees
tells nobody either. A webhook that is down loses no verdict: it waits in the outbox."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import date, timedelta

import dagster as dg
import orjson
import pytest

from assets.partitions import build_partitions
from assets.resources import WarehouseResource
from assets.trend_assets import CONFIRMS_METADATA, CONFIRMS_TAG
from pipelines.failure_notice import NOTICE_FILE_ENV, WEBHOOK_URL_ENV, outbox_dir
from pipelines.regression_notice import build_regression_notice_sensor
from warehouse.backends.store import Warehouse
from warehouse.marts.mart_rows import WeeklyTrendRow
from warehouse_builders import capacity_context, endpoint, request, run_info, write_run
from webhook_collector import closed_port, start_webhook

WEEKS = [date(2026, 10, 19) + timedelta(days=7 * i) for i in range(4)]
N = 40
SPEC = endpoint()  # 8 GPUs at $2/h: a window of c x 225 s costs c USD
PARTITION_TAGS = {"costbench/endpoint": "v3-8xh200"}
PARTITIONS = build_partitions(["chat-canary", "chat-live"])


@dg.asset(partitions_def=PARTITIONS)
def weekly_report() -> None:
    """Stands for the weekly job's report: what a confirmation run's partitions are checked against."""


WEEKLY = dg.define_asset_job("weekly_benchmark", selection=[weekly_report], partitions_def=PARTITIONS)
regression_notice_sensor = build_regression_notice_sensor(WEEKLY, lambda key: {**PARTITION_TAGS, "for": key})
DEFS = dg.Definitions(assets=[weekly_report], jobs=[WEEKLY], sensors=[regression_notice_sensor])


def _week(store: Warehouse, week: date, scenario: str, role: str, cost_per_request: float) -> None:
    window_s = cost_per_request * N * 225
    run_id = f"{scenario}-{week.isoformat()}"
    records = [request(run_id, f"q{i}", 100.0, 200.0, sent_mono_s=(i + 0.5) * window_s / N - 0.2) for i in range(N)]
    info = run_info(run_id, window_s, requests_total=N, requests_recorded=N, requests_ok=N)
    # At its capacity: the efficiency cost the gate judges moves with the realised one.
    capacity = replace(capacity_context(cost_per_request, usd_per_gpu_hour=SPEC.usd_per_gpu_hour), role=role)
    write_run(store.lake_root, week, scenario, info, SPEC, records, replace(capacity, traffic_share=0.5))


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Warehouse:
    # The same cost rise (+30% in the last week) on a canary and on a live scenario.
    store = Warehouse(tmp_path_factory.mktemp("notice") / "wh")
    for scenario, role in (("chat-canary", "canary"), ("chat-live", "live")):
        for week, cost in zip(WEEKS, (0.10, 0.11, 0.09, 0.13)):
            _week(store, week, scenario, role, cost)
    store.refresh()
    return store


def _row(rows: list[WeeklyTrendRow], scenario: str, week: date) -> WeeklyTrendRow:
    [row] = [r for r in rows if r.scenario == scenario and r.week_start == week]
    return row


def test_the_regression_rule_judges_the_canary_and_leaves_live_traffic_to_the_trend(warehouse):
    rows = warehouse.weekly_trends()
    canary, live = _row(rows, "chat-canary", WEEKS[3]), _row(rows, "chat-live", WEEKS[3])
    assert canary.role == "canary" and canary.regression_verdict == "regression"
    assert json.loads(canary.regressed_metrics) == ["efficiency_cost_per_request_usd"]
    # The live row carries the same cost trend, and no verdict: its traffic moved too.
    assert live.role == "live" and live.realised_cost_change_pct == pytest.approx(canary.realised_cost_change_pct)
    assert live.regression_verdict == "not_judged" and live.regression_reasons is None
    assert all(r.regression_verdict == "not_judged" for r in rows if r.role == "live")
    [run] = [r for r in warehouse.run_summary() if r.run_id == f"chat-live-{WEEKS[3].isoformat()}"]
    assert (run.role, run.traffic_share) == ("live", 0.5)


def _report(instance: dg.DagsterInstance, week: date, scenario: str, path: str, confirms: str | None = None) -> None:
    # A weekly report built; `confirms`: by a confirmation run of that Dagster run (its tag, as the asset records it).
    key = dg.MultiPartitionKey({"week": week.isoformat(), "scenario": scenario})
    metadata = {"report": dg.MetadataValue.path(path), **({CONFIRMS_METADATA: confirms} if confirms else {})}
    instance.report_runless_asset_event(dg.AssetMaterialization("weekly_report", partition=key, metadata=metadata))


def test_a_first_regression_asks_for_a_confirmation_run_and_tells_nobody(warehouse, tmp_path, monkeypatch):
    notice_file = tmp_path / "notices.jsonl"
    monkeypatch.setenv(NOTICE_FILE_ENV, str(notice_file))
    resources = {"warehouse": WarehouseResource(root=str(warehouse.root))}
    with dg.instance_for_test() as instance:
        _report(instance, WEEKS[2], "chat-canary", "report.html")  # ok: nothing to confirm
        _report(instance, WEEKS[3], "chat-canary", "report.html")
        # As the daemon evaluates a tick (its checks of what the sensor returns included).
        context = dg.build_sensor_context(instance=instance, resources=resources, definitions=DEFS)
        result = regression_notice_sensor.evaluate_tick(context)
        [request] = result.run_requests
        again = regression_notice_sensor.evaluate_tick(
            dg.build_sensor_context(instance=instance, resources=resources, cursor=result.cursor, definitions=DEFS)
        )
    key = str(dg.MultiPartitionKey({"week": WEEKS[3].isoformat(), "scenario": "chat-canary"}))
    assert request.partition_key == key
    # Through the same queue as the schedule's runs: the partition's tags, and the run it checks.
    assert request.tags["costbench/endpoint"] == "v3-8xh200" and request.tags["for"] == key
    assert CONFIRMS_TAG in request.tags
    assert request.tags["dagster/priority"] == "1"  # ahead of the routine runs still queued: the notice waits on it
    assert not notice_file.exists()  # nobody is told before the confirmation agrees
    assert again.run_requests == []  # asked for once


def test_a_confirmation_that_does_not_agree_tells_nobody(tmp_path, monkeypatch):
    notice_file = tmp_path / "notices.jsonl"
    monkeypatch.setenv(NOTICE_FILE_ENV, str(notice_file))
    store = Warehouse(tmp_path / "wh")
    # The confirmation's runs replaced the week's: back at the baseline's cost.
    for week, cost in zip(WEEKS, (0.10, 0.11, 0.09, 0.10)):
        _week(store, week, "chat-canary", "canary", cost)
    store.refresh()
    resources = {"warehouse": WarehouseResource(root=str(store.root))}
    with dg.instance_for_test() as instance:
        _report(instance, WEEKS[3], "chat-canary", "report.html", confirms="first-run")
        result = regression_notice_sensor(dg.build_sensor_context(instance=instance, resources=resources))
    assert result.run_requests == [] and not notice_file.exists()


def test_a_regression_verdict_is_sent_to_the_notice_file_and_the_webhook_once(warehouse, tmp_path, monkeypatch):
    webhook = start_webhook()
    notice_file = tmp_path / "notices" / "failures.jsonl"
    monkeypatch.setenv(NOTICE_FILE_ENV, str(notice_file))
    monkeypatch.setenv(WEBHOOK_URL_ENV, webhook.url())
    report = str(warehouse.root / "reports" / f"week={WEEKS[3].isoformat()}.html")
    resources = {"warehouse": WarehouseResource(root=str(warehouse.root))}
    try:
        with dg.instance_for_test() as instance:
            _report(instance, WEEKS[3], "chat-live", report)  # not judged: no notice
            _report(instance, WEEKS[2], "chat-canary", report)  # ok: no notice
            _report(instance, WEEKS[3], "chat-canary", report, confirms="first-run")  # the confirmation agrees
            context = dg.build_sensor_context(instance=instance, resources=resources)
            regression_notice_sensor(context)
            # The cursor moved past what was told: the next tick tells nothing again.
            again = dg.build_sensor_context(instance=instance, resources=resources, cursor=context.cursor)
            regression_notice_sensor(again)
    finally:
        webhook.stop()

    [line] = notice_file.read_bytes().splitlines()
    notice = orjson.loads(line)
    assert notice["kind"] == "regression" and notice["confirms_run_id"] == "first-run"
    assert (notice["scenario"], notice["week_start"], notice["role"]) == ("chat-canary", WEEKS[3].isoformat(), "canary")
    assert notice["metric"] == "efficiency_cost_per_request_usd" and notice["change_unit"] == "%"
    assert notice["change"] == pytest.approx(30.0) and notice["threshold"] == pytest.approx(10.0)
    assert notice["baseline"] == pytest.approx(0.10) and notice["value"] == pytest.approx(0.13)
    assert notice["interval_low"] <= notice["value"] <= notice["interval_high"]
    assert notice["interval_low"] > notice["baseline"]
    assert notice["report_path"] == report and notice["reason"].startswith("efficiency_cost_per_request_usd +30.0%")
    assert notice["configuration_change"] is None  # the same configuration as the week before
    # The row's line in the report's verdicts table, as the report names it.
    assert notice["report_anchor"].startswith("verdict-chat-canary--")
    assert [orjson.loads(b) for b in webhook.delivered] == [notice]


def test_a_regression_verdict_outlives_an_unreachable_webhook(warehouse, tmp_path, monkeypatch, capfd):
    port = closed_port()
    notice_file = tmp_path / "failures.jsonl"
    monkeypatch.setenv(NOTICE_FILE_ENV, str(notice_file))
    monkeypatch.setenv(WEBHOOK_URL_ENV, f"http://127.0.0.1:{port}/hook/PATHSECRET?token=QUERYSECRET")
    resources = {"warehouse": WarehouseResource(root=str(warehouse.root))}
    outbox = outbox_dir(warehouse.root)
    with dg.instance_for_test() as instance:
        _report(instance, WEEKS[3], "chat-canary", "report.html", confirms="first-run")
        tick = dg.build_sensor_context(instance=instance, resources=resources)
        regression_notice_sensor(tick)  # the webhook refuses: no error, the verdict is kept
        [line] = notice_file.read_bytes().splitlines()
        assert [p.read_bytes() for p in outbox.glob("*.json")] == [line]
        assert tick.cursor is not None  # moved on: the verdict is in the outbox, not lost
        logged = capfd.readouterr().err  # Dagster's log handler writes to stderr
        assert f"webhook at http://127.0.0.1:{port} failed" in logged and str(outbox) in logged
        assert "PATHSECRET" not in logged and "QUERYSECRET" not in logged

        # Still down on the next tick: the verdict stays, and the file is not written again.
        regression_notice_sensor(dg.build_sensor_context(instance=instance, resources=resources, cursor=tick.cursor))
        assert len(list(outbox.glob("*.json"))) == 1 and notice_file.read_bytes().splitlines() == [line]

        # Back up: the next tick POSTs it, once.
        webhook = start_webhook(port=port)
        try:
            for _ in range(2):
                regression_notice_sensor(
                    dg.build_sensor_context(instance=instance, resources=resources, cursor=tick.cursor)
                )
        finally:
            webhook.stop()
    assert webhook.delivered == [line]
    assert list(outbox.glob("*.json")) == []


FIVE_WEEKS = [*WEEKS, WEEKS[-1] + timedelta(days=7)]


def _canary_store(path, costs: tuple[float, ...]) -> Warehouse:
    store = Warehouse(path)
    for week, cost in zip(FIVE_WEEKS, costs, strict=True):
        _week(store, week, "chat-canary", "canary", cost)
    store.refresh()
    return store


def _verdicts(store: Warehouse) -> list[str]:
    return [r.regression_verdict for r in sorted(store.weekly_trends(), key=lambda r: r.week_start)]


def test_an_episode_is_told_once_not_again_each_sustained_week(tmp_path, monkeypatch):
    notice_file = tmp_path / "notices.jsonl"
    monkeypatch.setenv(NOTICE_FILE_ENV, str(notice_file))
    store = _canary_store(tmp_path / "wh", (0.10, 0.11, 0.09, 0.13, 0.13))
    assert _verdicts(store)[3:] == ["regression", "sustained"]
    resources = {"warehouse": WarehouseResource(root=str(store.root))}
    with dg.instance_for_test() as instance:
        _report(instance, FIVE_WEEKS[3], "chat-canary", "report.html", confirms="first-run")  # agrees: told
        _report(instance, FIVE_WEEKS[4], "chat-canary", "report.html")  # sustained: the same episode
        result = regression_notice_sensor(dg.build_sensor_context(instance=instance, resources=resources))
    assert result.run_requests == []  # a sustained week is not confirmed either
    notices = [orjson.loads(line) for line in notice_file.read_bytes().splitlines()]
    assert [(n["kind"], n["week_start"]) for n in notices] == [("regression", FIVE_WEEKS[3].isoformat())]


def test_a_confirmation_that_does_not_agree_hands_the_episode_to_the_week_after(tmp_path, monkeypatch):
    # Both weeks reported before the first one's confirmation ran (a backfill): the second was `sustained` then,
    # and told nobody. The confirmation does not agree, so the second week now starts the episode: confirmed in turn.
    notice_file = tmp_path / "notices.jsonl"
    monkeypatch.setenv(NOTICE_FILE_ENV, str(notice_file))
    store = _canary_store(tmp_path / "wh", (0.10, 0.11, 0.09, 0.13, 0.13))
    resources = {"warehouse": WarehouseResource(root=str(store.root))}
    keys = [str(dg.MultiPartitionKey({"week": w.isoformat(), "scenario": "chat-canary"})) for w in FIVE_WEEKS]
    with dg.instance_for_test() as instance:
        _report(instance, FIVE_WEEKS[3], "chat-canary", "report.html")
        _report(instance, FIVE_WEEKS[4], "chat-canary", "report.html")
        first = dg.build_sensor_context(instance=instance, resources=resources)
        assert [r.partition_key for r in regression_notice_sensor(first).run_requests] == [keys[3]]

        _week(store, FIVE_WEEKS[3], "chat-canary", "canary", 0.10)  # the confirmation's replays replace the week's
        store.refresh()
        assert _verdicts(store)[3:] == ["ok", "regression"]
        _report(instance, FIVE_WEEKS[3], "chat-canary", "report.html", confirms="first-run")
        second = dg.build_sensor_context(instance=instance, resources=resources, cursor=first.cursor)
        [request] = regression_notice_sensor(second).run_requests
        assert request.partition_key == keys[4] and CONFIRMS_TAG in request.tags
        assert not notice_file.exists()

        _report(instance, FIVE_WEEKS[4], "chat-canary", "report.html", confirms="second-run")  # agrees: told
        third = dg.build_sensor_context(instance=instance, resources=resources, cursor=second.cursor)
        assert regression_notice_sensor(third).run_requests == []
    notices = [orjson.loads(line) for line in notice_file.read_bytes().splitlines()]
    assert [(n["kind"], n["week_start"], n["confirms_run_id"]) for n in notices] == [
        ("regression", FIVE_WEEKS[4].isoformat(), "second-run")
    ]
