"""The weekly report: a page per week whose plots really render in a browser (headless Chromium),
with the week's verdicts, and a PNG of the cost trend."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from datetime import date, timedelta

import pytest

from warehouse.report.weekly_report import write_weekly_report
from warehouse.store import Warehouse
from warehouse_builders import endpoint, request, run_info, write_run

WEEKS = [date(2026, 10, 5) + timedelta(weeks=n) for n in range(5)]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _week(store: Warehouse, week: date, cost_window_s: float, cached: int) -> None:
    run_id = f"chat-{week.isoformat()}"
    records = [
        request(
            run_id, f"q{i}", 200.0 + i, 2000.0 + i, cached_tokens=cached, reasoning_tokens=40, sent_mono_s=1 + i * 0.5
        )
        for i in range(40)
    ]
    info = run_info(run_id, cost_window_s, requests_total=40, requests_recorded=40, requests_ok=40)
    write_run(store.lake_root, week, "chat", info, endpoint(), records)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    store = Warehouse(tmp_path_factory.mktemp("report") / "wh")
    for week in WEEKS[:4]:
        _week(store, week, 30.0, cached=600)
    _week(store, WEEKS[4], 45.0, cached=0)  # the last week: cache gone, cost up by half
    store.refresh()
    return write_weekly_report(store, WEEKS[4])


def test_report_files_and_verdicts(report):
    assert report.html_path.name == f"week={WEEKS[4].isoformat()}.html"
    assert report.cost_png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert report.regressions == 1
    page = report.html_path.read_text()
    assert "verdict-regression" in page and "prefix_cache_hit_rate -60.0 points" in page
    assert page.count("<figure class='plot'>") == report.plots == 5


def test_plots_render_in_headless_chromium(report, tmp_path):
    if CHROMIUM is None:
        if os.environ.get("COSTBENCH_REQUIRE_CHROMIUM"):
            pytest.fail("chromium is not installed but COSTBENCH_REQUIRE_CHROMIUM is set (.ci/run installs it)")
        pytest.skip("chromium not installed (Debian package chromium; .ci/run installs it)")
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--window-size=1200,3000",
    ]
    url = report.html_path.as_uri()
    dom = subprocess.run([CHROMIUM, *flags, "--dump-dom", url], capture_output=True, text=True, timeout=120).stdout
    # The page's own script counts the plots the browser laid out with a real size and real strokes.
    rendered = re.search(r'data-plots-rendered="(\d+)"', dom)
    assert rendered, "the page's render check did not run"
    assert int(rendered.group(1)) == report.plots
    shot = tmp_path / "report.png"
    subprocess.run([CHROMIUM, *flags, f"--screenshot={shot}", url], capture_output=True, timeout=120)
    assert shot.stat().st_size > 50_000  # a page of plots, not a blank one
