"""Probes during a replay: /metrics and GPU samples to Parquet, against real loopback servers."""

from __future__ import annotations

import json
import urllib.request

import pyarrow.parquet as pq
import pytest
from aiohttp import web

from endpoints.probes.dcgm_sampler import DcgmSampler
from endpoints.probes.gpu_protocol import GpuSource, NoGpuSampler
from endpoints.probes.gpu_sampler import GpuSite, gpu_source_for, open_gpu_sampler
from endpoints.probes.nvml_sampler import open_nvml_sampler
from endpoints.probes.probe_records import (
    GPU_SAMPLE_SCHEMA,
    GPU_SAMPLES_FILE,
    SERVER_SAMPLE_SCHEMA,
    SERVER_SAMPLES_FILE,
)
from endpoints.probes.probe_session import ProbeSession, probing
from endpoints.probes.twin_sampler import TWIN_DCGM_PATH, TwinSampler
from endpoints.provision import provision
from endpoints.spec import EndpointMode, EndpointSpec
from endpoints_loopback import serve_in_thread

DCGM_PAGE = """# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-a",device="nvidia0",modelName="NVIDIA H200",Hostname="gpu-node-1"} 1980
DCGM_FI_DEV_SM_CLOCK{gpu="1",UUID="GPU-b",device="nvidia1",modelName="NVIDIA H200",Hostname="gpu-node-1"} 1755
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",device="nvidia0",modelName="NVIDIA H200",Hostname="gpu-node-1"} 97
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-b",device="nvidia1",modelName="NVIDIA H200",Hostname="gpu-node-1"} 0
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-a",device="nvidia0",modelName="NVIDIA H200",Hostname="gpu-node-1"} 130000
DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-b",device="nvidia1",modelName="NVIDIA H200",Hostname="gpu-node-1"} 120000
# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).
# TYPE DCGM_FI_DEV_FB_FREE gauge
DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-a",device="nvidia0",modelName="NVIDIA H200",Hostname="gpu-node-1"} 13000
DCGM_FI_DEV_FB_FREE{gpu="1",UUID="GPU-b",device="nvidia1",modelName="NVIDIA H200",Hostname="gpu-node-1"} 23000
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a",device="nvidia0",modelName="NVIDIA H200",Hostname="gpu-node-1"} 612.5
"""


class ScriptedClock:
    def __init__(self) -> None:
        self.t_s = 1000.0

    def now_s(self) -> float:
        return self.t_s

    def wall_s(self) -> float:
        return 1_700_000_000.0 + self.t_s


def _counting_metrics_app() -> web.Application:
    state = {"scrapes": 0}

    async def metrics(request: web.Request) -> web.Response:
        state["scrapes"] += 1
        n = state["scrapes"]
        text = (
            "# TYPE sglang:generation_tokens_total counter\n"
            f'sglang:generation_tokens_total{{model_name="ds",dp_rank="0"}} {5000 + 100 * n}\n'
            f'sglang:generation_tokens_total{{model_name="ds",dp_rank="1"}} {7000 + 50 * n}\n'
            "# TYPE sglang:num_running_reqs gauge\n"
            f'sglang:num_running_reqs{{model_name="ds",dp_rank="0"}} {n}\n'
        )
        return web.Response(text=text, content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    return app


def _dcgm_app() -> web.Application:
    app = web.Application()
    app.router.add_get("/metrics", lambda request: web.Response(text=DCGM_PAGE, content_type="text/plain"))
    return app


def test_scripted_ticks_write_deltas_and_dcgm_samples(tmp_path):
    clock = ScriptedClock()
    with serve_in_thread(_counting_metrics_app()) as url, serve_in_thread(_dcgm_app()) as dcgm:
        session = ProbeSession("run-1", (url,), {}, DcgmSampler(f"{dcgm}/metrics"), tmp_path, 1.0, clock)
        for _ in range(3):
            session.tick()
            clock.t_s += 1.0
        summary = session.stop()
    server = pq.read_table(tmp_path / SERVER_SAMPLES_FILE)
    assert server.schema.equals(SERVER_SAMPLE_SCHEMA)
    rows = server.to_pylist()
    generation = [r["value"] for r in rows if r["metric"] == "sglang:generation_tokens_total"]
    assert generation == [0, 150, 300]  # (100 + 50) a scrape, summed over dp_rank, from the first scrape
    running = [r["value"] for r in rows if r["metric"] == "sglang:num_running_reqs"]
    assert running == [1, 2, 3]
    assert sorted({r["sample_wall_s"] for r in rows}) == [1_700_001_000.0, 1_700_001_001.0, 1_700_001_002.0]
    gpu = pq.read_table(tmp_path / GPU_SAMPLES_FILE)
    assert gpu.schema.equals(GPU_SAMPLE_SCHEMA)
    first = [r for r in gpu.to_pylist() if r["sample_wall_s"] == 1_700_001_000.0]
    by_index = {r["gpu_index"]: r for r in first}
    assert by_index[0]["host"] == "gpu-node-1" and by_index[0]["source"] == "dcgm"
    assert by_index[0]["utilisation_pct"] == 97 and by_index[0]["sm_clock_mhz"] == 1980
    assert by_index[0]["memory_used_bytes"] == 130000 * 2**20
    assert by_index[0]["memory_total_bytes"] == 143000 * 2**20
    assert by_index[0]["power_w"] == 612.5
    assert by_index[1]["utilisation_pct"] == 0  # a measured zero stays zero
    assert by_index[1]["power_w"] is None  # not exported: null, never 0
    assert summary.ticks == 3 and summary.scrape_failures == 0 and summary.gpu_source == "dcgm"


def test_an_unreachable_exporter_gives_one_null_row_with_the_reason(tmp_path):
    with serve_in_thread(web.Application()) as url:  # answers 404 to everything
        sampler = DcgmSampler(f"{url}/metrics")
        first = sampler.sample("r", 1.0)
        again = sampler.sample("r", 2.0)
    assert len(first) == 1 and first[0].utilisation_pct is None and "HTTP 404" in first[0].note
    assert again == []


def test_nvml_without_a_driver_is_source_none_with_the_reason_once():
    sampler = open_nvml_sampler("this-host")
    rows = sampler.sample("r", 1.0)
    if isinstance(sampler, NoGpuSampler):  # this machine: no NVIDIA driver
        assert rows[0].source == "none" and "NVML" in rows[0].note and rows[0].power_w is None
        assert sampler.sample("r", 2.0) == []
    else:  # a GPU host: real readings
        assert rows and all(r.source == "nvml" and r.memory_total_bytes for r in rows)
    sampler.close()


@pytest.mark.parametrize(
    "mode, dcgm, backend, source",
    [(EndpointMode.LAUNCH, None, "sglang", GpuSource.NVML), (EndpointMode.ATTACH, None, "sglang", GpuSource.NONE),
     (EndpointMode.ATTACH, "http://h:9400/metrics", None, GpuSource.DCGM), (EndpointMode.SIM, None, "sim", GpuSource.TWIN),
     (EndpointMode.ATTACH, None, "sim", GpuSource.TWIN), (EndpointMode.LAUNCH, None, "sim", GpuSource.TWIN)],
)  # fmt: skip
def test_the_gpu_source_follows_where_the_gpus_are(mode, dcgm, backend, source):
    spec = EndpointSpec("e", mode, "m", (), "H200", 8, 3.5, url="http://h:1", dcgm_url=dcgm)
    assert gpu_source_for(spec, backend) is source


def test_the_registry_gives_a_twin_endpoint_the_twin_sampler_over_every_server():
    spec = EndpointSpec("e", EndpointMode.SIM, "deepseek-ai/DeepSeek-V3", (), "H200", 16, 3.5)
    sampler = open_gpu_sampler(GpuSite(spec, "this-host", ("http://127.0.0.1:1", "http://127.0.0.1:2"), "sim"))
    assert isinstance(sampler, TwinSampler) and sampler.source is GpuSource.TWIN
    rows = sampler.sample("r", 1.0)  # nothing listens there: one null row per server, saying why, source twin
    assert [(r.source, r.utilisation_pct) for r in rows] == [("twin", None), ("twin", None)]
    assert all(TWIN_DCGM_PATH in r.note for r in rows)


def _twin_spec(name: str = "twin", *flags: str) -> EndpointSpec:
    return EndpointSpec(name, EndpointMode.SIM, "deepseek-ai/DeepSeek-V3", ("--tp", "8", *flags), "H200", 8, 3.5,
                        ready_timeout_s=30)  # fmt: skip


def _generate(url: str, n: int) -> None:
    for i in range(n):
        body = json.dumps({"input_ids": [1, 2, 3, 4 + i], "sampling_params": {"max_new_tokens": 4, "ignore_eos": True}})
        request = urllib.request.Request(
            f"{url}/generate", data=body.encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()


def _last_value(rows: list[dict], metric: str, source_url: str) -> float:
    values = [r for r in rows if r["metric"] == metric and r["source_url"] == source_url]
    return max(values, key=lambda r: r["sample_wall_s"])["value"]


def test_probing_a_launched_twin_in_a_background_thread(tmp_path):
    with provision(_twin_spec(), tmp_path) as endpoint:
        with probing(endpoint, tmp_path, "run-2", interval_s=0.05) as probes:
            _generate(endpoint.url, 3)
    rows = pq.read_table(tmp_path / SERVER_SAMPLES_FILE).to_pylist()
    assert _last_value(rows, "sglang:num_requests_total", endpoint.url) == 3  # the final tick saw them all
    assert probes.summary.ticks >= 2 and probes.summary.scrape_failures == 0
    gpu = pq.read_table(tmp_path / GPU_SAMPLES_FILE).to_pylist()
    # The twin's modelled GPUs: its 8 (--tp 8), every tick, with values (busy during the requests, idle before).
    assert {r["source"] for r in gpu} == {"twin"} and {r["gpu_index"] for r in gpu} == set(range(8))
    assert {r["host"] for r in gpu} == {endpoint.url.removeprefix("http://")}
    assert all(r["utilisation_pct"] is not None and r["dram_active_pct"] is not None for r in gpu)
    assert max(r["utilisation_pct"] for r in gpu) > 0 and probes.summary.gpu_source == "twin"
    assert json.loads((tmp_path / "probes.json").read_text())["ticks"] == probes.summary.ticks


def test_a_fleet_behind_a_router_scrapes_every_worker(tmp_path):
    w0_spec, w1_spec = _twin_spec("w0", "--max-running-requests", "3"), _twin_spec("w1", "--max-running-requests", "5")
    with provision(w0_spec, tmp_path / "w0") as w0, provision(w1_spec, tmp_path / "w1") as w1:
        # The router URL is one of the twins: it answers /health_generate like sglang_router does.
        fleet = EndpointSpec("fleet", EndpointMode.ATTACH, "deepseek-ai/DeepSeek-V3", (), "H200", 16, 3.5,
                             url=w0.url, worker_urls=(w0.url, w1.url))  # fmt: skip
        run_dir = tmp_path / "run"
        with provision(fleet, run_dir) as endpoint, probing(endpoint, run_dir, "run-3", interval_s=0.05):
            assert endpoint.metrics_urls == (w0.url, w1.url)
            _generate(w0.url, 2)
            _generate(w1.url, 3)
    rows = pq.read_table(run_dir / SERVER_SAMPLES_FILE).to_pylist()
    assert _last_value(rows, "sglang:num_requests_total", w0.url) == 2
    assert _last_value(rows, "sglang:num_requests_total", w1.url) == 3
    # Each worker's own cap, from its own /server_info, once per run: what batch occupancy divides by.
    caps = {r["source_url"]: r["value"] for r in rows if r["kind"] == "info"}
    assert caps == {w0.url: 3, w1.url: 5}
    assert all(r["metric"] == "server_info:max_running_requests" for r in rows if r["kind"] == "info")
    facts = json.loads((run_dir / "server_facts.json").read_text())
    assert [w["url"] for w in facts["workers"]] == [w0.url, w1.url]


def test_a_worker_without_metrics_is_counted_and_explained(tmp_path):
    with serve_in_thread(web.Application()) as url:
        session = ProbeSession("r", (url,), {}, NoGpuSampler("h", "none here"), tmp_path, 1.0, ScriptedClock())
        session.tick()
        summary = session.stop()
    assert summary.scrape_failures == 1 and any("--enable-metrics" in note for note in summary.notes)
    # No series; only that it answered (a 404: alive, without metrics), which is what judges a lost worker.
    rows = pq.read_table(tmp_path / SERVER_SAMPLES_FILE).to_pylist()
    assert [(r["metric"], r["kind"], r["value"], r["source_url"]) for r in rows] == [
        ("costbench:scrape_answered", "health", 1.0, url)
    ]


def test_each_scrape_records_whether_its_worker_and_router_answered(tmp_path):
    # A worker killed mid-run writes nothing of its own any more: only the probes can say it stopped answering.
    app = web.Application()
    app.router.add_get("/metrics", lambda _r: web.Response(text="sglang:num_running_reqs 1\n"))
    with serve_in_thread(app) as worker, serve_in_thread(web.Application()) as router:
        session = ProbeSession("r", (worker,), {}, NoGpuSampler("h", "none"), tmp_path, 1.0, ScriptedClock(),
                               router_metrics_url=f"{router}/metrics")  # fmt: skip
        session.tick()
    session.tick()  # both gone: refused
    session.stop(final_tick=False)
    rows = pq.read_table(tmp_path / SERVER_SAMPLES_FILE).to_pylist()
    answered = [(r["source_url"], r["role"], r["worker"], r["value"]) for r in rows if r["kind"] == "health"]
    assert answered == [
        (worker, "worker", worker, 1.0), (router, "router", None, 1.0),
        (worker, "worker", worker, 0.0), (router, "router", None, 0.0),
    ]  # fmt: skip
    assert all(r["metric"] == "costbench:scrape_answered" for r in rows if r["kind"] == "health")
