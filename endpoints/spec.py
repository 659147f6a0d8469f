"""Endpoint specs: how to reach or start the SGLang server a scenario replays against.

Loaded from `workloads/endpoints.yaml` through a declared model (common/config_file.py: unknown
keys, wrong types and missing keys fail with the file, the key path and the reason), then immutable.
Secrets are named by the environment variable that holds them, never written here. An endpoint name
becomes a file name (its server log), so it is restricted to config_file.SAFE_NAME.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import date
from enum import Enum
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator, Field, model_validator

from common.config_file import (
    ConfigFileError,
    ConfigModel,
    IsoDate,
    NonEmptyStr,
    SafeName,
    config_error,
    parse_config,
    read_yaml,
)
from endpoints.router.policy_params import UnmodelledRouting, parse_router_spec
from endpoints.router.router_spec import DEFAULT_POLICY, RouterSpec
from redaction.secret_redaction import is_secret_name


class EndpointMode(str, Enum):
    SIM = "sim"  # the SGLang twin, started on loopback
    LAUNCH = "launch"  # python -m sglang.launch_server on this host
    ATTACH = "attach"  # a server someone else runs


class EndpointClock(str, Enum):
    WALL = "wall"  # the server runs in real time in its own process (every mode)
    # sim only: the twin is served inside the replay step's process, on one virtual clock with the replay
    # client, over real HTTP on loopback; waits jump, so a window of trace costs CPU time, not its length
    VIRTUAL = "virtual"


class WorkerRole(str, Enum):
    """What a fleet's worker does: both halves of a request (aggregated replicas), or one of them in a
    disaggregated fleet (smg launch --pd-disaggregation --prefill URL PORT ... --decode URL ...)."""

    REGULAR = "regular"  # prefill and decode in one server, as sglang.launch_server runs by default
    PREFILL = "prefill"  # --disaggregation-mode prefill: prefills, then sends the KV to a decode worker
    DECODE = "decode"  # --disaggregation-mode decode: receives the KV and decodes


@dataclass(frozen=True, slots=True)
class WorkerGroup:
    role: WorkerRole
    count: int  # workers of this role
    gpus_per_worker: int
    server_args: tuple[str, ...] = ()  # this role's flags, after the endpoint's own (a PD fleet's roles differ)


@dataclass(frozen=True, slots=True)
class FleetSpec:
    """Several SGLang workers behind SGLang's router (smg). The endpoint's gpu_count is the fleet's total and
    its price covers every GPU, so every cost figure stays gpu_count x price, as for one server."""

    router: RouterSpec
    groups: tuple[WorkerGroup, ...]

    @property
    def replicas(self) -> int:
        return sum(group.count for group in self.groups)

    @property
    def disaggregated(self) -> bool:
        return any(group.role is not WorkerRole.REGULAR for group in self.groups)


class EndpointSpecError(ConfigFileError):
    """An invalid endpoints file: the message names the file, the key path and the reason."""


ENDPOINTS_ENV = "COSTBENCH_ENDPOINTS"  # the endpoints file the pipeline reads; unset: workloads/endpoints.yaml
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
_FLAG = re.compile(r"^--[a-z0-9][a-z0-9-]*(=.*)?$")
_HTTP_URL = re.compile(r"^https?://[^\s/]+(/\S*)?$")
_BIND_HOST = re.compile(r"^[A-Za-z0-9.:_-]+$")
# provision() sets these itself: a second value would silently win (argparse keeps the last one).
_RESERVED_FLAGS = ("--model-path", "--model", "--host", "--port")
# and these on each worker of a disaggregated fleet, by its role
_PD_RESERVED_FLAGS = ("--disaggregation-mode", "--disaggregation-bootstrap-port")


# The range of every number an endpoint may set (a typo such as gpu_count: 1e23 is refused here).
MAX_GPU_COUNT = 65_536
# Also the price books' bound, quoted or computed (warehouse/marts/price_table.py); every price is > 0 too.
MAX_USD_PER_GPU_HOUR = 1_000.0
MAX_READY_TIMEOUT_S = 86_400.0
MAX_SCRAPE_INTERVAL_S = 3_600.0
MAX_REPLICAS = 1_024
# A week's hours: the most an endpoint's GPUs can be held in one (hours_per_week; its default, around the clock).
HOURS_PER_WEEK = 168.0
# smg 1.13.0's `launch --policy` choices (smg launch --help); a typo fails the file, not the router's start.
ROUTER_POLICIES = ("random", "round_robin", "passthrough", "cache_aware", "power_of_two", "least_load", "manual",
                   "consistent_hashing", "prefix_hash")  # fmt: skip
# costbench sets these on the smg command line itself (router.policy has its own key); a disaggregated
# fleet is another shape, not flags on this one.
_ROUTER_RESERVED_FLAGS = ("--worker-urls", "--host", "--port", "--prometheus-host", "--prometheus-port", "--policy",
                          "--pd-disaggregation", "--epd-disaggregation", "--prefill", "--decode", "--encode",
                          "--service-discovery")  # fmt: skip


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
    # Price of one GPU-hour: set here (an explicit override), or None to take it from `price_book`.
    usd_per_gpu_hour: float | None
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
    price_book: str | None = None  # a price book of warehouse/prices.yaml (warehouse/marts/price_table.py resolves it)
    advertise_url: str | None = None  # launch/sim: the URL replay shards dial, ${VAR}s from the environment
    clock: EndpointClock = EndpointClock.WALL
    fleet: FleetSpec | None = None  # several workers behind SGLang's router; None: one server
    router_metrics_url: str | None = None  # attach: the router's own Prometheus /metrics (smg --prometheus-port)
    # What the week's spend counts: hours a week the GPUs are held (HOURS_PER_WEEK: they serve around the clock).
    hours_per_week: float = HOURS_PER_WEEK
    revision: EndpointRevision | None = None  # as_of: the dated revision whose server_args are in force; None: none

    def as_of(self, week: date) -> "EndpointSpec":
        """The endpoint as it was configured in the week starting `week`: the server_args of the latest revision
        from that week or before (the revision itself, with its note, in `revision`), else its own."""
        server_args, applying = self.server_args, self.revision
        for revision in self.revisions:
            if revision.from_week <= week:
                server_args, applying = revision.server_args, revision
        return replace(self, server_args=server_args, revisions=(), revision=applying)


# -- the file's model: one validator per kind of value, so each problem has its own key path ---------


def _is_value(arg: str) -> bool:
    """A flag's value, not a flag (negative numbers included, e.g. --chunked-prefill-size -1)."""
    return not arg.startswith("-") or arg.lstrip("-").replace(".", "").isdigit()


def _scalar_text(value: object) -> object:
    if isinstance(value, bool):
        raise ValueError(f"must be a flag or a value (a string or a number), got {value!r}")
    return str(value) if isinstance(value, (int, float)) else value


def _server_arg(arg: str) -> str:
    if _is_value(arg):
        return arg
    if " " in arg and "=" not in arg:
        raise ValueError(f"{arg!r} holds a flag and its value in one item; write them as two items")
    if not _FLAG.match(arg):
        raise ValueError(f"{arg!r} is not a flag like --tp-size (two dashes, lower case)")
    flag = arg.split("=", 1)[0]
    if is_secret_name(flag.lstrip("-")):
        raise ValueError(f"{flag} would write a secret in plain text; name its variable in api_key_env")
    if flag in _RESERVED_FLAGS:
        raise ValueError(f"{flag} is set by costbench (the model, host and port fields)")
    return arg


def _starts_with_flag(args: list[str]) -> list[str]:
    if args and not args[0].startswith("--"):
        raise ValueError(f"must start with a --flag, like [--tp, 8], got {args[0]!r} first")
    return args


def _command_item(arg: str) -> str:
    flag = arg.split("=", 1)[0]
    if flag.startswith("-") and is_secret_name(flag.lstrip("-")):
        raise ValueError(f"{flag} would write a secret in plain text; name its variable in api_key_env")
    return arg


def _http_url(value: str) -> str:
    if "@" in value.split("://", 1)[-1].split("/", 1)[0]:  # checked first: the value is not echoed
        raise ValueError("must not carry user:password; name the key's environment variable in api_key_env")
    if not _HTTP_URL.match(value):
        raise ValueError(f"must be an http(s) URL like http://host:30000, got {value!r}")
    return value.rstrip("/")


def _env_var_name(value: str) -> str:
    if not _ENV_NAME.match(value):
        # Not echoed: what is here may be the key itself.
        raise ValueError("must name an environment variable (like SGLANG_API_KEY), not hold the key itself")
    return value


def _env_value(value: object) -> object:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return str(value)
    if not isinstance(value, str):
        raise ValueError(f"must be a string or a number, got {value!r}")
    return value


def _bind_host(value: str) -> str:
    if not _BIND_HOST.match(value):
        raise ValueError(f"must be an address or host name to bind, like 127.0.0.1 or 0.0.0.0, got {value!r}")
    return value


def _tcp_port(value: int) -> int:
    if not 0 < value < 65536:
        raise ValueError(f"must be a whole number from 1 to 65535, got {value!r}")
    return value


def _mode(value: str) -> str:
    if value not in {m.value for m in EndpointMode}:
        raise ValueError(f"unknown mode {value!r} (expected one of {', '.join(m.value for m in EndpointMode)})")
    return value


def _clock(value: str) -> str:
    if value not in {c.value for c in EndpointClock}:
        raise ValueError(f"unknown clock {value!r} (expected one of {', '.join(c.value for c in EndpointClock)})")
    return value


def _monday(week: date) -> date:
    if week.weekday() != 0:
        raise ValueError(f"{week} is not a Monday (weeks start on Monday)")
    return week


ServerArgs = Annotated[
    list[Annotated[str, BeforeValidator(_scalar_text), AfterValidator(_server_arg)]], AfterValidator(_starts_with_flag)
]
HttpUrl = Annotated[str, AfterValidator(_http_url)]


def _router_arg(arg: str) -> str:
    if _is_value(arg):
        return arg
    if not _FLAG.match(arg):
        raise ValueError(f"{arg!r} is not a flag like --cache-threshold (two dashes, lower case)")
    flag = arg.split("=", 1)[0]
    if is_secret_name(flag.lstrip("-")):
        raise ValueError(f"{flag} would write a secret in plain text in endpoints.yaml")
    if flag in _ROUTER_RESERVED_FLAGS:
        raise ValueError(f"{flag} is set by costbench (router.policy, the workers, host and ports)")
    return arg


def _router_policy(value: str) -> str:
    if value not in ROUTER_POLICIES:
        raise ValueError(f"unknown router policy {value!r} (smg 1.13.0 has {', '.join(ROUTER_POLICIES)})")
    return value


class _Router(ConfigModel):
    policy: Annotated[str, AfterValidator(_router_policy)] = DEFAULT_POLICY
    args: Annotated[
        list[Annotated[str, BeforeValidator(_scalar_text), AfterValidator(_router_arg)]],
        AfterValidator(_starts_with_flag),
    ] = []


def _role_server_arg(arg: str) -> str:
    arg = _server_arg(arg)
    if arg.split("=", 1)[0] in _PD_RESERVED_FLAGS:
        raise ValueError(f"{arg.split('=', 1)[0]} is set by costbench for each role (disaggregation.prefill/decode)")
    return arg


class _RoleWorkers(ConfigModel):
    replicas: int = Field(1, gt=0, le=MAX_REPLICAS)
    gpus_per_worker: int = Field(gt=0, le=MAX_GPU_COUNT)
    server_args: Annotated[
        list[Annotated[str, BeforeValidator(_scalar_text), AfterValidator(_role_server_arg)]],
        AfterValidator(_starts_with_flag),
    ] = []


class _Disaggregation(ConfigModel):
    prefill: _RoleWorkers
    decode: _RoleWorkers


class _Revision(ConfigModel):
    from_week: Annotated[IsoDate, AfterValidator(_monday)]
    server_args: ServerArgs
    note: str = ""


class _EndpointEntry(ConfigModel):
    name: SafeName
    mode: Annotated[str, AfterValidator(_mode)]
    model: NonEmptyStr
    server_args: ServerArgs = []
    gpu_type: NonEmptyStr
    gpu_count: int = Field(gt=0, le=MAX_GPU_COUNT)
    # Required unless price_book names where the price comes from (then absent is read as null).
    usd_per_gpu_hour: float | None = Field(gt=0, le=MAX_USD_PER_GPU_HOUR)  # > 0, as in the price books
    price_book: SafeName | None = None
    url: HttpUrl | None = None
    api_key_env: Annotated[str, AfterValidator(_env_var_name)] | None = None
    command: list[Annotated[NonEmptyStr, AfterValidator(_command_item)]] | None = Field(None, min_length=1)
    ready_timeout_s: float = Field(600.0, gt=0, le=MAX_READY_TIMEOUT_S)
    worker_urls: list[HttpUrl] = []
    env: dict[str, Annotated[str, BeforeValidator(_env_value)]] = {}
    dcgm_url: HttpUrl | None = None
    scrape_interval_s: float = Field(1.0, gt=0, le=MAX_SCRAPE_INTERVAL_S)
    hours_per_week: float = Field(HOURS_PER_WEEK, gt=0, le=HOURS_PER_WEEK)
    revisions: list[_Revision] = []
    host: Annotated[str, AfterValidator(_bind_host)] | None = None  # None: 127.0.0.1
    port: Annotated[int, AfterValidator(_tcp_port)] | None = None
    advertise_url: HttpUrl | None = None
    clock: Annotated[str, AfterValidator(_clock)] = EndpointClock.WALL.value
    replicas: int | None = Field(None, gt=0, le=MAX_REPLICAS)  # launch/sim: workers behind the router
    router: _Router | None = None
    router_metrics_url: HttpUrl | None = None
    disaggregation: _Disaggregation | None = None  # launch/sim: prefill and decode workers behind a PD router

    @model_validator(mode="before")
    @classmethod
    def _price_from_book(cls, data: object) -> object:
        if isinstance(data, dict) and data.get("price_book") is not None and "usd_per_gpu_hour" not in data:
            return {**data, "usd_per_gpu_hour": None}
        return data


class _EndpointsFile(ConfigModel):
    endpoints: list[_EndpointEntry]


def _flag_value(args: Sequence[str], flag: str) -> str | None:
    """The value `args` give `flag` (`--flag V` or `--flag=V`; the last wins), None when they do not give it."""
    value = None
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(f"{flag}="):
            value = arg.split("=", 1)[1]
    return value


def _to_spec(entry: _EndpointEntry, path: Path, index: int) -> EndpointSpec:
    """The spec, after the rules that involve more than one key."""

    def fail(*tail: str) -> EndpointSpecError:
        *keys, reason = tail
        return config_error(EndpointSpecError, path, ("endpoints", index, *keys), reason, f"endpoint {entry.name!r}")

    mode = EndpointMode(entry.mode)
    if mode is EndpointMode.ATTACH and not entry.url:
        raise fail("url", "mode attach needs a url")
    if mode is not EndpointMode.ATTACH:
        for key in ("url", "worker_urls"):
            if getattr(entry, key):
                raise fail(
                    key, f"url and worker_urls are for mode attach; mode {mode.value} binds host and port itself"
                )
    for key in ("host", "port", "advertise_url"):
        if mode is EndpointMode.ATTACH and getattr(entry, key) is not None:
            raise fail(
                key, "host, port and advertise_url are for a server costbench starts (launch, sim); attach has url"
            )
    if entry.advertise_url and entry.port is None:
        raise fail(
            "port", "advertise_url needs a fixed port: on a free port the address is not known before the server starts"
        )
    if entry.env and mode is EndpointMode.ATTACH:
        raise fail("env", "env is for a server costbench starts (launch, sim), not for attach")
    for key in entry.env:
        if not _ENV_NAME.match(key):
            raise fail("env", key, f"{key!r} is not an environment variable name")
        if is_secret_name(key):
            raise fail("env", key, "looks like a secret: export it where costbench runs (it is inherited), not here")
    clock = EndpointClock(entry.clock)
    if clock is EndpointClock.VIRTUAL:
        if mode is not EndpointMode.SIM:
            raise fail("clock", f"clock virtual is for mode sim (the twin); mode {mode.value} runs in real time")
        for key in ("command", "host", "port", "advertise_url"):
            if getattr(entry, key) is not None:
                raise fail(key, "a twin on a virtual clock is served inside the replay step on loopback: no "
                           "command, host, port or advertise_url")  # fmt: skip
        if entry.env:
            raise fail("env", "a twin on a virtual clock runs in the replay step's own process: no env")
    if mode is EndpointMode.LAUNCH:
        roles = () if entry.disaggregation is None else (entry.disaggregation.prefill, entry.disaggregation.decode)
        for key, args in (("server_args", entry.server_args), *(("disaggregation", r.server_args) for r in roles)):
            if _flag_value(args, "--nnodes") not in (None, "1"):
                raise fail(key, "--nnodes above 1: launch starts every worker on this host, and a server over several "
                           "hosts needs its other ranks started on theirs; start it by hand and attach to it "
                           "(docs/endpoints.md, a wide expert-parallel deployment)")  # fmt: skip
    fleet = _fleet(entry, mode, clock, fail)
    weeks = [r.from_week for r in entry.revisions]
    if weeks != sorted(set(weeks)):
        raise fail("revisions", "must be in date order, one per week")
    return EndpointSpec(
        name=entry.name,
        mode=mode,
        model=entry.model,
        server_args=tuple(entry.server_args),
        gpu_type=entry.gpu_type,
        gpu_count=entry.gpu_count,
        usd_per_gpu_hour=entry.usd_per_gpu_hour,
        price_book=entry.price_book,
        url=entry.url,
        api_key_env=entry.api_key_env,
        command=tuple(entry.command) if entry.command else None,
        ready_timeout_s=entry.ready_timeout_s,
        worker_urls=tuple(entry.worker_urls),
        env=tuple(sorted(entry.env.items())),
        dcgm_url=entry.dcgm_url,
        scrape_interval_s=entry.scrape_interval_s,
        revisions=tuple(EndpointRevision(r.from_week, tuple(r.server_args), r.note) for r in entry.revisions),
        host=entry.host or "127.0.0.1",
        port=entry.port,
        advertise_url=entry.advertise_url,
        clock=clock,
        fleet=fleet,
        router_metrics_url=entry.router_metrics_url,
        hours_per_week=entry.hours_per_week,
    )


def _fleet(
    entry: _EndpointEntry, mode: EndpointMode, clock: EndpointClock, fail: Callable[..., EndpointSpecError]
) -> FleetSpec | None:
    """The fleet the entry describes: `replicas` or `disaggregation` (launch, sim) or `worker_urls` (attach) behind
    `router`."""
    if mode is EndpointMode.ATTACH and entry.disaggregation is not None:
        raise fail("disaggregation", "attach lists a PD fleet's prefill and decode workers in worker_urls (each "
                   "one's /server_info says its role); disaggregation is for launch and sim")  # fmt: skip
    if mode is EndpointMode.ATTACH:
        if entry.replicas is not None:
            raise fail("replicas", "attach counts its replicas in worker_urls; replicas is for launch and sim")
        if entry.router is not None and not entry.worker_urls:
            raise fail("router", "a router block describes a fleet: list its workers in worker_urls")
        if entry.router_metrics_url is not None and entry.router is None:
            raise fail("router_metrics_url", "is a fleet's router's: give the fleet's router block too")
        if entry.router is None:
            return None  # the router's policy is not known here: worker_urls alone, as before fleets
        count = len(entry.worker_urls)
    else:
        if entry.router_metrics_url is not None:
            raise fail("router_metrics_url", "is for attach: costbench finds the metrics of a router it starts")
        count = entry.replicas or 1
    if entry.disaggregation is not None:
        return _pd_fleet(entry, mode, clock, fail)
    if entry.router is None and count < 2:
        return None
    router = entry.router or _Router()
    _check_modelled(router, clock, fail)
    if entry.gpu_count % count:
        raise fail("gpu_count", f"is the fleet's total: {entry.gpu_count} GPUs do not split evenly over {count} "
                   "replicas")  # fmt: skip
    group = WorkerGroup(WorkerRole.REGULAR, count, entry.gpu_count // count)
    return FleetSpec(RouterSpec(router.policy, tuple(router.args)), (group,))


def _check_modelled(router: _Router, clock: EndpointClock, fail: Callable[..., EndpointSpecError]) -> None:
    """On the virtual clock the router is costbench's model of smg (endpoints/router/): what it does not model
    fails the file."""
    if clock is not EndpointClock.VIRTUAL:
        return
    try:
        parse_router_spec(RouterSpec(router.policy, tuple(router.args)))
    except UnmodelledRouting as exc:
        raise fail("router", f"{exc}; or use clock: wall, which starts the twins and the real router") from None


def _pd_fleet(
    entry: _EndpointEntry, mode: EndpointMode, clock: EndpointClock, fail: Callable[..., EndpointSpecError]
) -> FleetSpec:
    pd = entry.disaggregation
    assert pd is not None
    if entry.replicas is not None:
        raise fail("replicas", "a disaggregated fleet counts its workers in disaggregation.prefill/decode.replicas")
    router = entry.router or _Router()
    _check_modelled(router, clock, fail)
    total = pd.prefill.replicas * pd.prefill.gpus_per_worker + pd.decode.replicas * pd.decode.gpus_per_worker
    if total != entry.gpu_count:
        raise fail("gpu_count", f"is the fleet's total: the prefill and decode workers take {total} GPUs, not "
                   f"{entry.gpu_count}")  # fmt: skip
    groups = tuple(
        WorkerGroup(role, block.replicas, block.gpus_per_worker, tuple(block.server_args))
        for role, block in ((WorkerRole.PREFILL, pd.prefill), (WorkerRole.DECODE, pd.decode))
    )
    return FleetSpec(RouterSpec(router.policy, tuple(router.args)), groups)


def load_endpoint_specs(path: Path) -> dict[str, EndpointSpec]:
    """Endpoint specs by name, in file order. Raises EndpointSpecError naming the file, the key path and the reason."""
    path = Path(path)
    parsed = parse_config(_EndpointsFile, read_yaml(path, EndpointSpecError), path, EndpointSpecError, "endpoint")
    specs: dict[str, EndpointSpec] = {}
    for index, entry in enumerate(parsed.endpoints):
        if entry.name in specs:
            raise config_error(
                EndpointSpecError, path, ("endpoints", index, "name"), f"duplicate endpoint name {entry.name!r}"
            )
        specs[entry.name] = _to_spec(entry, path, index)
    return specs
