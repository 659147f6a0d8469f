"""A fleet run says which workers served and for how long, and a worker or router lost mid-run flags it degraded:
in runs and run_summary, in the fleet_intact check, and as a caveat on its week's weekly_trends row; its cost stays
the whole window's. Unit cases on recorded samples, then real fleets (twins behind the real smg) losing a decode
worker, a replica and the router."""

from __future__ import annotations

import json
import os
import signal
import threading
from datetime import date
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from endpoints.fleet_commands import smg_program
from endpoints.probes.probe_records import SERVER_SAMPLE_SCHEMA, SERVER_SAMPLES_FILE, ServerSample
from endpoints.probes.probe_session import probing
from endpoints.provision import provision
from endpoints.spec import load_endpoint_specs
from process_members import listener_pid
from replay.recording.records import RequestStatus
from replay.recording.requests_reader import read_requests
from replay.runner import ReplayConfig, run_replay
from replay_sglang_peer import make_workload
from warehouse.backends.store import Warehouse
from warehouse.marts.fleet_health import fleet_health
from warehouse.marts.run_rows import RunContext
from warehouse.quality import check_fleet
from warehouse.report.weekly_report import write_weekly_report
from warehouse_builders import T0_WALL_S, endpoint, request, requests_table, run_info, write_run

PREFILL, DECODE_0, DECODE_1 = "http://127.0.0.1:31001", "http://127.0.0.1:31002", "http://127.0.0.1:31003"
ROUTER = "http://127.0.0.1:29001"
WEEK = date(2025, 3, 3)


def _answered(source: str, role: str, answered_until_s: float | None, every_s: float = 1.0, span_s: float = 41.0):
    """A source scraped every `every_s` from t0 - 1 s; answering until `answered_until_s` (None: throughout)."""
    rows, at_s = [], -1.0
    while at_s <= span_s:
        up = answered_until_s is None or at_s < answered_until_s
        worker = None if role == "router" else source
        rows.append(ServerSample("r1", T0_WALL_S + at_s, source, "costbench:scrape_answered", "health", "{}",
                                 1.0 if up else 0.0, role, worker))  # fmt: skip
        at_s += every_s
    return rows


def _samples(*sources: list[ServerSample]) -> pa.Table:
    rows = [{f: getattr(s, f) for f in s.__slots__} for rows in sources for s in rows]
    return pa.Table.from_pylist(rows, schema=SERVER_SAMPLE_SCHEMA)


def _requests(served: dict[str, list[float]]) -> pa.Table:
    return requests_table(
        [
            request("r1", f"{worker[-1]}-{i}", 100, 200, sent_mono_s=at_s - 0.2, worker=worker)
            for worker, finishes in served.items()
            for i, at_s in enumerate(finishes)
        ]
    )


def test_a_decode_worker_lost_for_80_percent_of_the_window_degrades_the_run_and_says_so():
    samples = _samples(
        _answered(PREFILL, "prefill", None),
        _answered(DECODE_0, "decode", None),
        _answered(DECODE_1, "decode", 8.0),  # killed 8 s into a 40 s window
        _answered(ROUTER, "router", None),
    )
    requests = _requests({DECODE_0: [1.0, 20.0, 39.5], DECODE_1: [1.5, 7.2]})
    health = fleet_health(run_info("r1", 40.0), samples, requests)

    assert health.degraded is True
    assert health.reason == (
        f"decode worker {DECODE_1} stopped answering at +8.0 s of the 40.0 s window (unanswered 32.0 s); it "
        "completed 2 requests, the last at +7.2 s"
    )
    workers = {w["worker"]: w for w in json.loads(health.workers_json())}
    assert [w["role"] for w in json.loads(health.workers_json())] == ["router", "prefill", "decode", "decode"]
    assert workers[DECODE_1] == {
        "worker": DECODE_1, "role": "decode", "answered_s": 8.0, "unanswered_s": 32.0, "lost_from_s": 8.0,
        "completed_requests": 2, "failed_requests": 0, "first_served_s": 1.5, "last_served_s": 7.2,
    }  # fmt: skip
    assert workers[DECODE_0]["answered_s"] == 40.0 and workers[DECODE_0]["lost_from_s"] is None
    assert workers[PREFILL]["completed_requests"] == 0  # smg names the decode worker; the prefill is probed only


def test_a_killed_router_degrades_the_run_and_a_slow_scrape_or_two_does_not():
    lost = fleet_health(run_info("r1", 40.0), _samples(_answered(ROUTER, "router", 10.2)), _requests({}))
    # Scraped each second: the first unanswered scrape after the kill at 10.2 s is the one at 11 s.
    assert lost.degraded and lost.reason.startswith(f"router {ROUTER} stopped answering at +11.0 s")
    # Two scrapes missed in a row (a /metrics slower than its timeout, twice) is no lost worker.
    blips = [s if s.sample_wall_s not in (T0_WALL_S + 5.0, T0_WALL_S + 6.0) else
             ServerSample(*[getattr(s, f) for f in s.__slots__][:6], 0.0, s.role, s.worker)
             for s in _answered(DECODE_0, "worker", None)]  # fmt: skip
    health = fleet_health(run_info("r1", 40.0), _samples(blips), _requests({}))
    assert health.degraded is False and health.reason is None
    [worker] = json.loads(health.workers_json())
    assert worker["unanswered_s"] == 2.0 and worker["lost_from_s"] is None


def test_a_run_not_probed_is_not_judged_but_still_says_which_workers_served():
    health = fleet_health(run_info("r1", 40.0), SERVER_SAMPLE_SCHEMA.empty_table(), _requests({DECODE_0: [3.0]}))
    assert health.degraded is None and health.reason is None
    [worker] = json.loads(health.workers_json())
    assert (worker["worker"], worker["completed_requests"], worker["answered_s"]) == (DECODE_0, 1, None)


def test_a_degraded_run_fails_fleet_intact_and_is_a_caveat_on_its_week(tmp_path):
    store = Warehouse(tmp_path / "wh")
    reason = f"decode worker {DECODE_1} stopped answering at +8.0 s of the 40.0 s window (unanswered 32.0 s)"
    context = RunContext(workers_json="[]", degraded=True, degraded_reason=reason)
    write_run(store.lake_root, WEEK, "chat", run_info("r1", 40.0), endpoint(), [request("r1", "q1", 100, 900)],
              context)  # fmt: skip
    write_run(store.lake_root, WEEK, "other", run_info("r2", 40.0), endpoint(), [request("r2", "q1", 100, 900)],
              RunContext(degraded=False))  # fmt: skip
    store.refresh()
    runs = {r.scenario: r for r in store.run_summary()}
    assert (runs["chat"].degraded, runs["chat"].degraded_reason) == (True, reason)
    assert runs["chat"].window_s == 40.0  # the cost basis stays the window: every GPU was paid for
    failed = check_fleet(pd.DataFrame([runs["chat"]]))
    assert not failed.success and failed.failures[0].examples == (f"r1: {reason}",)
    assert check_fleet(pd.DataFrame([runs["other"]])).success
    trends = {t.scenario: t for t in store.weekly_trends()}
    assert trends["chat"].degraded_runs == 1
    assert json.loads(trends["chat"].caveats) == [f"fleet degraded: run r1: {reason}"]
    assert trends["other"].degraded_runs == 0 and trends["other"].caveats is None
    page = write_weekly_report(store, WEEK).html_path.read_text()  # under the row's verdict
    assert f"<b>caveat:</b> fleet degraded: run r1: decode worker {DECODE_1} stopped answering" in page


# --- real fleets: twins behind the real smg, a worker or the router killed mid-run -------------------------------

TWIN = ["--tp", "8", "--sim-hardware", "h200", "--sim-warmup-s", "0"]
BASE = {"mode": "sim", "model": "deepseek-ai/DeepSeek-V3", "gpu_type": "H200", "usd_per_gpu_hour": 3.5,
        "server_args": TWIN, "ready_timeout_s": 60}  # fmt: skip
FLEETS = {
    "pd": {**BASE, "name": "pd", "gpu_count": 24, "disaggregation": {
        "prefill": {"replicas": 1, "gpus_per_worker": 8}, "decode": {"replicas": 2, "gpus_per_worker": 8}}},
    "replicas": {**BASE, "name": "replicas", "gpu_count": 16, "replicas": 2, "router": {"policy": "round_robin"}},
}  # fmt: skip
WINDOW_S, RATE = 6.0, 8.0


def _replay_losing(tmp_path: Path, fleet: str, kill_router: bool):
    """The fleet replays WINDOW_S at RATE, its last worker (or its router) SIGKILLed 20% into the window."""
    (tmp_path / "endpoints.yaml").write_text(json.dumps({"endpoints": [FLEETS[fleet]]}))
    spec = load_endpoint_specs(tmp_path / "endpoints.yaml")[fleet]
    workload = make_workload([i / RATE for i in range(int(WINDOW_S * RATE))], input_tokens=64, output_tokens=8)
    run_dir = tmp_path / "run"
    with provision(spec, run_dir) as ep, probing(ep, run_dir, "r1", interval_s=0.2):
        victim = listener_pid(ep.url if kill_router else ep.worker_urls[-1])
        killer = threading.Timer(0.2 * WINDOW_S, os.kill, (victim, signal.SIGKILL))
        killer.start()
        run = run_replay(workload, ReplayConfig(url=ep.url, run_id="r1", request_timeout_s=10), run_dir)
        killer.join()
    samples = pq.read_table(run_dir / SERVER_SAMPLES_FILE, schema=SERVER_SAMPLE_SCHEMA)
    return ep, run, fleet_health(run, samples, read_requests(run_dir))


needs_smg = pytest.mark.skipif(smg_program() is None, reason="smg (SGLang's router) is pinned in pyproject.toml")


@needs_smg
@pytest.mark.timeout(120)
@pytest.mark.parametrize("fleet", ["pd", "replicas"])
def test_a_real_fleet_losing_a_worker_is_degraded_and_names_it(tmp_path, fleet):
    ep, run, health = _replay_losing(tmp_path, fleet, kill_router=False)
    lost = ep.worker_urls[-1]
    role = "decode worker" if fleet == "pd" else "worker"
    assert health.degraded, health.workers_json()
    assert health.reason.startswith(f"{role} {lost} stopped answering at +"), health.reason
    workers = {w["worker"]: w for w in json.loads(health.workers_json())}
    assert set(workers) == {*ep.worker_urls, ep.router_metrics_url.removesuffix("/metrics")}
    assert workers[lost]["unanswered_s"] > 0.6 * WINDOW_S  # lost for most of the window
    assert all(w["lost_from_s"] is None for url, w in workers.items() if url != lost)
    assert run.window_s >= WINDOW_S - 1 / RATE  # the whole window, as scheduled


@needs_smg
@pytest.mark.timeout(120)
def test_a_real_fleet_whose_router_is_killed_keeps_its_whole_window_as_its_cost_basis(tmp_path):
    ep, run, health = _replay_losing(tmp_path, "replicas", kill_router=True)
    rows = read_requests(tmp_path / "run").to_pylist()
    answered_until_s = max(r["finish_mono_s"] for r in rows if r["status"] == RequestStatus.OK.value)
    assert answered_until_s < 0.5 * WINDOW_S  # nothing was answered after the router went
    assert run.window_s >= WINDOW_S - 1 / RATE  # yet the window, the cost basis, is the whole schedule
    assert health.degraded and health.reason.startswith(f"router {ep.router_metrics_url.removesuffix('/metrics')} ")
