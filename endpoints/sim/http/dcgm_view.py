"""The twin's GPUs as NVIDIA's dcgm-exporter shows GPUs (route DCGM_PATH), so the probes read a twin with the
same code as a real exporter (endpoints/probes/dcgm_sampler.py).

dcgm-exporter's names, types and labels: DCGM_FI_DEV_GPU_UTIL (%), DCGM_FI_PROF_SM_ACTIVE and
DCGM_FI_PROF_DRAM_ACTIVE (ratios 0-1), DCGM_FI_DEV_FB_USED and DCGM_FI_DEV_FB_FREE (MiB), one series per GPU with
labels gpu, device, modelName and Hostname. The values are the engine's counters (endpoints/sim/engine/
gpu_counters.py) averaged over the time since the previous scrape, as NVML and DCGM report an average over a
recent period. The Hostname label is the address the scraper dialed (host:port), so the rows of a fleet's twins
on one machine stay apart; modelName says the GPU is the twin's. Power and clocks are not modelled, so not shown.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from endpoints.sim.engine.gpu_counters import GpuActivity, GpuCounters
from endpoints.sim.engine.sim_metrics import exposition_chunks, fill_chunks

DCGM_PATH = "/sim/dcgm/metrics"  # twin-only, beside SGLang's routes (the probes name it too)
MIB = 2**20
_LABELS = ["gpu", "device", "modelName", "Hostname"]
_IDLE = GpuActivity(0.0, 0.0, 0.0, 0.0)
_HOSTNAMES_KEPT = 8  # a page's text is kept for the first few addresses dialed (a scraper dials one)


class DcgmView:
    """One server's page; remembers the previous scrape's reading (the start of the next period)."""

    def __init__(
        self, counters: GpuCounters, gpus: int, model_name: str, used_bytes: float, total_bytes: float
    ) -> None:
        self._counters = counters
        self._gpus = gpus
        self._model_name = model_name
        self._used_mib = used_bytes / MIB
        self._free_mib = (total_bytes - used_bytes) / MIB
        self._previous = counters.reading(counters.started_s)
        self._last = _IDLE  # what a second scrape at the same instant repeats
        self._chunks: dict[str, list[str]] = {}  # the page's text but its values, by Hostname: the library's, once

    def activity(self, now_s: float) -> GpuActivity:
        """The shares since the previous call (the previous ones again when no time has passed)."""
        reading = self._counters.reading(now_s)
        activity = reading.activity_since(self._previous)
        if activity is not None:
            self._previous, self._last = reading, activity
        return self._last

    def render(self, now_s: float, hostname: str) -> bytes:
        activity = self.activity(now_s)
        families = (
            ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", 100.0 * activity.busy),
            ("DCGM_FI_PROF_SM_ACTIVE", "Ratio of cycles an SM has at least 1 warp assigned.", activity.sm_active),
            ("DCGM_FI_PROF_DRAM_ACTIVE", "Ratio of cycles the device memory is active.", activity.dram_active),
            ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", self._used_mib),
            ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", self._free_mib),
        )
        values = [value for _, _, value in families for _ in range(self._gpus)]
        chunks = self._chunks.get(hostname)
        if chunks is not None:
            return fill_chunks(chunks, values)
        out = []
        for name, help_text, value in families:
            family = GaugeMetricFamily(name, f"{help_text} Modelled by the costbench twin.", labels=_LABELS)
            for gpu in range(self._gpus):
                family.add_metric([str(gpu), f"nvidia{gpu}", self._model_name, hostname], value)
            out.append(family)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Families(out))
        text = generate_latest(registry)
        chunks = exposition_chunks(text.decode("utf-8"), values)
        if chunks is not None and len(self._chunks) < _HOSTNAMES_KEPT:  # else the library's text every time
            self._chunks[hostname] = chunks
        return text


class _Families(Collector):
    """Families already built, for one page."""

    def __init__(self, families: list[GaugeMetricFamily]) -> None:
        self._families = families

    def collect(self) -> Iterator[GaugeMetricFamily]:
        return iter(self._families)
