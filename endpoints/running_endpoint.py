"""A server costbench provisioned or attached to, as the replay, the probes and the capacity steps see it:
where it answers, what it said about itself, and where its facts and log are kept (provision.py makes one)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from common.exchange import Exchange
from endpoints.fingerprint import ConfigFingerprint
from endpoints.spec import EndpointSpec


@dataclass(frozen=True, slots=True)
class RunningEndpoint:
    spec: EndpointSpec
    url: str
    server_info: dict
    model_info: dict
    log_path: Path | None  # the server's log, kept with the run (launch and sim)
    # Added: where /metrics lives (each worker of a fleet, else the endpoint), the run's fingerprint,
    # and the saved facts.
    metrics_urls: tuple[str, ...] = ()
    fingerprint: ConfigFingerprint | None = None
    facts_path: Path | None = None
    worker_server_infos: tuple[dict, ...] = ()
    # A fleet: its workers' base URLs (in the order of worker_server_infos) and the router's own /metrics.
    worker_urls: tuple[str, ...] = ()
    router_metrics_url: str | None = None
    # Served in this process on a virtual clock: its generation routes answered without a socket (virtual_twin.py).
    exchange: Exchange | None = None

    @property
    def version(self) -> str | None:
        return self.server_info.get("version")
