"""Failure notices for the unattended weekly job: a JSON line in a file, or a POST to a webhook. Regression
verdicts take the same channel (pipelines/regression_notice.py; their JSON has "kind": "regression").

Where they go is named by environment variables, read when a notice is sent (never at import):
COSTBENCH_FAILURE_NOTICE_FILE (a path; one JSON object per line is appended) and/or
COSTBENCH_FAILURE_WEBHOOK_URL (receives the same JSON object as the body of a POST).
"""

from __future__ import annotations

import os
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import orjson

NOTICE_FILE_ENV = "COSTBENCH_FAILURE_NOTICE_FILE"
WEBHOOK_URL_ENV = "COSTBENCH_FAILURE_WEBHOOK_URL"


@dataclass(frozen=True, slots=True)
class FailureNotice:
    run_id: str
    job: str
    partition: str | None
    endpoint: str | None
    noticed_wall_s: float  # epoch seconds when the sensor saw the failure
    message: str


def deliver(notice: Any, environ: Mapping[str, str] | None = None) -> list[str]:
    """Sends the notice (a FailureNotice, or a regression notice: pipelines/regression_notice.py) everywhere
    configured; returns where it went (empty: nowhere configured)."""
    environ = os.environ if environ is None else environ
    body = orjson.dumps(asdict(notice))
    sent = []
    if path := environ.get(NOTICE_FILE_ENV):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "ab") as out:
            out.write(body + b"\n")
        sent.append(path)
    if url := environ.get(WEBHOOK_URL_ENV):
        request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(request, timeout=10):
            pass
        sent.append("webhook")  # the URL may carry a token: never echo it
    return sent


@dg.run_failure_sensor(
    name="failure_notice",
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=f"Writes a notice for every failed run to ${NOTICE_FILE_ENV} and/or POSTs it to ${WEBHOOK_URL_ENV}.",
)
def failure_notice_sensor(context: dg.RunFailureSensorContext) -> None:
    run = context.dagster_run
    notice = FailureNotice(
        run_id=run.run_id,
        job=run.job_name,
        partition=run.tags.get("dagster/partition"),
        endpoint=run.tags.get("costbench/endpoint"),
        noticed_wall_s=time.time(),
        message=context.failure_event.message or "run failed",
    )
    sent = deliver(notice)
    context.log.info(f"failure notice for run {run.run_id} sent to {sent or 'nowhere (no destination configured)'}")
