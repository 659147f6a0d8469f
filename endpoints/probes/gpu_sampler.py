"""GPU samplers chosen by where the GPUs are (registry keyed by GpuSource; protocol in gpu_protocol).

NVML when the GPUs are on this host (launch), a DCGM exporter when they are not (attach with
dcgm_url), none otherwise (the twin, or a remote endpoint without an exporter). A sampler that
cannot measure records null values and its reason once, never zeros.
"""

from __future__ import annotations

from collections.abc import Callable

from endpoints.probes.dcgm_sampler import DcgmSampler
from endpoints.probes.gpu_protocol import GpuSampler, GpuSource, NoGpuSampler
from endpoints.probes.nvml_sampler import open_nvml_sampler
from endpoints.spec import EndpointMode, EndpointSpec


def _nvml(spec: EndpointSpec, host: str) -> GpuSampler:
    return open_nvml_sampler(host)


def _dcgm(spec: EndpointSpec, host: str) -> GpuSampler:
    return DcgmSampler(str(spec.dcgm_url))


def _none(spec: EndpointSpec, host: str) -> GpuSampler:
    if spec.mode is EndpointMode.SIM:
        reason = "sim endpoint: the twin runs no GPUs"
    else:
        reason = "remote endpoint and no dcgm_url: GPU metrics unavailable"
    return NoGpuSampler(host, reason)


SAMPLER_FACTORIES: dict[GpuSource, Callable[[EndpointSpec, str], GpuSampler]] = {
    GpuSource.NVML: _nvml,
    GpuSource.DCGM: _dcgm,
    GpuSource.NONE: _none,
}


def gpu_source_for(spec: EndpointSpec) -> GpuSource:
    if spec.dcgm_url:
        return GpuSource.DCGM
    if spec.mode is EndpointMode.LAUNCH:
        return GpuSource.NVML
    return GpuSource.NONE


def open_gpu_sampler(spec: EndpointSpec, host: str) -> GpuSampler:
    return SAMPLER_FACTORIES[gpu_source_for(spec)](spec, host)
