"""What every GPU sampler shares: the source it reads, the protocol, and the null row for a reason.

The samplers (nvml_sampler, dcgm_sampler, twin_sampler) build on this module and the registry (gpu_sampler)
chooses among them, so the imports point one way. A sampler that cannot measure records null
values and its reason once, never zeros.
"""

from __future__ import annotations

from enum import Enum
from typing import Protocol

from endpoints.probes.probe_records import GpuSample
from redaction.secret_redaction import redact_clipped


class GpuSource(str, Enum):
    NVML = "nvml"
    DCGM = "dcgm"
    TWIN = "twin"  # the twin's modelled GPUs, on its dcgm-exporter page: values computed from its steps
    NONE = "none"


class GpuSampler(Protocol):
    source: GpuSource

    def sample(self, run_id: str, wall_s: float) -> list[GpuSample]:
        """Zero or more rows for this instant; never raises for an unavailable source."""
        ...

    def close(self) -> None: ...


NOTE_MAX_CHARS = 1000


def unmeasured(run_id: str, wall_s: float, host: str, source: GpuSource, note: str) -> GpuSample:
    """The null row for `note`, which is stored redacted: an exporter's parse error may quote its page."""
    note = redact_clipped(note, NOTE_MAX_CHARS)
    return GpuSample(run_id, wall_s, host, None, source.value, None, None, None, None, None, note=note)


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
