"""Endpoint specs: how to reach or start the SGLang server a scenario replays against.

Loaded from `workloads/endpoints.yaml`; validated once, then immutable. Secrets are named by the
environment variable that holds them, never written here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import date
from enum import Enum
from pathlib import Path

import yaml


class EndpointMode(str, Enum):
    SIM = "sim"  # the SGLang twin, started on loopback
    LAUNCH = "launch"  # python -m sglang.launch_server on this host
    ATTACH = "attach"  # a server someone else runs


class EndpointSpecError(ValueError):
    pass


_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
_FLAG = re.compile(r"^--[a-z0-9][a-z0-9-]*(=.*)?$")
_HTTP_URL = re.compile(r"^https?://[^\s/]+(/\S*)?$")
_BIND_HOST = re.compile(r"^[A-Za-z0-9.:_-]+$")
# provision() sets these itself: a second value would silently win (argparse keeps the last one).
_RESERVED_FLAGS = ("--model-path", "--model", "--host", "--port")
# A secret on a command line ends up in `ps`, the server's log and /server_info.
_SECRET_FLAGS = ("--api-key", "--admin-api-key")
_SECRET_ENV_NAME = re.compile(r"(^|_)(API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)($|_)")


@dataclass(frozen=True, slots=True)
class EndpointRevision:
    """A dated change of the server's flags: from the week starting `from_week` on, it runs `server_args`."""

    from_week: date  # a Monday
    server_args: tuple[str, ...]
    note: str = ""  # why it changed, for whoever reads the trend


@dataclass(frozen=True, slots=True)
class EndpointSpec:
    name: str
    mode: EndpointMode
    model: str
    server_args: tuple[str, ...]
    gpu_type: str
    gpu_count: int
    usd_per_gpu_hour: float
    url: str | None = None  # attach only; for a fleet, the sglang_router URL
    api_key_env: str | None = None  # name of the environment variable holding the API key
    command: tuple[str, ...] | None = None  # launch override (a router, a container)
    ready_timeout_s: float = 600.0
    # Added (all optional): fleets, launch environment, probes.
    worker_urls: tuple[str, ...] = ()  # attach: the SGLang workers behind a router; their /metrics are scraped
    env: tuple[tuple[str, str], ...] = ()  # launch/sim: extra environment for the server (no secrets)
    dcgm_url: str | None = None  # a DCGM exporter's /metrics, for GPUs that are not on this host
    scrape_interval_s: float = 1.0  # /metrics and GPU sampling period during a replay
    revisions: tuple[EndpointRevision, ...] = ()  # dated flag changes, oldest first
    host: str = "127.0.0.1"  # launch/sim: the address the server binds (0.0.0.0: every interface of the pod)
    port: int | None = None  # launch/sim: a fixed port (a Service's targetPort); None: a free one
    advertise_url: str | None = None  # launch/sim: the URL replay shards dial, ${VAR}s from the environment

    def as_of(self, week: date) -> "EndpointSpec":
        """The endpoint as it was configured in the week starting `week`."""
        server_args = self.server_args
        for revision in self.revisions:
            if revision.from_week <= week:
                server_args = revision.server_args
        return replace(self, server_args=server_args, revisions=())

    @staticmethod
    def from_dict(raw: dict, where: str) -> "EndpointSpec":
        if not isinstance(raw, dict):
            raise EndpointSpecError(f"{where}: expected a mapping of endpoint fields, got {type(raw).__name__}")
        name = str(raw.get("name") or "?")

        def fail(message: str) -> EndpointSpecError:
            return EndpointSpecError(f"{where}: endpoint {name!r}: {message}")

        def need(key: str):
            if key not in raw or raw[key] in (None, ""):
                raise EndpointSpecError(f"{where}: endpoint {name!r} is missing {key!r}")
            return raw[key]

        def number(key: str, default: float | None = None) -> float:
            value = raw.get(key, default) if default is not None else need(key)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise fail(f"{key} must be a number, got {value!r}")
            return float(value)

        need("name")
        try:
            mode = EndpointMode(need("mode"))
        except ValueError:
            raise fail(
                f"unknown mode {raw['mode']!r} (expected one of {', '.join(m.value for m in EndpointMode)})"
            ) from None
        server_args = _server_args(raw.get("server_args") or [], fail)
        api_key_env = raw.get("api_key_env")
        if api_key_env is not None and not _ENV_NAME.match(str(api_key_env)):
            raise fail("api_key_env must name an environment variable (like SGLANG_API_KEY), not hold the key itself")
        url = _optional_url(raw, "url", fail)
        worker_urls = raw.get("worker_urls") or []
        if not isinstance(worker_urls, list):
            raise fail(f"worker_urls must be a list of URLs, got {worker_urls!r}")
        for i, worker in enumerate(worker_urls):
            if not isinstance(worker, str) or not _HTTP_URL.match(worker):
                raise fail(f"worker_urls[{i}] must be an http(s) URL, got {worker!r}")
        if mode is EndpointMode.ATTACH and not url:
            raise fail("mode attach needs a url")
        if mode is not EndpointMode.ATTACH and (url or worker_urls):
            raise fail(f"url and worker_urls are for mode attach; mode {mode.value} binds host and port itself")
        host, port, advertise_url = _bind(raw, mode, fail)
        gpu_count = number("gpu_count")
        usd = number("usd_per_gpu_hour")
        if gpu_count <= 0 or gpu_count != int(gpu_count) or usd < 0:
            raise fail("gpu_count must be a whole number > 0 and usd_per_gpu_hour >= 0")
        ready_timeout_s = number("ready_timeout_s", 600.0)
        scrape_interval_s = number("scrape_interval_s", 1.0)
        if ready_timeout_s <= 0 or scrape_interval_s <= 0:
            raise fail("ready_timeout_s and scrape_interval_s must be > 0")
        command = raw.get("command")
        if command is not None and (not isinstance(command, list) or not command):
            raise fail(f"command must be a non-empty list (program and its arguments), got {command!r}")
        return EndpointSpec(
            name=str(need("name")),
            mode=mode,
            model=str(need("model")),
            server_args=server_args,
            gpu_type=str(need("gpu_type")),
            gpu_count=int(gpu_count),
            usd_per_gpu_hour=usd,
            url=url.rstrip("/") if url else None,
            api_key_env=api_key_env,
            command=tuple(str(c) for c in command) if command else None,
            ready_timeout_s=ready_timeout_s,
            worker_urls=tuple(w.rstrip("/") for w in worker_urls),
            env=_env(raw.get("env") or {}, mode, fail),
            dcgm_url=_optional_url(raw, "dcgm_url", fail),
            scrape_interval_s=scrape_interval_s,
            revisions=_revisions(raw.get("revisions") or [], fail),
            host=host,
            port=port,
            advertise_url=advertise_url,
        )


def _optional_url(raw: dict, key: str, fail) -> str | None:
    value = raw.get(key)
    if value in (None, ""):
        return None
    if not isinstance(value, str) or not _HTTP_URL.match(value):
        raise fail(f"{key} must be an http(s) URL, got {value!r}")
    return value


def _bind(raw: dict, mode: EndpointMode, fail) -> tuple[str, int | None, str | None]:
    """Where a server costbench starts listens (host, port) and the URL replay shards dial instead."""
    if mode is EndpointMode.ATTACH:
        if any(raw.get(key) not in (None, "") for key in ("host", "port", "advertise_url")):
            raise fail("host, port and advertise_url are for a server costbench starts (launch, sim); attach has url")
        return "127.0.0.1", None, None
    host = raw.get("host", "127.0.0.1")
    if not isinstance(host, str) or not _BIND_HOST.match(host):
        raise fail(f"host must be an address or host name to bind, like 127.0.0.1 or 0.0.0.0, got {host!r}")
    port = raw.get("port")
    if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536):
        raise fail(f"port must be a whole number from 1 to 65535, got {port!r}")
    advertise_url = _optional_url(raw, "advertise_url", fail)
    if advertise_url and port is None:
        raise fail("advertise_url needs a fixed port: on a free port the address is not known before the server starts")
    return host, port, advertise_url.rstrip("/") if advertise_url else None


def _server_args(server_args: object, fail) -> tuple[str, ...]:
    if not isinstance(server_args, list) or not all(
        isinstance(a, (str, int, float)) and not isinstance(a, bool) for a in server_args
    ):
        raise fail("server_args must be a list of flags and values, like [--tp, 8]")
    args = tuple(str(a) for a in server_args)
    if args and not args[0].startswith("--"):
        raise fail(f"server_args must start with a --flag, got {args[0]!r}")
    for i, arg in enumerate(args):
        if not arg.startswith("-") or arg.lstrip("-").replace(".", "").isdigit():
            continue  # a value (negative numbers included, e.g. --chunked-prefill-size -1)
        if " " in arg and "=" not in arg:
            raise fail(f"server_args[{i}] {arg!r} holds a flag and its value in one item; write them as two items")
        if not _FLAG.match(arg):
            raise fail(f"server_args[{i}] {arg!r} is not a flag like --tp-size (two dashes, lower case)")
        flag = arg.split("=", 1)[0]
        if flag in _SECRET_FLAGS:
            raise fail(f"server_args[{i}] {flag} would write a secret in plain text; name its variable in api_key_env")
        if flag in _RESERVED_FLAGS:
            raise fail(f"server_args[{i}] {flag} is set by costbench (the model, host and port fields)")
    return args


def _revisions(raw: object, fail) -> tuple[EndpointRevision, ...]:
    if not isinstance(raw, list):
        raise fail(f"revisions must be a list of {{from_week, server_args, note}}, got {raw!r}")
    revisions = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict) or "from_week" not in entry or "server_args" not in entry:
            raise fail(f"revisions[{i}] needs from_week and server_args")
        week = entry["from_week"]
        try:
            week = week if isinstance(week, date) else date.fromisoformat(str(week))
        except ValueError:
            raise fail(f"revisions[{i}].from_week {entry['from_week']!r} is not a date (YYYY-MM-DD)") from None
        if week.weekday() != 0:
            raise fail(f"revisions[{i}].from_week {week} is not a Monday (weeks start on Monday)")
        revisions.append(EndpointRevision(week, _server_args(entry["server_args"], fail), str(entry.get("note") or "")))
    if [r.from_week for r in revisions] != sorted({r.from_week for r in revisions}):
        raise fail("revisions must be in date order, one per week")
    return tuple(revisions)


def _env(env: object, mode: EndpointMode, fail) -> tuple[tuple[str, str], ...]:
    if not isinstance(env, dict):
        raise fail(f"env must be a mapping of NAME: value, got {env!r}")
    if env and mode is EndpointMode.ATTACH:
        raise fail("env is for a server costbench starts (launch, sim), not for attach")
    pairs = []
    for key, value in env.items():
        if not isinstance(key, str) or not _ENV_NAME.match(key):
            raise fail(f"env key {key!r} is not an environment variable name")
        if _SECRET_ENV_NAME.search(key):
            raise fail(f"env {key} looks like a secret: export it where costbench runs (it is inherited), not here")
        if isinstance(value, (dict, list)) or value is None:
            raise fail(f"env {key} must be a string or number, got {value!r}")
        pairs.append((key, str(value).lower() if isinstance(value, bool) else str(value)))
    return tuple(sorted(pairs))


def load_endpoint_specs(path: Path) -> dict[str, EndpointSpec]:
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except yaml.YAMLError as exc:
        raise EndpointSpecError(f"{path}: not valid YAML: {exc}") from None
    entries = raw.get("endpoints") if isinstance(raw, dict) else None
    if not isinstance(entries, list):
        raise EndpointSpecError(f"{path}: expected a top-level 'endpoints:' list")
    specs: dict[str, EndpointSpec] = {}
    for i, entry in enumerate(entries):
        spec = EndpointSpec.from_dict(entry, f"{path} endpoints[{i}]")
        if spec.name in specs:
            raise EndpointSpecError(f"{path} endpoints[{i}]: duplicate endpoint name {spec.name!r}")
        specs[spec.name] = spec
    return specs
