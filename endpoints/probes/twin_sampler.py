"""GPU samples from the twin: each server's modelled GPUs, read from the dcgm-exporter page it serves.

The twin computes what NVML and DCGM would report from its own engine steps (endpoints/sim/engine/
gpu_counters.py) and serves it at TWIN_DCGM_PATH in dcgm-exporter's format, so this is the DCGM sampler pointed
at every server of the endpoint (each replica, prefill and decode worker of a fleet), its rows marked source
`twin`: modelled, not measured. Each server's rows carry its host:port as host (the page's Hostname label).
"""

from __future__ import annotations

from endpoints.probes.dcgm_sampler import DcgmSampler
from endpoints.probes.gpu_protocol import GpuSource
from endpoints.probes.probe_records import GpuSample

TWIN_DCGM_PATH = "/sim/dcgm/metrics"  # the twin's route (endpoints/sim/http/dcgm_view.py); probes speak HTTP only


class TwinSampler:
    source = GpuSource.TWIN

    def __init__(self, server_urls: tuple[str, ...], timeout_s: float = 2.0) -> None:
        self._samplers = [DcgmSampler(f"{url}{TWIN_DCGM_PATH}", timeout_s, GpuSource.TWIN) for url in server_urls]

    def sample(self, run_id: str, wall_s: float) -> list[GpuSample]:
        return [row for sampler in self._samplers for row in sampler.sample(run_id, wall_s)]

    def close(self) -> None:
        for sampler in self._samplers:
            sampler.close()
