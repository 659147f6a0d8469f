"""Failure notices for the unattended weekly job: a JSON line in a file, or a POST to a webhook. Regression
verdicts take the same channel (pipelines/regression_notice.py; their JSON has "kind": "regression").

Where they go is named by environment variables, read when a notice is sent (never at import):
COSTBENCH_FAILURE_NOTICE_FILE (a path; one JSON object per line is appended; unset, the Dagster instance's own
notices.jsonl, so `make dagster` and the demo write where the README says) and/or COSTBENCH_FAILURE_WEBHOOK_URL
(receives the same JSON object as the body of a POST).

The file is written first, whatever the webhook does. The webhook gets up to `WebhookPolicy.attempts` POSTs,
with a wait between them, all of one sensor tick within `tick_budget_s`; once it has failed in a tick, later
notices of that tick are not tried. A notice it did not take is kept in the outbox (`outbox_dir`: one JSON file
per notice, under the warehouse, which outlives a code server's pod) and POSTed again, oldest first, on later
ticks until the webhook answers 2xx; then its file is removed. So a notice may reach the webhook twice (a POST
whose answer was lost), never zero times. Logs name the webhook by scheme, host and port only: a webhook URL
carries its secret in the path or the query.
"""

from __future__ import annotations

import http.client
import os
import time
import urllib.error
import urllib.request
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
    timeout_s: float = 5.0  # each POST's connect and answer timeout
    backoff_s: float = 1.0  # the wait before the second POST, doubled before each later one
    tick_budget_s: float = 20.0  # every POST and wait of one tick: Dagster gives a sensor tick 60 s


WEBHOOK_POLICY = WebhookPolicy()


@dataclass(frozen=True, slots=True)
class Delivery:
    written_to: Path | None  # the notice file, when one is configured
    posted: bool  # the webhook answered 2xx
    kept_in: Path | None  # the outbox file holding a notice the webhook did not take
    failure: str | None  # why the webhook did not take it (names its host, never its path or query)

    def describe(self) -> str:
        said = [f"written to {self.written_to}"] if self.written_to else []
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
        """Sends the notice (a FailureNotice, or a regression notice) everywhere configured. Raises OSError only
        when the notice could be neither written to the file nor, the webhook having failed, kept in the outbox."""
        body = orjson.dumps(asdict(notice))
        if self._file is not None:
            self._file.parent.mkdir(parents=True, exist_ok=True)
            with open(self._file, "ab") as out:
                out.write(body + b"\n")
        if self._url is None:
            return Delivery(self._file, False, None, None)
        failure = self._post(body, self._policy.attempts)
        if failure is None:
            return Delivery(self._file, True, None, None)
        return Delivery(self._file, False, self._keep(body, failure), failure)

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
            failure = _post_once(self._url or "", body, min(self._policy.timeout_s, left_s))
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


def _post_once(url: str, body: bytes, timeout_s: float) -> str | None:
    """One POST; None when answered 2xx, else why not (never the URL, which may carry a secret)."""
    try:
        request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(request, timeout=timeout_s):
            return None
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}"
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError):
            return f"no answer within {timeout_s:g} s"
        return f"{exc.reason}"
    except TimeoutError:
        return f"no answer within {timeout_s:g} s"
    except (OSError, http.client.HTTPException) as exc:
        return f"{type(exc).__name__}: {exc}"
    except ValueError:  # urllib's message quotes the URL
        return f"${WEBHOOK_URL_ENV} is not an http(s) URL"


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
    log = context.log.warning if delivery.kept_in else context.log.info
    log(f"failure notice for run {run.run_id}: {delivery.describe()}")
