"""A failed weekly run leaves a notice in the file and at the webhook named by the environment."""

from __future__ import annotations

import dagster as dg
import orjson

from pipelines.definitions import WEEKLY_JOB, build_definitions
from pipelines.failure_notice import NOTICE_FILE_ENV, WEBHOOK_URL_ENV, failure_notice_sensor
from webhook_collector import start_webhook


def test_failed_run_is_noticed_in_file_and_webhook(tmp_path, monkeypatch):
    # A scenario whose trace does not exist: the workload step fails, so the run fails.
    scenarios = tmp_path / "scenarios.yaml"
    scenarios.write_text(
        "scenarios:\n  - name: broken\n    trace: workloads/traces/missing.jsonl\n    format: mooncake\n"
        "    start_s: 0\n    duration_s: 1\n    speedup: 1\n    endpoint: v3-8xh200\n"
        "    slo: {ttft_ms: 2000, tpot_ms: 100}\n"
    )
    server, bodies = start_webhook()
    notice_file = tmp_path / "notices" / "failures.jsonl"
    monkeypatch.setenv(NOTICE_FILE_ENV, str(notice_file))
    monkeypatch.setenv(WEBHOOK_URL_ENV, f"http://127.0.0.1:{server.server_port}/hook")

    defs = build_definitions(scenarios_path=scenarios, warehouse_root=tmp_path / "warehouse")
    with dg.instance_for_test() as instance:
        key = dg.MultiPartitionKey({"week": "2026-11-16", "scenario": "broken"})
        result = defs.resolve_job_def(WEEKLY_JOB).execute_in_process(
            partition_key=key, instance=instance, raise_on_error=False
        )
        assert not result.success
        failure = next(e for e in result.all_events if e.event_type == dg.DagsterEventType.RUN_FAILURE)
        context = dg.build_run_status_sensor_context(
            sensor_name="failure_notice",
            dagster_event=failure,
            dagster_instance=instance,
            dagster_run=result.dagster_run,
        ).for_run_failure()
        failure_notice_sensor(context)
    server.shutdown()

    notice = orjson.loads(notice_file.read_bytes().splitlines()[-1])
    assert notice["run_id"] == result.run_id
    assert notice["job"] == WEEKLY_JOB
    assert "broken" in notice["partition"] and "2026-11-16" in notice["partition"]
    assert notice["message"]
    assert [orjson.loads(b)["run_id"] for b in bodies] == [result.run_id]


def test_a_failed_workload_starts_no_endpoint(tmp_path):
    """The endpoint waits for the workload: when the workload step fails no server is left running."""
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
    started = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_START]
    assert not any(e.step_key.endswith("start_endpoint") for e in started)
    assert not (tmp_path / "warehouse" / "runs" / "week=2026-11-16").exists()  # no run dir, no server log
