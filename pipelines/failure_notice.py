"""Failure notices for the unattended weekly job: a JSON line in a file, or a POST to a webhook. Regression
verdicts take the same channel (pipelines/regression_notice.py; their JSON has "kind": "regression").

Where they go is named by environment variables, read when a notice is sent (never at import):
COSTBENCH_FAILURE_NOTICE_FILE (a path; one JSON object per line is appended; unset, the Dagster instance's own
notices.jsonl, so `make dagster` and the demo write where the README says) and/or COSTBENCH_FAILURE_WEBHOOK_URL
(receives the same JSON object as the body of a POST).

The file is written first, and the webhook is tried whatever the file's disk says: a write that fails (a full
disk) is reported naming the file, and the notice still goes to the webhook, or to the outbox below when the
webhook does not take it. The webhook gets up to `WebhookPolicy.attempts` POSTs, each bounded in total time
(pipelines/webhook_post.py: connect and answer together, so a status line dribbled a byte at a time is cut), with
a wait between them, all of one sensor tick within `tick_budget_s`, well inside Dagster's 60 s for a tick; once
it has failed in a tick, later notices of that tick are not tried. Only a 2xx answer to the POST itself delivers:
a redirect is not followed, and is a failure. A notice it did not take is kept in the outbox (`outbox_dir`: one
JSON file per notice, under the warehouse, which outlives a code server's pod) and POSTed again, oldest first, on
later ticks until the webhook answers 2xx; then its file is removed. So a notice may reach the webhook twice (a
POST whose answer was lost), never zero times. Logs name the webhook by scheme, host and port only: a webhook URL
carries its secret in the path or the query.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import dagster as dg
import orjson

from assets.resources import WarehouseResource
from common.atomic_file import write_bytes_atomically
from pipelines.webhook_post import post_json

NOTICE_FILE_ENV = "COSTBENCH_FAILURE_NOTICE_FILE"
WEBHOOK_URL_ENV = "COSTBENCH_FAILURE_WEBHOOK_URL"
DEFAULT_NOTICE_FILE = "notices.jsonl"  # in the Dagster instance's folder ($DAGSTER_HOME) when the variable is unset


def default_notice_file(instance: dg.DagsterInstance) -> Path:
    """Where notices go without COSTBENCH_FAILURE_NOTICE_FILE: the instance's folder."""
    return Path(instance.root_directory) / DEFAULT_NOTICE_FILE


@dataclass(frozen=True, slots=True)
class FailureNotice:
    run_id: str
    job: str
    partition: str | None
    endpoint: str | None
    noticed_wall_s: float  # epoch seconds when the sensor saw the failure
    message: str


@dataclass(frozen=True, slots=True)
class WebhookPolicy:
    attempts: int = 3  # POSTs of a new notice in one tick (a kept one gets one a tick)
    timeout_s: float = 5.0  # each POST all told: connect, send, and the answer's status line and headers
    backoff_s: float = 1.0  # the wait before the second POST, doubled before each later one
    tick_budget_s: float = 20.0  # every POST and wait of one tick: Dagster gives a sensor tick 60 s


WEBHOOK_POLICY = WebhookPolicy()


@dataclass(frozen=True, slots=True)
class Delivery:
    written_to: Path | None  # the notice file, when one is configured and the notice was written to it
    posted: bool  # the webhook answered 2xx
    kept_in: Path | None  # the outbox file holding a notice the webhook did not take
    failure: str | None  # why the webhook did not take it (names its host, never its path or query)
    file_failure: str | None = None  # why the notice file could not be written (names the file)

    @property
    def troubled(self) -> bool:
        """A channel failed (the notice is still somewhere: the file, the webhook or the outbox)."""
        return self.kept_in is not None or self.file_failure is not None

    def describe(self) -> str:
        said = [f"written to {self.written_to}"] if self.written_to else []
        if self.file_failure:
            said.append(self.file_failure)
        if self.posted:
            said.append("POSTed to the webhook")
        if self.kept_in:
            said.append(f"not POSTed: {self.failure}; kept in {self.kept_in}, POSTed again on later ticks")
        return "; ".join(said) or f"sent nowhere (neither ${NOTICE_FILE_ENV} nor ${WEBHOOK_URL_ENV} is set)"


def outbox_dir(warehouse_root: Path) -> Path:
    return Path(warehouse_root) / "notices" / "outbox"


class NoticeChannels:
    """The configured channels for one sensor tick (its webhook budget starts when this is made)."""

    def __init__(
        self,
        outbox: Path,
        default_file: Path | None = None,
        environ: Mapping[str, str] | None = None,
        policy: WebhookPolicy = WEBHOOK_POLICY,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        environ = os.environ if environ is None else environ
        self.outbox = Path(outbox)
        self._file = Path(environ[NOTICE_FILE_ENV]) if environ.get(NOTICE_FILE_ENV) else default_file
        self._url = environ.get(WEBHOOK_URL_ENV) or None
        self._policy = policy
        self._clock, self._sleep = clock, sleep
        self._deadline_s = clock() + policy.tick_budget_s
        self.webhook_failure: str | None = None  # set once the webhook has failed this tick

    def send(self, notice: Any) -> Delivery:
        """Sends the notice (a FailureNotice, or a regression notice) everywhere configured: the webhook is tried
        whatever became of the file. Raises OSError, naming the file and the outbox, only when the notice is
        nowhere: the file could not be written, and the webhook is unset or did not take it and the outbox could
        not be written either."""
        body = orjson.dumps(asdict(notice))
        file_failure = self._append(body)
        written_to = self._file if file_failure is None else None
        if self._url is None:
            if file_failure is not None:
                raise OSError(f"notice not delivered: {file_failure}, and ${WEBHOOK_URL_ENV} is not set")
            return Delivery(written_to, False, None, None)
        failure = self._post(body, self._policy.attempts)
        if failure is None:
            return Delivery(written_to, True, None, None, file_failure)
        kept_in = self._keep(body, failure if file_failure is None else f"{failure}; {file_failure}")
        return Delivery(written_to, False, kept_in, failure, file_failure)

    def _append(self, body: bytes) -> str | None:
        """Appends the notice's line to the notice file; None once written (or when no file is set), else why not."""
        if self._file is None:
            return None
        try:
            self._file.parent.mkdir(parents=True, exist_ok=True)
            with open(self._file, "ab") as out:  # a full disk may raise at the write or only at the close
                out.write(body + b"\n")
        except OSError as exc:
            return f"not written to the notice file {self._file}: {exc.strerror or exc}"
        return None

    def retry_outbox(self) -> tuple[int, int]:
        """POSTs the kept notices, oldest first, one try each, stopping at the first the webhook does not take.
        Returns (POSTed and removed, still kept)."""
        kept = sorted(self.outbox.glob("*.json")) if self.outbox.is_dir() else []  # hidden temporary names skipped
        if self._url is None:
            return 0, len(kept)
        for done, path in enumerate(kept):
            try:
                body = path.read_bytes()
            except FileNotFoundError:  # the other notice sensor's tick POSTed it meanwhile
                continue
            if self._post(body, attempts=1) is not None:
                return done, len(kept) - done
            path.unlink(missing_ok=True)
        return len(kept), 0

    def _post(self, body: bytes, attempts: int) -> str | None:
        """None once the webhook took the body, else why not."""
        if self.webhook_failure is not None:
            return self.webhook_failure
        name, wait_s = _webhook_name(self._url or ""), self._policy.backoff_s
        failure: str | None = None
        for tried in range(attempts):
            if tried:
                self._sleep(max(0.0, min(wait_s, self._deadline_s - self._clock())))
                wait_s *= 2
            left_s = self._deadline_s - self._clock()
            if left_s <= 0:
                spent = f"the tick's {self._policy.tick_budget_s:g} s for the webhook are spent"
                after = f"failed after {tried} attempt(s): {failure}; {spent}" if tried else f"not tried: {spent}"
                self.webhook_failure = f"{name} {after}"
                return self.webhook_failure
            failure = post_json(self._url or "", body, min(self._policy.timeout_s, left_s))
            if failure is None:
                return None
        self.webhook_failure = f"{name} failed after {attempts} attempt(s): {failure}"
        return self.webhook_failure

    def _keep(self, body: bytes, failure: str) -> Path:
        # Named by the time it was kept, so the outbox is retried in the order notices were made.
        path = self.outbox / f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.json"
        try:
            self.outbox.mkdir(parents=True, exist_ok=True)
            return write_bytes_atomically(path, body)
        except OSError as exc:
            raise OSError(
                exc.errno, f"notice not delivered: {failure}, and the outbox {self.outbox} cannot be written ({exc})"
            ) from exc


def _webhook_name(url: str) -> str:
    parts = urlsplit(url)
    return f"webhook at {parts.scheme}://{parts.netloc.rpartition('@')[2]}"


@dg.run_failure_sensor(
    name="failure_notice",
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=f"Writes a notice for every failed run to ${NOTICE_FILE_ENV} (default: the instance folder's "
    f"{DEFAULT_NOTICE_FILE}) and/or POSTs it to ${WEBHOOK_URL_ENV}.",
)
def failure_notice_sensor(context: dg.RunFailureSensorContext, warehouse: WarehouseResource) -> None:
    run = context.dagster_run
    notice = FailureNotice(
        run_id=run.run_id,
        job=run.job_name,
        partition=run.tags.get("dagster/partition"),
        endpoint=run.tags.get("costbench/endpoint"),
        noticed_wall_s=time.time(),
        message=context.failure_event.message or "run failed",
    )
    channels = NoticeChannels(outbox_dir(warehouse.root_path()), default_notice_file(context.instance))
    channels.retry_outbox()  # older notices first (regression_notice's ticks retry them too)
    delivery = channels.send(notice)
    log = context.log.warning if delivery.troubled else context.log.info
    log(f"failure notice for run {run.run_id}: {delivery.describe()}")
