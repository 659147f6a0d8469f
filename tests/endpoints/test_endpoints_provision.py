"""The launch path, exercised for real with the twin as the launched program."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from aiohttp import web

from endpoints.provision import EndpointStartError, provision, server_command
from endpoints.spec import EndpointMode, EndpointSpec, EndpointSpecError, load_endpoint_specs
from endpoints_loopback import serve_in_thread

REPO_ROOT = Path(__file__).resolve().parents[2]


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
    for flag in (
        "--model-path deepseek-ai/DeepSeek-V3",
        "--host 127.0.0.1",
        "--port 31234",
        "--enable-metrics",
        "--enable-cache-report",
        "--tp 8",
    ):
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
        ({"model": ""}, "model: must not be empty"),
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
    assert {spec.mode for spec in specs.values()} == set(EndpointMode)
    fleet = [spec for spec in specs.values() if spec.worker_urls]
    assert fleet and all(spec.mode is EndpointMode.ATTACH for spec in fleet)


# -- launch, exactly the real path with the twin as the launched program -------------------------

TWIN_COMMAND = (sys.executable, "-m", "endpoints.sim")


def _launch_spec(**overrides) -> EndpointSpec:
    return _spec(mode=EndpointMode.LAUNCH, command=TWIN_COMMAND, **overrides)


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def test_launch_mode_runs_the_twin_saves_facts_and_tears_the_group_down(tmp_path):
    spec = _launch_spec(server_args=("--tp", "8", "--sim-hardware", "h200", "--sim-warmup-s", "0.3"))
    with provision(spec, tmp_path) as endpoint:
        facts = json.loads((tmp_path / "server_facts.json").read_text())
        assert facts["server_info"]["tp_size"] == 8
        assert facts["model_info"]["model_path"] == "deepseek-ai/DeepSeek-V3"
        assert facts["version"] == endpoint.version and endpoint.version
        assert facts["config_fingerprint"] == endpoint.fingerprint.digest
        assert facts["command"][:3] == list(TWIN_COMMAND)
        assert endpoint.metrics_urls == (endpoint.url,)
        url = endpoint.url
    log = endpoint.log_path.read_text()
    assert "--enable-metrics" in log.splitlines()[0]  # the exact command heads the kept log
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{url}/health", timeout=2)


def test_launch_passes_the_spec_environment_to_the_server(tmp_path):
    script = "import os, sys; print('mark=' + os.environ['COSTBENCH_TEST_MARK'], flush=True); sys.exit(4)"
    spec = _spec(mode=EndpointMode.LAUNCH, command=(sys.executable, "-c", script), env=(("COSTBENCH_TEST_MARK", "42"),))
    with pytest.raises(EndpointStartError, match="exited with code 4") as error:
        with provision(spec, tmp_path):
            pass
    assert "mark=42" in str(error.value)


def test_a_server_that_forks_is_torn_down_with_its_children(tmp_path):
    # A router or SGLang itself starts children; teardown must reach them, not only the leader.
    pids = tmp_path / "pids"
    script = (
        "import os, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{child.pid}}')\n"
        "time.sleep(600)\n"
    )
    spec = _spec(mode=EndpointMode.LAUNCH, command=(sys.executable, "-c", script), ready_timeout_s=1.5)
    with pytest.raises(EndpointStartError, match="not healthy"):
        with provision(spec, tmp_path):
            pass
    leader, child = (int(p) for p in pids.read_text().split())
    assert _group_gone(leader)
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)


_PARENT = """
import sys, time
from pathlib import Path
from endpoints.provision import provision
from endpoints.spec import EndpointMode, EndpointSpec
run_dir = Path(sys.argv[1])
spec = EndpointSpec(name="twin", mode=EndpointMode.LAUNCH, model="deepseek-ai/DeepSeek-V3",
                    server_args=("--tp", "8"), gpu_type="H200", gpu_count=8, usd_per_gpu_hour=3.5,
                    command=(sys.executable, "-m", "endpoints.sim"), ready_timeout_s=30)
try:
    with provision(spec, run_dir) as endpoint:
        (run_dir / "url").write_text(endpoint.url)
        time.sleep(600)
finally:
    (run_dir / "cleaned").write_text("yes")
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_interrupting_costbench_tears_the_server_down(tmp_path, signum):
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, str(tmp_path)], cwd=REPO_ROOT)
    server_pid = None
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "url").exists():
            assert parent.poll() is None and time.monotonic() < deadline, "provision never became ready"
            time.sleep(0.05)
        url = (tmp_path / "url").read_text()
        port = int(url.rsplit(":", 1)[1])
        server_pid = _pid_listening_on(port)
        parent.send_signal(signum)
        parent.wait(timeout=30)
    finally:
        if parent.poll() is None:  # the test fails: nothing it started may outlive it
            parent.kill()
            parent.wait()
            if server_pid is not None and not _group_gone(server_pid):
                os.killpg(server_pid, signal.SIGKILL)
    assert (tmp_path / "cleaned").read_text() == "yes"
    assert _group_gone(server_pid)
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{url}/health", timeout=2)


def _pid_listening_on(port: int) -> int:
    """The server's pid, from /proc: the owner of the listening socket on `port`."""
    inode = None
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in open(table).read().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":  # 0A: LISTEN
                inode = fields[9]
    assert inode, f"nothing listens on {port}"
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]":
                    return int(pid)
            except OSError:
                continue
    raise AssertionError(f"no process owns the socket on {port}")


# -- attach ----------------------------------------------------------------------------------------


def test_attach_saves_the_same_facts_as_launch(tmp_path):
    with provision(_spec(), tmp_path / "sim") as running:
        spec = _spec(mode=EndpointMode.ATTACH, url=running.url)
        with provision(spec, tmp_path / "attach") as attached:
            assert attached.log_path is None
            assert attached.server_info["tp_size"] == 8
            assert attached.fingerprint == running.fingerprint
            assert json.loads((tmp_path / "attach" / "server_facts.json").read_text())["mode"] == "attach"


def _impostor(server_info_route: str | None) -> web.Application:
    app = web.Application()
    app.router.add_get("/health_generate", lambda request: web.Response(text="ok"))
    if server_info_route == "html":
        page = "<html><body>Welcome to nginx</body></html>"
        app.router.add_get("/server_info", lambda request: web.Response(text=page, content_type="text/html"))
    return app


@pytest.mark.parametrize("kind", [None, "html"], ids=["no-server-info", "html"])
def test_attach_to_a_healthy_url_that_is_not_sglang_says_so(tmp_path, kind):
    with serve_in_thread(_impostor(kind)) as url:
        spec = _spec(mode=EndpointMode.ATTACH, url=url)
        with pytest.raises(EndpointStartError, match="does not answer like an SGLang server") as error:
            with provision(spec, tmp_path):
                pass
    assert ("text/html" in str(error.value)) == (kind == "html")


def test_attach_to_a_refused_port_says_nothing_answers(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: connections are refused
        spec = _spec(mode=EndpointMode.ATTACH, url=f"http://127.0.0.1:{port}")
        with pytest.raises(EndpointStartError, match="nothing answers .*refused"):
            with provision(spec, tmp_path):
                pass


def test_detached_endpoint_outlives_its_starter_until_stopped(tmp_path):
    """A sharded replay starts the endpoint in one step and stops it in another."""
    from endpoints.provision import start_detached, stop_detached

    lease = start_detached(_spec(), tmp_path)
    with urllib.request.urlopen(f"{lease.endpoint.url}/health_generate", timeout=5) as response:
        assert response.status == 200
    stop_detached(lease.process_group)
    with pytest.raises(ProcessLookupError):
        os.killpg(lease.process_group, 0)
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{lease.endpoint.url}/health", timeout=2)
