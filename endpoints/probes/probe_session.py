"""Probes beside a replay: every `interval_s`, scrape each worker's /metrics and sample the GPUs, in a
background thread (the replay owns its own asyncio loop in the main thread), streaming rows to
`server_samples.parquet` and `gpu_samples.parquet` in the run directory.

Usage (the replay asset):

    with provision(spec, run_dir) as endpoint, probing(endpoint, run_dir, run_id) as probes:
        run_replay(...)
    probes.summary  # ticks, rows, failures and their reasons (also in probes.json)

Time comes from an injected clock; ticks are due at absolute offsets from the start, so a slow
scrape delays one sample, not every later one. A failed scrape loses that sample only and is counted.

A fleet's router (smg) is scraped too, at its own metrics URL, for its smg_* routing series (role `router`);
its workers' rows are role `worker`, a single server's `server`. The warehouse adds up only the workers'
sglang:* counters, so nothing the router reports is counted twice.

GPU samples come from the sampler gpu_sampler.py picks for where the GPUs are: NVML, a DCGM exporter, or a
twin's modelled GPUs (each of its servers).

The first tick also writes, for each worker whose /server_info gave one, the cap on running requests
it enforces (endpoints/running_cap.py) as a row of kind `info`, metric `server_info:max_running_requests`:
batch occupancy divides each worker's running requests by its own cap.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from common.run_folder import GPU_SAMPLES_FILE, PROBES_SUMMARY_FILE, SERVER_SAMPLES_FILE
from endpoints.probes.endpoint_get import http_get
from endpoints.probes.gpu_protocol import GpuSampler
from endpoints.probes.gpu_sampler import GpuSite, open_gpu_sampler
from endpoints.probes.metrics_scrape import (
    DeltaTracker,
    ExpositionTooLargeError,
    ScrapeBounds,
    SeriesValue,
    parse_router_metrics,
    parse_sglang_metrics,
)
from endpoints.probes.probe_records import (
    ANSWERED_KIND,
    ANSWERED_METRIC,
    GPU_SAMPLE_SCHEMA,
    SERVER_SAMPLE_SCHEMA,
    ServerSample,
)
from endpoints.probes.server_facts import auth_headers
from endpoints.running_cap import max_running_requests
from endpoints.running_endpoint import RunningEndpoint
from redaction.secret_redaction import redact_clipped, redact_values, secret_header_values

_MAX_NOTES = 20
_NOTE_MAX_CHARS = 1000
CAP_METRIC = "server_info:max_running_requests"  # a fact from /server_info, not a /metrics series
CAP_KIND = "info"
ROLE_SERVER, ROLE_WORKER, ROLE_ROUTER = "server", "worker", "router"
ROLE_PREFILL, ROLE_DECODE = "prefill", "decode"  # a disaggregated fleet's workers, by their disaggregation_mode


class ProbeClock(Protocol):
    def now_s(self) -> float: ...  # monotonic: when the next tick is due

    def wall_s(self) -> float: ...  # epoch: sample_wall_s


class SystemProbeClock:
    def now_s(self) -> float:
        return time.monotonic()

    def wall_s(self) -> float:
        return time.time()


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}  # a record type's fields, in order


class _ParquetRows:
    """Rows buffered into row groups; the file is complete (has its footer) once closed."""

    def __init__(self, path: Path, schema: pa.Schema, rows_per_group: int = 20_000) -> None:
        self.schema = schema
        self.rows_per_group = rows_per_group
        self.rows_written = 0
        self._buffer: list[dict] = []
        self._writer = pq.ParquetWriter(path, schema)

    def add(self, rows: list) -> None:
        # The records are flat (scalars only): asdict's deep copy of each field would copy nothing.
        for row in rows:
            names = _FIELD_NAMES.get(type(row))
            if names is None:
                names = _FIELD_NAMES[type(row)] = tuple(f.name for f in fields(row))
            self._buffer.append({name: getattr(row, name) for name in names})
        if len(self._buffer) >= self.rows_per_group:
            self._flush()

    def _flush(self) -> None:
        if self._buffer:
            self._writer.write_table(pa.Table.from_pylist(self._buffer, schema=self.schema))
            self.rows_written += len(self._buffer)
            self._buffer = []

    def close(self) -> None:
        self._flush()
        self._writer.close()


@dataclass(slots=True)
class ProbeSummary:
    ticks: int = 0
    server_rows: int = 0
    gpu_rows: int = 0
    scrape_failures: int = 0
    gpu_source: str = ""
    notes: list[str] = field(default_factory=list)  # distinct problems, first ones only

    def note(self, message: str) -> None:
        message = redact_clipped(message, _NOTE_MAX_CHARS)  # a parser's error may quote what the server sent
        if message not in self.notes and len(self.notes) < _MAX_NOTES:
            self.notes.append(message)


class ProbeSession:
    def __init__(
        self,
        run_id: str,
        metrics_urls: tuple[str, ...],
        headers: dict[str, str],
        gpu_sampler: GpuSampler,
        run_dir: Path,
        interval_s: float = 1.0,
        clock: ProbeClock | None = None,
        worker_caps: Mapping[str, int] | None = None,
        router_metrics_url: str | None = None,
        is_fleet: bool = False,
        worker_roles: Mapping[str, str] | None = None,
        scrape_bounds: ScrapeBounds | None = None,
    ) -> None:
        self.run_id = run_id
        self.metrics_urls = metrics_urls
        self.router_metrics_url = router_metrics_url  # the full /metrics URL of a fleet's router
        self.worker_role = ROLE_WORKER if is_fleet or router_metrics_url else ROLE_SERVER
        self.worker_caps = dict(worker_caps or {})  # metrics URL -> the cap that worker enforces
        self.worker_roles = dict(worker_roles or {})  # metrics URL -> prefill | decode (a PD fleet's workers)
        self.headers = headers
        self.gpu_sampler = gpu_sampler
        self.interval_s = interval_s
        self.scrape_bounds = scrape_bounds or ScrapeBounds()  # docs/endpoints.md, "Bounds on what an endpoint sends"
        self.clock = clock or SystemProbeClock()
        self.run_dir = Path(run_dir)
        self.summary = ProbeSummary(gpu_source=gpu_sampler.source.value)
        self._deltas = DeltaTracker()
        self._answered: dict[str, bool] = {}  # scraped URL -> whether its latest scrape got an HTTP answer
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._server = _ParquetRows(self.run_dir / SERVER_SAMPLES_FILE, SERVER_SAMPLE_SCHEMA)
        self._gpu = _ParquetRows(self.run_dir / GPU_SAMPLES_FILE, GPU_SAMPLE_SCHEMA)

    def _role(self, url: str) -> str:
        return self.worker_roles.get(url, self.worker_role)

    def tick(self) -> None:
        """One sample of every source at one wall-clock instant."""
        wall_s = self.clock.wall_s()
        self.summary.ticks += 1
        if self.summary.ticks == 1 and self.worker_caps:
            caps = [ServerSample(self.run_id, wall_s, url, CAP_METRIC, CAP_KIND, "{}", float(cap), self._role(url), url)
                    for url, cap in self.worker_caps.items()]  # fmt: skip
            self._server.add(caps)
            self.summary.server_rows += len(caps)
        for url in self.metrics_urls:
            series = self._scrape(f"{url}/metrics", parse_sglang_metrics, " (launched without --enable-metrics?)")
            if series is not None:
                self._add(self._deltas.samples(self.run_id, wall_s, url, series, self._role(url), url))
            self._add([self._answered_row(wall_s, f"{url}/metrics", url, self._role(url), url)])
        if self.router_metrics_url:
            series = self._scrape(self.router_metrics_url, parse_router_metrics, " (not smg's --prometheus-port?)")
            base = self.router_metrics_url.removesuffix("/metrics")
            if series is not None:
                self._add(self._deltas.samples(self.run_id, wall_s, base, series, ROLE_ROUTER))
            self._add([self._answered_row(wall_s, self.router_metrics_url, base, ROLE_ROUTER, None)])
        gpu_rows = self.gpu_sampler.sample(self.run_id, wall_s)
        self._gpu.add(gpu_rows)
        self.summary.gpu_rows += len(gpu_rows)
        for row in gpu_rows:
            if row.note:
                self.summary.note(row.note)

    def _scrape(
        self, url: str, parse: Callable[[str, ScrapeBounds], list[SeriesValue]], hint_404: str
    ) -> list[SeriesValue] | None:
        """One exposition's series; None (counted, and noted once) when it could not be read or passed a bound."""
        bounds = self.scrape_bounds
        answer = http_get(url, self.headers, bounds.limit_s(self.interval_s), max_bytes=bounds.max_bytes)
        self._answered[url] = answer.status is not None
        if answer.status != 200:
            self.summary.scrape_failures += 1
            why = answer.problem if answer.status is None else f"HTTP {answer.status}"
            self.summary.note(f"{url}: {why}{hint_404 if answer.status == 404 else ''}")
            return None
        try:
            # The run's own API key goes wherever the server echoed it; labels are redacted by shape as parsed.
            text = redact_values(answer.body.decode("utf-8", "replace"), secret_header_values(self.headers))
            return parse(text, bounds)
        except ExpositionTooLargeError as exc:
            self.summary.scrape_failures += 1
            self.summary.note(f"{url}: {exc}, not kept")
            return None
        except ValueError as exc:
            self.summary.scrape_failures += 1
            self.summary.note(f"{url}: not Prometheus text ({exc})")
            return None

    def _answered_row(self, wall_s: float, url: str, source: str, role: str, worker: str | None) -> ServerSample:
        answered = 1.0 if self._answered.get(url) else 0.0
        return ServerSample(self.run_id, wall_s, source, ANSWERED_METRIC, ANSWERED_KIND, "{}", answered, role, worker)

    def _add(self, rows: list[ServerSample]) -> None:
        self._server.add(rows)
        self.summary.server_rows += len(rows)

    def _loop(self) -> None:
        start_s = self.clock.now_s()
        k = 0
        while not self._stop.is_set():
            self._guarded_tick()
            k, wait_s = self._next_tick(start_s, k + 1)
            self._stop.wait(wait_s)

    async def tick_on(self, stop: asyncio.Event) -> None:
        """The same ticks from a task on an event loop whose clock is `self.clock` (a twin served on that
        loop, endpoints/virtual_twin.py), until `stop` is set: each tick in a thread (a virtual clock holds
        time while it runs)."""
        start_s = self.clock.now_s()
        k = 0
        while not stop.is_set():
            await asyncio.to_thread(self._guarded_tick)
            k, wait_s = self._next_tick(start_s, k + 1)
            try:
                await asyncio.wait_for(stop.wait(), wait_s)
            except TimeoutError:
                pass

    def _guarded_tick(self) -> None:
        try:
            self.tick()
        except Exception as exc:  # noqa: BLE001 - a probe must never end the replay
            self.summary.note(f"probe tick failed: {type(exc).__name__}: {exc}")

    def _next_tick(self, start_s: float, k: int) -> tuple[int, float]:
        # Absolute due times; ticks missed behind a slow scrape are skipped, not bunched.
        now_s = self.clock.now_s()
        k = max(k, int((now_s - start_s) / self.interval_s))
        return k, max(0.0, start_s + k * self.interval_s - now_s)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=f"probes-{self.run_id}", daemon=True)
        self._thread.start()

    def stop(self, final_tick: bool | None = None) -> ProbeSummary:
        """Stop the thread, take one last sample (the counters after the replay), write the files.
        `final_tick`: whether to take that sample (default: when the thread ran; tick_on's caller takes
        its own on the loop)."""
        ran = self._thread is not None
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        if ran if final_tick is None else final_tick:
            try:
                self.tick()
            except Exception as exc:  # noqa: BLE001
                self.summary.note(f"final probe tick failed: {type(exc).__name__}: {exc}")
        self.gpu_sampler.close()
        self._server.close()
        self._gpu.close()
        (self.run_dir / PROBES_SUMMARY_FILE).write_text(json.dumps(asdict(self.summary), indent=2))
        return self.summary


@contextmanager
def probing(
    endpoint: RunningEndpoint,
    run_dir: Path,
    run_id: str,
    interval_s: float | None = None,
    clock: ProbeClock | None = None,
) -> Iterator[ProbeSession]:
    """Probes running for the block; interval defaults to the endpoint spec's scrape_interval_s."""
    session = probe_session(endpoint, run_dir, run_id, interval_s, clock)
    session.start()
    try:
        yield session
    finally:
        session.stop()


def probe_session(
    endpoint: RunningEndpoint,
    run_dir: Path,
    run_id: str,
    interval_s: float | None = None,
    clock: ProbeClock | None = None,
) -> ProbeSession:
    """The endpoint's probes, not yet started."""
    spec = endpoint.spec
    metrics_urls = endpoint.metrics_urls or (endpoint.url,)
    return ProbeSession(
        run_id=run_id,
        metrics_urls=metrics_urls,
        headers=auth_headers(spec),
        gpu_sampler=open_gpu_sampler(gpu_site(endpoint, metrics_urls)),
        run_dir=Path(run_dir),
        interval_s=interval_s or spec.scrape_interval_s,
        clock=clock,
        worker_caps=worker_caps(endpoint, metrics_urls),
        router_metrics_url=endpoint.router_metrics_url,
        is_fleet=len(metrics_urls) > 1 or endpoint.spec.fleet is not None,
        worker_roles=worker_roles(endpoint, metrics_urls),
    )


def gpu_site(endpoint: RunningEndpoint, metrics_urls: tuple[str, ...]) -> GpuSite:
    """Where the endpoint's GPUs are: this host, its servers, and what they run (a twin serves its GPUs' counters)."""
    backends = {info.get("backend") for info in _server_infos(endpoint, metrics_urls).values()}
    backend = backends.pop() if len(backends) == 1 else None
    return GpuSite(endpoint.spec, socket.gethostname(), metrics_urls, backend)


def _server_infos(endpoint: RunningEndpoint, metrics_urls: tuple[str, ...]) -> dict[str, dict]:
    if endpoint.worker_server_infos:
        return dict(zip(endpoint.worker_urls or endpoint.spec.worker_urls, endpoint.worker_server_infos))
    return {url: endpoint.server_info for url in metrics_urls}


def worker_roles(endpoint: RunningEndpoint, metrics_urls: tuple[str, ...]) -> dict[str, str]:
    """The PD role of each scraped worker that has one, as its /server_info says (SGLang's disaggregation_mode)."""
    infos = _server_infos(endpoint, metrics_urls)
    roles = {url: infos[url].get("disaggregation_mode") for url in metrics_urls if url in infos}
    return {url: role for url, role in roles.items() if role in (ROLE_PREFILL, ROLE_DECODE)}


def worker_caps(endpoint: RunningEndpoint, metrics_urls: tuple[str, ...]) -> dict[str, int]:
    """Each scraped worker's cap on running requests, from the /server_info provisioning read: a fleet's
    workers each their own, a single server its one. Workers that report none are left out."""
    infos = _server_infos(endpoint, metrics_urls)
    caps = {url: max_running_requests(infos[url]) for url in metrics_urls if url in infos}
    return {url: cap for url, cap in caps.items() if cap is not None}
