"""Endpoint specs: how to reach or start the SGLang server a scenario replays against.

Loaded from `workloads/endpoints.yaml`; validated once, then immutable. Secrets are named by the
environment variable that holds them, never written here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
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


@dataclass(frozen=True, slots=True)
class EndpointSpec:
    name: str
    mode: EndpointMode
    model: str
    server_args: tuple[str, ...]
    gpu_type: str
    gpu_count: int
    usd_per_gpu_hour: float
    url: str | None = None  # attach only
    api_key_env: str | None = None  # name of the environment variable holding the API key
    command: tuple[str, ...] | None = None  # launch override (a router, a container)
    ready_timeout_s: float = 600.0

    @staticmethod
    def from_dict(raw: dict, where: str) -> "EndpointSpec":
        def need(key: str):
            if key not in raw or raw[key] in (None, ""):
                raise EndpointSpecError(f"{where}: endpoint {raw.get('name', '?')!r} is missing {key!r}")
            return raw[key]

        name = str(need("name"))
        try:
            mode = EndpointMode(need("mode"))
        except ValueError:
            raise EndpointSpecError(
                f"{where}: endpoint {name!r} has unknown mode {raw['mode']!r} "
                f"(expected one of {', '.join(m.value for m in EndpointMode)})"
            ) from None
        server_args = raw.get("server_args") or []
        if not isinstance(server_args, list) or not all(isinstance(a, (str, int, float)) for a in server_args):
            raise EndpointSpecError(f"{where}: endpoint {name!r}: server_args must be a list of flags and values")
        server_args = tuple(str(a) for a in server_args)
        if server_args and not server_args[0].startswith("--"):
            raise EndpointSpecError(f"{where}: endpoint {name!r}: server_args must start with a --flag, got {server_args[0]!r}")
        api_key_env = raw.get("api_key_env")
        if api_key_env is not None and not _ENV_NAME.match(str(api_key_env)):
            raise EndpointSpecError(
                f"{where}: endpoint {name!r}: api_key_env must name an environment variable "
                "(like SGLANG_API_KEY), not hold the key itself"
            )
        if mode is EndpointMode.ATTACH and not raw.get("url"):
            raise EndpointSpecError(f"{where}: endpoint {name!r}: mode attach needs a url")
        gpu_count = int(need("gpu_count"))
        usd = float(need("usd_per_gpu_hour"))
        if gpu_count <= 0 or usd < 0:
            raise EndpointSpecError(f"{where}: endpoint {name!r}: gpu_count must be > 0 and usd_per_gpu_hour >= 0")
        command = raw.get("command")
        return EndpointSpec(
            name=name,
            mode=mode,
            model=str(need("model")),
            server_args=server_args,
            gpu_type=str(need("gpu_type")),
            gpu_count=gpu_count,
            usd_per_gpu_hour=usd,
            url=raw.get("url"),
            api_key_env=api_key_env,
            command=tuple(str(c) for c in command) if command else None,
            ready_timeout_s=float(raw.get("ready_timeout_s", 600.0)),
        )


def load_endpoint_specs(path: Path) -> dict[str, EndpointSpec]:
    raw = yaml.safe_load(Path(path).read_text())
    entries = (raw or {}).get("endpoints")
    if not isinstance(entries, list):
        raise EndpointSpecError(f"{path}: expected a top-level 'endpoints:' list")
    specs: dict[str, EndpointSpec] = {}
    for i, entry in enumerate(entries):
        spec = EndpointSpec.from_dict(entry, f"{path} endpoints[{i}]")
        if spec.name in specs:
            raise EndpointSpecError(f"{path} endpoints[{i}]: duplicate endpoint name {spec.name!r}")
        specs[spec.name] = spec
    return specs
