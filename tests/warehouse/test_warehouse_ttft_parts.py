"""Where the time to first token goes, from the server to the report: a replay through a disaggregated twin fleet
(1P+1D behind the router's PD model, on a virtual clock) records every part in requests.parquet, the warehouse's
requests view carries them as ttft_*_ms, the ttft_parts mart adds them up to the mean TTFT, and the weekly report
draws them for the live scenario; a real server's parts that are not reported show as such."""

from __future__ import annotations

import html
import json
from dataclasses import replace
from datetime import date
from pathlib import Path

import pytest

from chromium_devtools import Browser, require_chromium
from endpoints.spec import load_endpoint_specs
from endpoints.virtual_twin import replay_on_virtual_twin
from replay.recording.requests_reader import read_requests
from replay.runner import ReplayConfig, run_replay_async
from replay_sglang_peer import make_workload
from warehouse.backends.store import Warehouse
from warehouse.marts.run_rows import RunContext, build_run_row
from warehouse.parquet.lake import write_partition
from warehouse.report.ttft_parts_section import where_ttft_goes
from warehouse.report.weekly_report import write_weekly_report
from warehouse_builders import endpoint, request, run_info, write_run

WEEK = date(2026, 3, 2)
PARTS = ("prealloc", "bootstrap", "queue", "prefill", "kv_transfer", "decode_wait")
PD_FLEET = {"name": "v3-pd", "mode": "sim", "model": "deepseek-ai/DeepSeek-V3", "gpu_type": "H200", "gpu_count": 16,
            "usd_per_gpu_hour": 3.5, "clock": "virtual", "server_args": ["--tp", "8", "--sim-hardware", "h200"],
            "disaggregation": {"prefill": {"gpus_per_worker": 8}, "decode": {"gpus_per_worker": 8}}}  # fmt: skip


@pytest.mark.timeout(120)
def test_a_pd_fleets_ttft_parts_land_in_the_warehouse_and_the_report(tmp_path: Path):
    (tmp_path / "endpoints.yaml").write_text(json.dumps({"endpoints": [PD_FLEET]}))
    spec = load_endpoint_specs(tmp_path / "endpoints.yaml")["v3-pd"]
    workload = make_workload([0.05 * i for i in range(8)], input_tokens=2048, output_tokens=8)
    replay_dir = tmp_path / "run" / "replay"

    def replay(running, clock):
        config = ReplayConfig(url=running.url, run_id="pd-run", request_timeout_s=60)
        return run_replay_async(workload, config, replay_dir, clock)

    info = replay_on_virtual_twin(spec, tmp_path / "run", "pd-run", cold_start=True, replay=replay)
    assert info.requests_ok == 8

    store = Warehouse(tmp_path / "wh")
    write_partition(store.lake_root, "runs", WEEK, "pd-live",
                    build_run_row(info, spec, "pd-live", WEEK, RunContext(role="live")))  # fmt: skip
    write_partition(store.lake_root, "requests", WEEK, "pd-live", read_requests(replay_dir))
    store.refresh()

    columns = ", ".join(f"ttft_{p}_ms" for p in PARTS)
    with store.connect() as con:
        rows = con.execute(f"SELECT ttft_ms, {columns} FROM requests WHERE is_completed").fetchall()
    assert len(rows) == 8
    for ttft_ms, *parts in rows:
        assert all(p is not None for p in parts)  # the twin reports every stage of a disaggregated request
        # The parts are the decode server's TTFT; the client's adds only the loopback hops, which take no virtual time.
        assert sum(parts) == pytest.approx(ttft_ms, abs=0.01)
        assert parts[PARTS.index("prefill")] > 0 and parts[PARTS.index("kv_transfer")] > 1.0

    [row] = store.ttft_parts()
    assert (row.scenario, row.role, row.completed_requests, row.reporting_requests) == ("pd-live", "live", 8, 8)
    means = [getattr(row, f"mean_ttft_{p}_ms") for p in PARTS]
    assert sum(means) + row.mean_ttft_unreported_ms == pytest.approx(row.mean_ttft_ms)
    assert abs(row.mean_ttft_unreported_ms) < 0.01

    page = write_weekly_report(store, WEEK).html_path.read_text()
    section = page[page.index("<h2>Where the time to first token goes</h2>") :]
    assert "<figure class='plot ttft-parts'>" in section and "KV transfer" in section
    assert html.escape(f"pd-live's mean time to first token was {row.mean_ttft_ms:,.0f} ms") in section
    assert "for 8 of its 8 completed requests" in section


def test_a_real_servers_unreported_parts_show_as_not_reported_and_only_live_scenarios_are_drawn(tmp_path: Path):
    """A real SGLang gives queue and prefill at most: the rest of the TTFT is drawn as not reported by the server.
    A request that reported nothing counts 0 in every part, so the parts still add up to the mean TTFT."""
    store = Warehouse(tmp_path / "wh")
    records = [
        *(request("live-1", f"q{i}", 300.0, 900.0, sent_mono_s=1 + i) for i in range(4)),
        request("live-1", "q4", 500.0, 900.0, sent_mono_s=6),  # reported nothing (an older server)
    ]
    records[:4] = [replace(r, ttft_queue_ms=50.0, ttft_prefill_ms=200.0) for r in records[:4]]
    write_run(store.lake_root, WEEK, "chat", run_info("live-1", 30.0), endpoint(), records, RunContext(role="live"))
    canary = [replace(request("canary-1", "q0", 300.0, 900.0), ttft_queue_ms=1.0, ttft_prefill_ms=2.0)]
    write_run(store.lake_root, WEEK, "chat-canary", run_info("canary-1", 30.0), endpoint(), canary,
              RunContext(role="canary"))  # fmt: skip
    store.refresh()

    rows = {r.scenario: r for r in store.ttft_parts()}
    live = rows["chat"]
    assert (live.completed_requests, live.reporting_requests) == (5, 4)
    assert live.mean_ttft_ms == pytest.approx(340.0)
    assert live.mean_ttft_queue_ms == pytest.approx(40.0) and live.mean_ttft_prefill_ms == pytest.approx(160.0)
    assert live.mean_ttft_prealloc_ms is None and live.mean_ttft_kv_transfer_ms is None  # never reported
    assert live.mean_ttft_unreported_ms == pytest.approx(140.0)  # (4 x 50 + 500) / 5

    report = write_weekly_report(store, WEEK)
    page = report.html_path.read_text()
    section = page[page.index("<h2>Where the time to first token goes</h2>") :]
    assert section.count("<figure class='plot ttft-parts'>") == 1  # the live scenario only
    assert "not reported by the server 140 ms (41%)" in section and "prefill 160 ms (47%)" in section
    assert "waiting queue 40 ms (12%)" in section and "KV transfer" not in section.split("<p class='note'>")[0]
    assert page.count("<figure class='plot") == report.plots

    require_chromium()  # the stacked bar really draws: the page's own check counts it with the others
    browser = Browser(tmp_path / "profile")
    try:
        browser.open(report.html_path.as_uri())
        assert int(browser.wait_for("document.body.getAttribute('data-plots-rendered')")) == report.plots
        bars = "document.getElementById('ttft-0').data.map(t => t.name)"
        assert browser.evaluate(bars) == ["waiting queue", "prefill", "not reported by the server"]
    finally:
        browser.close()


def test_a_part_left_over_by_float_subtraction_reads_zero_not_minus_zero():
    # bootstrap is what the decode's wait leaves once the other parts are taken out: -1e-12 ms where it is nothing.
    row = {"week_start": WEEK, "scenario": "pd-live", "mean_ttft_ms": 250.0, "mean_ttft_prealloc_ms": 10.0,
           "mean_ttft_bootstrap_ms": -1e-12, "mean_ttft_queue_ms": 40.0, "mean_ttft_prefill_ms": 190.0,
           "mean_ttft_kv_transfer_ms": 5.0, "mean_ttft_decode_wait_ms": 5.0, "reporting_requests": 10,
           "completed_requests": 10}  # fmt: skip
    sentence = where_ttft_goes(row)
    assert "bootstrap with the prefill server 0 ms (0%)" in sentence and " -0 ms" not in sentence
