"""Endpoint specs: fleets, launch environment and probe settings validate with clear errors."""

from __future__ import annotations

import json

import pytest

from endpoints.spec import EndpointMode, EndpointSpecError, load_endpoint_specs

BASE = {"name": "e", "mode": "launch", "model": "deepseek-ai/DeepSeek-V3", "gpu_type": "H200", "gpu_count": 8,
        "usd_per_gpu_hour": 3.5}  # fmt: skip


def _load(tmp_path, **entry):
    path = tmp_path / "endpoints.yaml"
    path.write_text(json.dumps({"endpoints": [{**BASE, **entry}]}))
    return path, load_endpoint_specs(path)


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"server_args": ["--tp 8"]}, r"server_args\[0\]: '--tp 8' holds a flag and its value in one item"),
        ({"server_args": ["--tp", "8", "-dp", "2"]}, r"server_args\[2\]: '-dp' is not a flag like --tp-size"),
        ({"server_args": ["--TP", "8"]}, r"'--TP' is not a flag"),
        ({"server_args": ["--tp", True]}, r"server_args\[1\]: must be a flag or a value \(a string or a number\), got True"),
        ({"server_args": "--tp 8"}, "server_args: must be a list, got '--tp 8'"),
        ({"server_args": ["--api-key", "sk-123"]}, "secret in plain text; name its variable in api_key_env"),
        ({"server_args": ["--api-key=sk-123"]}, "secret in plain text"),
        ({"server_args": ["--hf-token", "hf_abc"]}, r"server_args\[0\]: --hf-token would write a secret in plain text"),
        ({"server_args": ["--port", "30000"]}, "--port is set by costbench"),
        ({"server_args": ["--model-path", "x"]}, "--model-path is set by costbench"),
        ({"env": {"HF_TOKEN": "hf_abc"}}, "env.HF_TOKEN: looks like a secret"),
        ({"env": {"lower": "1"}}, "env.lower: 'lower' is not an environment variable name"),
        ({"env": ["A=1"]}, r"env: must be a mapping, got \['A=1'\]"),
        ({"env": {"A": [1]}}, r"env.A: must be a string or a number, got \[1\]"),
        ({"url": "http://10.0.0.1:30000"}, "url: url and worker_urls are for mode attach"),
        ({"mode": "attach", "url": "http://r:30000", "worker_urls": ["10.0.0.2:30000"]}, r"worker_urls\[0\]: must be an http"),
        ({"mode": "attach", "url": "http://admin:pw@r:30000"}, "url: must not carry user:password"),
        ({"mode": "attach", "url": "http://r:30000", "env": {"A": "1"}}, "env: env is for a server costbench starts"),
        ({"dcgm_url": "gpu-host:9400"}, "dcgm_url: must be an http"),
        ({"scrape_interval_s": 0}, "scrape_interval_s: must be > 0, got 0"),
        ({"hours_per_week": 0}, "hours_per_week: must be > 0, got 0"),
        ({"hours_per_week": 169}, "hours_per_week: must be <= 168, got 169"),  # a week has 168 hours
        ({"hours_per_week": "40h"}, "hours_per_week: must be a number, got '40h'"),
        ({"gpu_count": 2.5}, "gpu_count: must be a whole number, got 2.5"),
        ({"gpu_count": "8"}, "gpu_count: must be a whole number, got '8'"),
        ({"usd_per_gpu_hour": -1}, "usd_per_gpu_hour: must be > 0, got -1"),
        ({"usd_per_gpu_hour": 0}, "usd_per_gpu_hour: must be > 0, got 0"),  # as a price book's
        ({"usd_per_gpu_hour": 1000.01}, "usd_per_gpu_hour: must be <= 1000, got 1000.01"),
        ({"command": "python -m sglang_router.launch_server"}, "command: must be a list"),
        ({"command": []}, "command: must not be empty"),
        ({"command": ["docker", "run", "-e", "X", "--api-key=sk-1"]}, r"command\[4\]: --api-key would write a secret"),
        ({"gpus": 8}, "gpus: unknown key"),
        ({"mode": "launch", "server_args": ["--tp", "16", "--nnodes", "2"]}, "server_args: --nnodes above 1: launch starts"),
        ({"mode": "launch", "server_args": ["--nnodes=4"]}, "start it by hand and attach to it"),
        ({"server_arg": ["--tp", "8"]}, "server_arg: unknown key \\(did you mean 'server_args'\\?\\)"),
        ({"api_key": "sk-live"}, "api_key: unknown key \\(did you mean 'api_key_env'\\?\\)"),
    ],
)  # fmt: skip
def test_bad_specs_name_the_file_key_path_and_reason(tmp_path, entry, message):
    with pytest.raises(EndpointSpecError, match=message) as error:
        _load(tmp_path, **entry)
    assert str(error.value).startswith(f"{tmp_path / 'endpoints.yaml'}: endpoints[0].")
    assert str(error.value).endswith("(endpoint 'e')")


def test_a_secret_in_a_bad_entry_is_not_repeated_in_the_error(tmp_path):
    for entry in ({"api_key_env": "sk-live-1234"}, {"api_key": "sk-live-1234"}, {"env": {"HF_TOKEN": "sk-live-1234"}},
                  {"mode": "attach", "url": "admin:sk-live-1234@gpu-node:30000"}):  # fmt: skip
        with pytest.raises(EndpointSpecError) as error:
            _load(tmp_path, **entry)
        assert "sk-live-1234" not in str(error.value)


@pytest.mark.parametrize("name", ["../../../x", "a/b", ".hidden", "-rf", "", "two words", "é"])
def test_an_endpoint_name_must_be_one_safe_path_component(tmp_path, name):
    """The name becomes the server log's file name in the run folder (`<name>.server.log`)."""
    with pytest.raises(EndpointSpecError) as error:
        _load(tmp_path, name=name)
    assert (
        f"endpoints[0].name: must match ^[A-Za-z0-9][A-Za-z0-9._-]{{0,127}}$ (it becomes a folder and a file name), got {name!r}"
        in str(error.value)
    )


def test_missing_keys_and_duplicates(tmp_path):
    path = tmp_path / "endpoints.yaml"
    path.write_text(json.dumps({"endpoints": [{"name": "e", "mode": "sim", "model": "m"}]}))
    with pytest.raises(EndpointSpecError) as error:
        load_endpoint_specs(path)
    assert str(error.value).splitlines() == [
        f"{path}: endpoints[0].{key}: required key is missing (endpoint 'e')"
        for key in ("gpu_type", "gpu_count", "usd_per_gpu_hour")
    ]
    path.write_text(json.dumps({"endpoints": [BASE, {**BASE, "mode": "sim"}]}))
    with pytest.raises(EndpointSpecError, match=r"endpoints\[1\].name: duplicate endpoint name 'e'"):
        load_endpoint_specs(path)
    path.write_text(json.dumps({"endpoint": []}))
    with pytest.raises(EndpointSpecError, match=r"endpoints.yaml: endpoints: required key is missing"):
        load_endpoint_specs(path)


def test_negative_values_and_inline_values_are_not_mistaken_for_flags(tmp_path):
    _, specs = _load(tmp_path, server_args=["--chunked-prefill-size", -1, "--mem-fraction-static=0.85",
                                            "--json-model-override-args", '{"a": 1}'])  # fmt: skip
    assert specs["e"].server_args == ("--chunked-prefill-size", "-1", "--mem-fraction-static=0.85",
                                      "--json-model-override-args", '{"a": 1}')  # fmt: skip


def test_a_fleet_and_its_probe_settings_load(tmp_path):
    _, specs = _load(
        tmp_path,
        mode="attach",
        url="http://router:30000/",
        worker_urls=["http://w0:30000", "http://w1:30000/"],
        dcgm_url="http://w0:9400/metrics",
        scrape_interval_s=2,
        api_key_env="SGLANG_API_KEY",
    )
    spec = specs["e"]
    assert spec.mode is EndpointMode.ATTACH and spec.url == "http://router:30000"
    assert spec.worker_urls == ("http://w0:30000", "http://w1:30000")
    assert spec.dcgm_url == "http://w0:9400/metrics" and spec.scrape_interval_s == 2.0


def test_the_hours_a_week_the_gpus_are_held_default_to_the_whole_week(tmp_path):
    assert _load(tmp_path)[1]["e"].hours_per_week == 168.0  # a production fleet serves around the clock
    assert _load(tmp_path, hours_per_week=40)[1]["e"].hours_per_week == 40.0  # office hours: 5 x 8 h


def test_launch_environment_is_kept_as_strings(tmp_path):
    _, specs = _load(tmp_path, env={"SGLANG_ENABLE_JIT_DEEPGEMM": 1, "NCCL_DEBUG": "WARN", "X_ON": True})
    assert dict(specs["e"].env) == {"SGLANG_ENABLE_JIT_DEEPGEMM": "1", "NCCL_DEBUG": "WARN", "X_ON": "true"}


def test_bundled_r1_launch_example_builds_the_runbook_command():
    from endpoints.provision import server_command
    from workloads.scenarios import default_endpoints_path

    spec = load_endpoint_specs(default_endpoints_path())["r1-8xh200-launch"]
    command = " ".join(server_command(spec, 30000))
    assert "-m sglang.launch_server --model-path deepseek-ai/DeepSeek-R1" in command
    assert "--enable-metrics --enable-cache-report --tp 8" in command
    assert "--reasoning-parser deepseek-r1" in command


def test_revisions_change_the_flags_from_their_week_on(tmp_path):
    from datetime import date

    path = tmp_path / "endpoints.yaml"
    path.write_text(
        "endpoints:\n  - name: e\n    mode: sim\n    model: m\n    gpu_type: H200\n    gpu_count: 8\n"
        "    usd_per_gpu_hour: 3.5\n    server_args: [--tp, '8']\n    revisions:\n"
        "      - {from_week: 2026-11-09, server_args: [--tp, '8', --disable-radix-cache], note: debugging}\n"
        "      - {from_week: 2026-11-16, server_args: [--tp, '8']}\n"
    )
    spec = load_endpoint_specs(path)["e"]
    assert spec.as_of(date(2026, 11, 2)).server_args == ("--tp", "8")
    assert spec.as_of(date(2026, 11, 9)).server_args == ("--tp", "8", "--disable-radix-cache")
    assert spec.as_of(date(2026, 11, 23)).server_args == ("--tp", "8")
    # The revision in force comes along, with its note and week: the run records why its flags are what they are.
    assert spec.as_of(date(2026, 11, 2)).revision is None
    revision = spec.as_of(date(2026, 11, 9)).revision
    assert revision is not None and (revision.from_week, revision.note) == (date(2026, 11, 9), "debugging")
    later = spec.as_of(date(2026, 11, 23)).revision
    assert later is not None and (later.from_week, later.note) == (date(2026, 11, 16), "")
    path.write_text(path.read_text().replace("2026-11-16", "2026-11-17"))
    with pytest.raises(EndpointSpecError, match=r"endpoints\[0\].revisions\[1\].from_week: 2026-11-17 is not a Monday"):
        load_endpoint_specs(path)
