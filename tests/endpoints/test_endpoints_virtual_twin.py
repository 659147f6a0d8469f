"""A twin endpoint on a virtual clock (endpoints/virtual_twin.py): served in the replay's own event loop,
over real HTTP on loopback, it measures what the same twin measures in real time as its own process
(the launch path), repeats exactly, probes on virtual time, and records which clock it ran on."""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import replace
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest

from endpoints.clock import VirtualClock
from endpoints.probes.probe_session import probing
from endpoints.probes.server_facts import http_get
from endpoints.provision import provision
from endpoints.spec import EndpointClock, EndpointMode, EndpointSpec, EndpointSpecError, load_endpoint_specs
from endpoints.virtual_twin import replay_on_virtual_twin
from replay.recording.requests_reader import REQUESTS_FILE
from replay.runner import ReplayConfig, run_replay, run_replay_async
from replay_sglang_peer import make_workload

FLAGS = ("--tp", "8", "--sim-hardware", "h200", "--stream-interval", "4")
WALL = EndpointSpec(
    "v3-twin", EndpointMode.SIM, "deepseek-ai/DeepSeek-V3", FLAGS, "H200", 8, 2.0, scrape_interval_s=1.0
)
VIRTUAL = replace(WALL, clock=EndpointClock.VIRTUAL)
# 24 requests over 6 s: a light load, so the wall-clock twin's own Python time is small beside the model's.
WORKLOAD = make_workload([i * 0.25 for i in range(24)], input_tokens=2048, output_tokens=48)


def _config(url: str, run_id: str) -> ReplayConfig:
    return ReplayConfig(url=url, backend="sglang", speedup=1.0, start_s=0.0, duration_s=None, run_id=run_id)


def _virtual_run(run_dir: Path, spec: EndpointSpec = VIRTUAL):
    def replay(endpoint, clock):
        return run_replay_async(WORKLOAD, _config(endpoint.url, "virtual"), run_dir / "shard-0", clock)

    started = time.monotonic()
    info = replay_on_virtual_twin(spec, run_dir, "virtual", cold_start=True, replay=replay)
    return info, time.monotonic() - started


def _records(shard_dir: Path):
    table = pq.read_table(shard_dir / REQUESTS_FILE).to_pandas().sort_values("request_id")
    table["ttft_ms"] = (table.first_token_mono_s - table.sent_mono_s) * 1000
    table["e2e_ms"] = (table.finish_mono_s - table.sent_mono_s) * 1000
    return table


@pytest.fixture(scope="module")
def virtual_runs(tmp_path_factory):
    first, first_wall_s = _virtual_run(tmp_path_factory.mktemp("virtual-1"))
    second_dir = tmp_path_factory.mktemp("virtual-2")
    second, _ = _virtual_run(second_dir)
    return first, first_wall_s, second, second_dir


def test_a_virtual_replay_measures_what_the_launched_twin_measures_in_real_time(tmp_path, virtual_runs):
    info, _, _, virtual_dir = virtual_runs
    with provision(WALL, tmp_path) as endpoint, probing(endpoint, tmp_path, "wall"):
        wall_info = run_replay(WORKLOAD, _config(endpoint.url, "wall"), tmp_path / "shard-0")
    assert info.requests_ok == wall_info.requests_ok == 24
    virtual, wall = _records(virtual_dir / "shard-0"), _records(tmp_path / "shard-0")
    assert list(virtual.completion_tokens) == list(wall.completion_tokens)
    assert list(virtual.prompt_tokens) == list(wall.prompt_tokens)
    for column in ("ttft_ms", "e2e_ms"):
        v, w = statistics.median(virtual[column]), statistics.median(wall[column])
        # Real time adds the client's and the twin's own CPU and loopback time to every latency: a few ms here.
        assert w == pytest.approx(v, rel=0.10, abs=15.0), column
    # Virtual time has none of that: the schedule is kept to the nanosecond.
    assert info.schedule_lag_p99_ms == 0.0


def test_a_virtual_replay_repeats_exactly_and_takes_less_than_its_length(virtual_runs):
    first, first_wall_s, second, second_dir = virtual_runs
    assert first.window_s == second.window_s and first.window_s > 6.0
    assert first_wall_s < first.window_s  # the twin's waits jumped
    facts = orjson.loads((second_dir / "server_facts.json").read_bytes())
    assert facts["clock"] == "virtual" and facts["mode"] == "sim"
    assert (second_dir / "v3-twin.server.log").read_text().startswith("# costbench: the twin in-process")


def test_probes_tick_on_virtual_time(virtual_runs):
    first, _, _, run_dir = virtual_runs
    samples = pq.read_table(run_dir / "server_samples.parquet").to_pandas()
    ticks = sorted(samples.sample_wall_s.unique())
    gaps = [b - a for a, b in zip(ticks, ticks[1:])]
    # One tick a virtual second (scrape_interval_s) over the replay, then the last one after it.
    assert len(ticks) >= int(first.window_s)
    assert statistics.median(gaps) == pytest.approx(1.0, abs=0.01)
    running = samples[samples.metric == "sglang:num_running_reqs"]
    assert running.value.max() > 0  # a probe saw requests in flight: it ran while the replay did


def test_a_virtual_replay_records_the_twins_modelled_gpus(virtual_runs):
    first, _, _, run_dir = virtual_runs
    gpus = pq.read_table(run_dir / "gpu_samples.parquet").to_pandas()
    assert set(gpus.source) == {"twin"} and set(gpus.gpu_index) == set(range(8))  # --tp 8
    for column in ("utilisation_pct", "sm_active_pct", "dram_active_pct"):
        assert gpus[column].notna().all(), column
    # One sample a virtual second; each the share of the second before it: 24 requests over 6 s keep it busy part-time.
    per_tick = gpus[gpus.gpu_index == 0].sort_values("sample_wall_s")
    assert len(per_tick) >= int(first.window_s)
    assert 0.0 < per_tick.utilisation_pct.mean() < 100.0 and per_tick.utilisation_pct.max() > 50.0
    assert (per_tick.sm_active_pct <= per_tick.utilisation_pct + 1e-9).all()


def test_a_thread_calling_a_server_on_the_loop_sees_no_time_pass():
    """A thread started from a virtual loop: the loop waits for its I/O instead of jumping to its next timer."""
    from aiohttp import web

    clock = VirtualClock(allow_real_io=True)

    async def now(_request):
        return web.json_response({"t": clock.now_s()})

    async def busy():
        while True:
            await asyncio.sleep(0.01)  # a timer always due soon: a loop that did not hold would jump to it

    async def main():
        app = web.Application()
        app.router.add_get("/now", now)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        timer = asyncio.create_task(busy())
        await asyncio.sleep(0.5)
        before = clock.now_s()
        answer = await asyncio.to_thread(http_get, f"http://127.0.0.1:{runner.addresses[0][1]}/now", {})
        after = clock.now_s()
        timer.cancel()
        await runner.cleanup()
        return before, orjson.loads(answer.body)["t"], after

    before, served, after = clock.run(main())
    assert before == served == after and before >= 0.5


def test_a_virtual_clock_is_for_the_twin_alone(tmp_path):
    base = {
        "mode": "sim",
        "model": "deepseek-ai/DeepSeek-V3",
        "gpu_type": "H200",
        "gpu_count": 8,
        "usd_per_gpu_hour": 2.0,
    }
    cases = {
        "launch": ({**base, "mode": "launch", "clock": "virtual"}, "clock virtual is for mode sim"),
        "port": ({**base, "clock": "virtual", "port": 30000}, "served inside the replay step"),
        "typo": ({**base, "clock": "virtul"}, "unknown clock 'virtul' (expected one of wall, virtual)"),
    }
    for name, (entry, reason) in cases.items():
        path = tmp_path / f"{name}.yaml"
        path.write_bytes(orjson.dumps({"endpoints": [{"name": name, **entry}]}))
        with pytest.raises(EndpointSpecError) as caught:
            load_endpoint_specs(path)
        assert "endpoints[0].clock" in str(caught.value) or "endpoints[0].port" in str(caught.value)
        assert reason in str(caught.value), name
    path = tmp_path / "ok.yaml"
    path.write_bytes(orjson.dumps({"endpoints": [{"name": "ok", **base, "clock": "virtual"}]}))
    assert load_endpoint_specs(path)["ok"].clock is EndpointClock.VIRTUAL
