"""The twin's GPUs on a dcgm-exporter page (endpoints/sim/http/dcgm_view.py), over real HTTP on loopback with the
engine on a virtual clock: prometheus_client's parser reads it, and so does the probes' DCGM sampler."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client.parser import text_string_to_metric_families

from endpoints.probes.dcgm_sampler import DcgmSampler
from endpoints.probes.gpu_protocol import GpuSource
from endpoints.probes.twin_sampler import TWIN_DCGM_PATH
from endpoints.sim.cost.profiles import HARDWARE_PROFILES, HardwareName
from endpoints.sim.http.dcgm_view import DCGM_PATH
from twin_virtual import serve

FLAGS = ["--tp", "8", "--sim-hardware", "h200", "--model-path", "deepseek-ai/DeepSeek-V3"]
FIELDS = {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_DEV_FB_USED",
          "DCGM_FI_DEV_FB_FREE"}  # fmt: skip


async def _load(client, requests: int, prompt_tokens: int = 2000, output_tokens: int = 64) -> None:
    async def one(i: int) -> None:
        prompt = list(range(3 + 7 * i, 3 + 7 * i + prompt_tokens))
        body = {"input_ids": prompt, "sampling_params": {"max_new_tokens": output_tokens, "ignore_eos": True}}
        async with client.post("/generate", json=body) as response:
            assert response.status == 200
            await response.read()

    await asyncio.gather(*(one(i) for i in range(requests)))


def _page(text: str) -> dict[str, dict[str, dict]]:
    """{family: {gpu label: sample}} of one page, checking the exporter's shape on the way."""
    out: dict[str, dict[str, dict]] = {}
    for family in text_string_to_metric_families(text):
        assert family.type == "gauge", family.name
        out[family.name] = {s.labels["gpu"]: {"labels": s.labels, "value": s.value} for s in family.samples}
    return out


def test_the_page_is_dcgm_exporters_shape_and_averages_since_the_last_scrape():
    async def scenario(client):
        idle = await (await client.get(DCGM_PATH)).text()
        await asyncio.sleep(5.0)
        still_idle = await (await client.get(DCGM_PATH)).text()
        await _load(client, 32)
        busy = await (await client.get(DCGM_PATH)).text()
        await asyncio.sleep(5.0)
        after = await (await client.get(DCGM_PATH)).text()
        return idle, still_idle, busy, after, f"{client.host}:{client.port}"

    idle, still_idle, busy, after, hostport = serve(FLAGS, scenario)
    page = _page(busy)
    assert set(page) == FIELDS
    for samples in page.values():
        assert sorted(samples) == [str(i) for i in range(8)]  # --tp 8: eight GPUs, all busy together
        labels = samples["3"]["labels"]
        assert labels["device"] == "nvidia3" and labels["Hostname"] == hostport and "twin" in labels["modelName"]
    assert 95.0 < page["DCGM_FI_DEV_GPU_UTIL"]["0"]["value"] <= 100.0  # 32 requests at once: steps back to back
    assert 0.0 < page["DCGM_FI_PROF_SM_ACTIVE"]["0"]["value"] < 1.0
    assert 0.0 < page["DCGM_FI_PROF_DRAM_ACTIVE"]["0"]["value"] < 1.0
    total_mib = HARDWARE_PROFILES[HardwareName.H200].hbm_bytes / 2**20
    used, free = page["DCGM_FI_DEV_FB_USED"]["0"]["value"], page["DCGM_FI_DEV_FB_FREE"]["0"]["value"]
    assert used + free == pytest.approx(total_mib) and used > 0.8 * total_mib  # weights and KV pool, held
    for quiet in (idle, still_idle, after):  # each scrape averages only since the one before
        assert {s["value"] for s in _page(quiet)["DCGM_FI_DEV_GPU_UTIL"].values()} == {0.0}


def test_prefill_is_compute_bound_and_decode_memory_bound():
    async def scenario(client):
        await client.get(DCGM_PATH)
        await _load(client, 16, prompt_tokens=8000, output_tokens=1)  # prefill: GEMMs over many tokens
        prefill = _page(await (await client.get(DCGM_PATH)).text())
        await _load(client, 16, prompt_tokens=100, output_tokens=1000)  # decode: every step streams the weights
        decode = _page(await (await client.get(DCGM_PATH)).text())
        return prefill, decode

    prefill, decode = serve(FLAGS, scenario)

    def sm_dram(page):
        return page["DCGM_FI_PROF_SM_ACTIVE"]["0"]["value"], page["DCGM_FI_PROF_DRAM_ACTIVE"]["0"]["value"]

    (prefill_sm, prefill_dram), (decode_sm, decode_dram) = sm_dram(prefill), sm_dram(decode)
    assert prefill_sm > prefill_dram and decode_dram > decode_sm
    assert decode_dram > prefill_dram and prefill_sm > decode_sm


def test_the_probes_dcgm_sampler_reads_the_page_as_twin_rows():
    assert TWIN_DCGM_PATH == DCGM_PATH  # the probes name the twin's route themselves (they speak HTTP only)

    async def scenario(client):
        sampler = DcgmSampler(str(client.make_url(DCGM_PATH)), source=GpuSource.TWIN)
        await asyncio.to_thread(sampler.sample, "r", 1.0)  # the period before the load starts
        await _load(client, 8)
        return await asyncio.to_thread(sampler.sample, "r", 2.0)

    rows = serve(FLAGS, scenario)
    assert [r.gpu_index for r in rows] == list(range(8))
    row = rows[0]
    assert row.source == "twin" and row.note is None and row.host.startswith("127.0.0.1:")
    assert row.utilisation_pct is not None and row.utilisation_pct > 90.0
    assert row.sm_active_pct is not None and row.dram_active_pct is not None
    assert 0.0 < row.sm_active_pct < 100.0 and 0.0 < row.dram_active_pct < 100.0
    assert row.memory_total_bytes == pytest.approx(HARDWARE_PROFILES[HardwareName.H200].hbm_bytes, rel=1e-6)
    assert row.power_w is None and row.sm_clock_mhz is None  # not modelled: null, never 0


def test_the_page_needs_no_api_key_as_an_exporter_needs_none():
    async def scenario(client):
        return (await client.get(DCGM_PATH)).status, (await client.get("/server_info")).status

    assert serve([*FLAGS, "--api-key", "s3cret"], scenario) == (200, 401)
