"""GPU samplers behind one protocol, chosen by where the GPUs are (registry keyed by GpuSource).

NVML when the GPUs are on this host (launch), a DCGM exporter when they are not (attach with
dcgm_url), none otherwise (the twin, or a remote endpoint without an exporter). A sampler that
cannot measure records null values and its reason once, never zeros.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Protocol

from endpoints.probe_records import GpuSample
from endpoints.spec import EndpointMode, EndpointSpec


class GpuSource(str, Enum):
    NVML = "nvml"
    DCGM = "dcgm"
    NONE = "none"


class GpuSampler(Protocol):
    source: GpuSource

    def sample(self, run_id: str, wall_s: float) -> list[GpuSample]:
        """Zero or more rows for this instant; never raises for an unavailable source."""
        ...

    def close(self) -> None: ...


def unmeasured(run_id: str, wall_s: float, host: str, source: GpuSource, note: str) -> GpuSample:
    return GpuSample(run_id, wall_s, host, None, source.value, None, None, None, None, None, note)


class NoGpuSampler:
    """No source: one row with null values and the reason, then nothing."""

    source = GpuSource.NONE

    def __init__(self, host: str, reason: str) -> None:
        self.host = host
        self.reason = reason
        self._noted = False

    def sample(self, run_id: str, wall_s: float) -> list[GpuSample]:
        if self._noted:
            return []
        self._noted = True
        return [unmeasured(run_id, wall_s, self.host, self.source, self.reason)]

    def close(self) -> None:
        pass


class OnceNotes:
    """Remembers which failure reasons were already written, so each is recorded once per run."""

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def first_time(self, reason: str) -> bool:
        if reason in self._seen:
            return False
        self._seen.add(reason)
        return True


# The sampler modules import this one, so they are imported where used.
def _nvml(spec: EndpointSpec, host: str) -> GpuSampler:
    from endpoints.nvml_sampler import open_nvml_sampler

    return open_nvml_sampler(host)


def _dcgm(spec: EndpointSpec, host: str) -> GpuSampler:
    from endpoints.dcgm_sampler import DcgmSampler

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
