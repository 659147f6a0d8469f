"""GPU samplers chosen by where the GPUs are (registry keyed by GpuSource; protocol in gpu_protocol).

A DCGM exporter when the endpoint names one (dcgm_url); the twin's own modelled GPUs when the servers are
twins (a sim endpoint, or servers whose /server_info says backend sim); NVML when the GPUs are on this host
(launch); none otherwise (a remote endpoint without an exporter). A sampler that cannot measure records null
values and its reason once, never zeros.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from endpoints.probes.dcgm_sampler import DcgmSampler
from endpoints.probes.gpu_protocol import GpuSampler, GpuSource, NoGpuSampler
from endpoints.probes.nvml_sampler import open_nvml_sampler
from endpoints.probes.twin_sampler import TwinSampler
from endpoints.spec import EndpointMode, EndpointSpec

TWIN_BACKEND = "sim"  # /server_info's backend on the twin


@dataclass(frozen=True, slots=True)
class GpuSite:
    """Where an endpoint's GPUs are, as the probes find them."""

    spec: EndpointSpec
    host: str  # this host: NVML reads the GPUs here
    server_urls: tuple[str, ...] = ()  # the endpoint's servers (each worker of a fleet): a twin serves its GPUs there
    backend: str | None = None  # what the servers' /server_info says they run (TWIN_BACKEND: the twin)


def _nvml(site: GpuSite) -> GpuSampler:
    return open_nvml_sampler(site.host)


def _dcgm(site: GpuSite) -> GpuSampler:
    return DcgmSampler(str(site.spec.dcgm_url))


def _twin(site: GpuSite) -> GpuSampler:
    urls = site.server_urls or ((site.spec.url,) if site.spec.url else ())
    if not urls:
        return NoGpuSampler(site.host, "twin endpoint with no server URL to read its GPUs from")
    return TwinSampler(urls)


def _none(site: GpuSite) -> GpuSampler:
    return NoGpuSampler(site.host, "remote endpoint and no dcgm_url: GPU metrics unavailable")


SAMPLER_FACTORIES: dict[GpuSource, Callable[[GpuSite], GpuSampler]] = {
    GpuSource.NVML: _nvml,
    GpuSource.DCGM: _dcgm,
    GpuSource.TWIN: _twin,
    GpuSource.NONE: _none,
}


def gpu_source_for(spec: EndpointSpec, backend: str | None = None) -> GpuSource:
    if spec.dcgm_url:
        return GpuSource.DCGM
    if spec.mode is EndpointMode.SIM or backend == TWIN_BACKEND:
        return GpuSource.TWIN
    if spec.mode is EndpointMode.LAUNCH:
        return GpuSource.NVML
    return GpuSource.NONE


def open_gpu_sampler(site: GpuSite) -> GpuSampler:
    return SAMPLER_FACTORIES[gpu_source_for(site.spec, site.backend)](site)
