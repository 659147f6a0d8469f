"""Where a started endpoint listens and where replay shards reach it: the spec's host, port and
advertise_url, and the placements where a started server cannot serve the shards at all."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import urllib.request

import pytest
import yaml

from endpoints.probes.server_facts import SERVER_FACTS_FILE
from endpoints.process_group import start_in_own_group
from endpoints.provision import (
    EndpointPlacementError,
    EndpointStartError,
    advertised_url,
    free_port,
    server_command,
    start_detached,
    stop_detached,
)
from endpoints.spec import EndpointMode, EndpointSpec, EndpointSpecError, load_endpoint_specs
from replay.runner import ReplayConfig, run_replay
from replay_sglang_peer import make_workload

TWIN = dict(
    name="twin",
    mode=EndpointMode.SIM,
    model="deepseek-ai/DeepSeek-V3",
    server_args=("--tp", "8", "--sim-hardware", "h200", "--sim-warmup-s", "0"),
    gpu_type="H200",
    gpu_count=8,
    usd_per_gpu_hour=3.5,
    ready_timeout_s=30.0,
)


def _endpoints_file(tmp_path, **fields) -> dict:
    entry = {
        "name": "twin", "mode": "sim", "model": "deepseek-ai/DeepSeek-V3", "server_args": ["--tp", "8"],
        "gpu_type": "H200", "gpu_count": 8, "usd_per_gpu_hour": 3.5, **fields,
    }  # fmt: skip
    path = tmp_path / "endpoints.yaml"
    path.write_text(yaml.safe_dump({"endpoints": [entry]}))
    return load_endpoint_specs(path)


def test_spec_reads_bind_host_port_and_advertise_url(tmp_path):
    spec = _endpoints_file(tmp_path, host="0.0.0.0", port=30000, advertise_url="http://${POD_IP}:30000/")["twin"]
    assert (spec.host, spec.port, spec.advertise_url) == ("0.0.0.0", 30000, "http://${POD_IP}:30000")
    default = _endpoints_file(tmp_path)["twin"]
    assert (default.host, default.port, default.advertise_url) == ("127.0.0.1", None, None)
    assert "--host 0.0.0.0 --port 30000" in " ".join(server_command(spec, 30000))


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"advertise_url": "http://svc:30000"}, "advertise_url needs a fixed port"),
        ({"port": 0}, "port: must be a whole number from 1 to 65535"),
        ({"port": "30000"}, "port: must be a whole number"),
        ({"host": "http://0.0.0.0"}, "host: must be an address"),
        ({"port": 30000, "advertise_url": "svc:30000"}, "advertise_url: must be an http"),
        ({"mode": "attach", "url": "http://svc:30000", "host": "0.0.0.0"}, "attach has url"),
    ],
)
def test_spec_rejects_unusable_bind_settings(tmp_path, fields, message):
    with pytest.raises(EndpointSpecError, match=message):
        _endpoints_file(tmp_path, **fields)


def test_advertised_url_reads_its_variables_when_the_server_starts(monkeypatch):
    spec = EndpointSpec(**TWIN, host="0.0.0.0", port=30000, advertise_url="http://${COSTBENCH_TEST_POD_IP}:30000")
    monkeypatch.setenv("COSTBENCH_TEST_POD_IP", "10.4.0.17")
    assert advertised_url(spec, 30000) == "http://10.4.0.17:30000"
    monkeypatch.delenv("COSTBENCH_TEST_POD_IP")
    with pytest.raises(EndpointStartError, match=r"names \$\{COSTBENCH_TEST_POD_IP\}, which is not set"):
        advertised_url(spec, 30000)
    # Without advertise_url: where this host reaches it (an any-address bind is dialled on loopback).
    assert advertised_url(EndpointSpec(**TWIN, host="0.0.0.0"), 41000) == "http://127.0.0.1:41000"
    assert advertised_url(EndpointSpec(**TWIN), 41000) == "http://127.0.0.1:41000"


@pytest.mark.timeout(90)
def test_twin_bound_on_loopback_is_replayed_at_its_advertised_url(tmp_path):
    port = free_port()
    advertised = f"http://localhost:{port}"
    spec = EndpointSpec(**TWIN, host="127.0.0.1", port=port, advertise_url=advertised)
    lease = start_detached(spec, tmp_path / "run")
    try:
        # What start_endpoint hands every replay_shard step, and what the run's facts record.
        assert lease.endpoint.url == advertised
        assert lease.endpoint.metrics_urls == (advertised,)
        facts = json.loads((tmp_path / "run" / SERVER_FACTS_FILE).read_text())
        assert facts["url"] == advertised
        assert f"--host 127.0.0.1 --port {port}" in " ".join(facts["command"])
        workload = make_workload([0.0, 0.1, 0.2, 0.3])
        info = run_replay(workload, ReplayConfig(url=lease.endpoint.url, request_timeout_s=30), tmp_path / "shard-0")
        assert (info.url, info.requests_ok, info.requests_total) == (advertised, 4, 4)
    finally:
        assert stop_detached(lease.process_group)
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{advertised}/health", timeout=2)


@pytest.mark.timeout(60)
def test_advertised_url_that_does_not_answer_fails_the_start_and_stops_the_server(tmp_path):
    port, dead_port = free_port(), free_port()
    spec = EndpointSpec(**TWIN, port=port, advertise_url=f"http://127.0.0.1:{dead_port}")
    with pytest.raises(EndpointStartError, match=f"healthy at http://127.0.0.1:{port} but not at its advertise_url"):
        start_detached(spec, tmp_path)
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)


@pytest.mark.parametrize("mode", [EndpointMode.SIM, EndpointMode.LAUNCH])
def test_a_started_server_is_refused_where_each_step_has_its_own_pod(tmp_path, mode):
    spec = EndpointSpec(**{**TWIN, "mode": mode})
    with pytest.raises(EndpointPlacementError, match=f"mode {mode.value}: .* use mode attach"):
        start_detached(spec, tmp_path, steps_share_host=False)
    assert not list(tmp_path.iterdir())  # refused before anything started


def test_a_process_group_started_on_another_host_is_not_signalled(tmp_path):
    """A lease read in another pod names a process group number of that pod, not of this one."""
    process = start_in_own_group([sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "log", {})
    try:
        assert stop_detached(process.pid, grace_s=1.0, host=f"not-{socket.gethostname()}") is False
        time.sleep(0.1)
        assert process.poll() is None
        assert stop_detached(process.pid, grace_s=5.0, host=socket.gethostname()) is True
        assert process.wait(5) is not None
    finally:
        if process.poll() is None:
            os.killpg(process.pid, 9)
            process.wait()
    assert stop_detached(None) is False
