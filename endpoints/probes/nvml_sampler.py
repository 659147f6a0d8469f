"""GPU samples from NVML (nvidia-ml-py) for GPUs on this host: utilisation, memory, power, SM clock.

If NVML cannot start (no driver, a container without the library) the sampler is a NoGpuSampler that
says why. A single reading NVML refuses (power on some boards) is null for that field only.
"""

from __future__ import annotations

from collections.abc import Callable

import pynvml

from endpoints.probes.gpu_protocol import GpuSampler, GpuSource, NoGpuSampler, OnceNotes, unmeasured
from endpoints.probes.probe_records import GpuSample


def _read(read: Callable[..., float | int], *args: object) -> float | int | None:
    try:
        return read(*args)
    except pynvml.NVMLError:
        return None


class NvmlSampler:
    source = GpuSource.NVML

    def __init__(self, host: str, device_count: int) -> None:
        self.host = host
        self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(device_count)]
        self._notes = OnceNotes()

    def sample(self, run_id: str, wall_s: float) -> list[GpuSample]:
        rows = []
        for index, handle in enumerate(self._handles):
            try:
                memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            except pynvml.NVMLError as exc:
                reason = f"NVML failed for GPU {index}: {exc}"
                if self._notes.first_time(reason):
                    rows.append(unmeasured(run_id, wall_s, self.host, self.source, reason))
                continue
            power_mw = _read(pynvml.nvmlDeviceGetPowerUsage, handle)
            rows.append(
                GpuSample(
                    run_id=run_id,
                    sample_wall_s=wall_s,
                    host=self.host,
                    gpu_index=index,
                    source=self.source.value,
                    utilisation_pct=_float(_read(lambda h: pynvml.nvmlDeviceGetUtilizationRates(h).gpu, handle)),
                    memory_used_bytes=int(memory.used),
                    memory_total_bytes=int(memory.total),
                    power_w=None if power_mw is None else power_mw / 1000.0,
                    sm_clock_mhz=_float(_read(pynvml.nvmlDeviceGetClockInfo, handle, pynvml.NVML_CLOCK_SM)),
                )
            )
        return rows

    def close(self) -> None:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


def _float(value: float | int | None) -> float | None:
    return None if value is None else float(value)


def open_nvml_sampler(host: str) -> GpuSampler:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return NoGpuSampler(host, f"NVML unavailable on {host}: {exc}")
    try:
        count = pynvml.nvmlDeviceGetCount()
        if count == 0:
            pynvml.nvmlShutdown()
            return NoGpuSampler(host, f"NVML sees no GPU on {host}")
        return NvmlSampler(host, count)
    except pynvml.NVMLError as exc:
        pynvml.nvmlShutdown()
        return NoGpuSampler(host, f"NVML unavailable on {host}: {exc}")
