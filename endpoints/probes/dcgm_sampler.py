"""GPU samples from an NVIDIA DCGM exporter (dcgm-exporter's Prometheus text) for GPUs on another host.

Fields (dcgm-exporter's default counters): DCGM_FI_DEV_GPU_UTIL (%), DCGM_FI_DEV_FB_USED and
DCGM_FI_DEV_FB_FREE (MiB; total = used + free + reserved), DCGM_FI_DEV_POWER_USAGE (W),
DCGM_FI_DEV_SM_CLOCK (MHz); and the profiling fields an exporter shows when configured with them (its
dcp-metrics-included.csv), DCGM_FI_PROF_SM_ACTIVE and DCGM_FI_PROF_DRAM_ACTIVE (ratios 0-1, stored as %). One
row per (Hostname, gpu) label pair; a field the exporter does not export is null. An exporter that cannot be
read gives one null row per distinct reason. The twin serves the same page for its modelled GPUs
(twin_sampler.py reads it with this sampler, source twin).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from prometheus_client.parser import text_string_to_metric_families

from endpoints.probes.gpu_protocol import GpuSource, OnceNotes, unmeasured
from endpoints.probes.metrics_scrape import stored_label
from endpoints.probes.probe_records import GpuSample
from endpoints.probes.server_facts import http_get

MIB = 1024 * 1024
_FIELDS = {
    "DCGM_FI_DEV_GPU_UTIL": "utilisation_pct",
    "DCGM_FI_DEV_FB_USED": "used_mib",
    "DCGM_FI_DEV_FB_FREE": "free_mib",
    "DCGM_FI_DEV_FB_RESERVED": "reserved_mib",
    "DCGM_FI_DEV_POWER_USAGE": "power_w",
    "DCGM_FI_DEV_SM_CLOCK": "sm_clock_mhz",
    "DCGM_FI_PROF_SM_ACTIVE": "sm_active",
    "DCGM_FI_PROF_DRAM_ACTIVE": "dram_active",
}


def parse_dcgm(text: str, default_host: str) -> dict[tuple[str, int | None], dict[str, float]]:
    """{(host, gpu index): {field: value}} from one exporter page. Raises ValueError on bad text."""
    gpus: dict[tuple[str, int | None], dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        field = _FIELDS.get(family.name)
        if field is None:
            continue
        for sample in family.samples:
            gpu = sample.labels.get("gpu")
            host = stored_label(sample.labels["Hostname"]) if sample.labels.get("Hostname") else default_host
            key = (host, int(gpu) if gpu and gpu.isdigit() else None)
            gpus.setdefault(key, {})[field] = float(sample.value)
    return gpus


def _pct(ratio: float | None) -> float | None:
    return None if ratio is None else 100.0 * ratio


def _row(
    run_id: str, wall_s: float, host: str, index: int | None, values: dict[str, float], source: GpuSource
) -> GpuSample:
    used, free = values.get("used_mib"), values.get("free_mib")
    total = None if used is None or free is None else used + free + values.get("reserved_mib", 0.0)
    return GpuSample(
        run_id=run_id,
        sample_wall_s=wall_s,
        host=host,
        gpu_index=index,
        source=source.value,
        utilisation_pct=values.get("utilisation_pct"),
        memory_used_bytes=None if used is None else int(used * MIB),
        memory_total_bytes=None if total is None else int(total * MIB),
        power_w=values.get("power_w"),
        sm_clock_mhz=values.get("sm_clock_mhz"),
        sm_active_pct=_pct(values.get("sm_active")),
        dram_active_pct=_pct(values.get("dram_active")),
    )


class DcgmSampler:
    """`source`: what the rows say they come from (a real exporter's dcgm, or the twin's page)."""

    def __init__(self, url: str, timeout_s: float = 2.0, source: GpuSource = GpuSource.DCGM) -> None:
        self.url = url
        self.source = source
        self.host = urlsplit(url).hostname or url
        self.timeout_s = timeout_s
        self._notes = OnceNotes()

    def sample(self, run_id: str, wall_s: float) -> list[GpuSample]:
        answer = http_get(self.url, {}, self.timeout_s)
        reason = None
        if answer.status is None:
            reason = f"DCGM exporter {self.url} unreachable: {answer.problem}"
        elif answer.status != 200:
            reason = f"DCGM exporter {self.url} answered HTTP {answer.status}"
        else:
            try:
                gpus = parse_dcgm(answer.body.decode("utf-8", "replace"), self.host)
            except ValueError as exc:
                gpus, reason = {}, f"DCGM exporter {self.url} sent unparsable text: {exc}"
            if not gpus and reason is None:
                reason = f"DCGM exporter {self.url} exports none of {', '.join(_FIELDS)}"
        if reason is not None:
            if self._notes.first_time(reason):
                return [unmeasured(run_id, wall_s, self.host, self.source, reason)]
            return []
        rows = sorted(gpus.items(), key=str)
        return [_row(run_id, wall_s, host, index, values, self.source) for (host, index), values in rows]

    def close(self) -> None:
        pass
