"""The launch path, exercised for real with the twin as the launched program."""

from __future__ import annotations

import json
import os
import sys
import urllib.request

import pytest

from endpoints.provision import EndpointStartError, provision, server_command
from endpoints.spec import EndpointMode, EndpointSpec, EndpointSpecError, load_endpoint_specs


def _spec(**overrides) -> EndpointSpec:
    fields = dict(
        name="twin",
        mode=EndpointMode.SIM,
        model="deepseek-ai/DeepSeek-V3",
        server_args=("--tp", "8", "--sim-hardware", "h200"),
        gpu_type="H200",
        gpu_count=8,
        usd_per_gpu_hour=3.5,
        ready_timeout_s=30.0,
    )
    fields.update(overrides)
    return EndpointSpec(**fields)


def test_launch_command_carries_sglang_flags():
    command = server_command(_spec(mode=EndpointMode.LAUNCH), 31234)
    assert command[1:3] == ["-m", "sglang.launch_server"]
    joined = " ".join(command)
    for flag in ("--model-path deepseek-ai/DeepSeek-V3", "--host 127.0.0.1", "--port 31234", "--enable-metrics", "--enable-cache-report", "--tp 8"):
        assert flag in joined


def test_sim_endpoint_starts_answers_and_is_torn_down(tmp_path):
    with provision(_spec(), tmp_path) as endpoint:
        assert endpoint.url.startswith("http://127.0.0.1:")
        assert endpoint.server_info.get("tp_size") == 8
        assert endpoint.model_info.get("model_path") == "deepseek-ai/DeepSeek-V3"
        with urllib.request.urlopen(f"{endpoint.url}/v1/models") as response:
            assert json.loads(response.read())["data"][0]["id"]
        url = endpoint.url
    assert endpoint.log_path is not None and endpoint.log_path.exists()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{url}/health", timeout=2)


def test_server_that_dies_during_warmup_fails_fast_with_log_tail(tmp_path):
    script = "import sys; print('loading weights... out of memory', flush=True); sys.exit(3)"
    spec = _spec(command=(sys.executable, "-c", script))
    with pytest.raises(EndpointStartError, match="exited with code 3") as error:
        with provision(spec, tmp_path):
            pass
    assert "out of memory" in str(error.value)


def test_server_that_never_becomes_healthy_times_out_and_is_killed(tmp_path):
    pid_file = tmp_path / "pid"
    script = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(600)"
    spec = _spec(command=(sys.executable, "-c", script), ready_timeout_s=1.0)
    with pytest.raises(EndpointStartError, match="not healthy"):
        with provision(spec, tmp_path):
            pass
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_attach_to_something_that_is_not_sglang_says_so(tmp_path):
    spec = _spec(mode=EndpointMode.ATTACH, url="http://127.0.0.1:9")  # discard port: nothing listens
    with pytest.raises(EndpointStartError, match="health_generate"):
        with provision(spec, tmp_path):
            pass


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"mode": "cloud"}, "unknown mode 'cloud'"),
        ({"model": ""}, "missing 'model'"),
        ({"server_args": ["tp", "8"]}, "must start with a --flag"),
        ({"api_key_env": "sk-live-1234"}, "must name an environment variable"),
        ({"mode": "attach"}, "needs a url"),
    ],
)
def test_bad_endpoint_specs_are_rejected_with_where_and_why(tmp_path, entry, message):
    base = {"name": "e", "mode": "sim", "model": "m", "gpu_type": "H200", "gpu_count": 8, "usd_per_gpu_hour": 3.5}
    base.update(entry)
    path = tmp_path / "endpoints.yaml"
    path.write_text(json.dumps({"endpoints": [base]}))
    with pytest.raises(EndpointSpecError, match=message) as error:
        load_endpoint_specs(path)
    assert str(path) in str(error.value)


def test_bundled_endpoint_specs_load():
    from workloads.scenarios import default_endpoints_path

    specs = load_endpoint_specs(default_endpoints_path())
    assert all(spec.mode is EndpointMode.SIM for spec in specs.values())
