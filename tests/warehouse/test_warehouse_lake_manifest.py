"""A lake partition that was written and is gone is missed: the refresh compares the lake with its manifest of what
was written (warehouse/parquet/lake_manifest.py), names the partition in lake_missing, fails lake_intact for its
week, exits 3, and does not judge that week's canary as ok on what is left of it."""

from __future__ import annotations

import json
import shutil
from datetime import date, timedelta
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from warehouse.__main__ import EXIT_LAKE_INCOMPLETE, main
from warehouse.backends.store import Warehouse
from warehouse.parquet.lake import partition_path
from warehouse.parquet.lake_checksum import sidecar_of
from warehouse.parquet.lake_manifest import latest_entries, manifest_path
from warehouse.quality import check_lake_quarantine
from warehouse_builders import capacity_context, endpoint, request, run_info, write_run

WEEKS = [date(2025, 2, 3) + timedelta(days=7 * i) for i in range(5)]
LOST = WEEKS[4]  # the canary's regressed week: +30% on a baseline of 0.10
SPEC = endpoint(usd_per_gpu_hour=200.0)
N = 40


def _week(store: Warehouse, week: date, cost_per_request: float) -> None:
    """A canary week: N completed requests whose window makes each cost `cost_per_request` (as the trend tests)."""
    window_s = cost_per_request * N * 2.25
    run_id = f"canary-{week.isoformat()}"
    records = [
        request(run_id, f"q{i}", 100.0, 200.0, cached_tokens=500, sent_mono_s=(i + 0.5) * window_s / N + 0.01)
        for i in range(N)
    ]
    info = run_info(run_id, window_s, duration_s=window_s, speedup=1.0, requests_total=N, requests_recorded=N,
                    requests_ok=N, server_info={"version": "0.5.4", "backend": "sim", "tp_size": 8})  # fmt: skip
    write_run(store.lake_root, week, "canary", info, SPEC, records, capacity_context(cost_per_request))


@pytest.fixture
def store(tmp_path) -> Warehouse:
    store = Warehouse(tmp_path / "wh", clock_wall_s=lambda: 1_800_000_000.0)
    for week, cost in zip(WEEKS, (0.10, 0.11, 0.09, 0.10, 0.13)):
        _week(store, week, cost)
    assert _verdict(store, LOST) == "regression"
    return store


def _verdict(store: Warehouse, week: date) -> str:
    assert main(["refresh", "--root", str(store.root)]) in (0, EXIT_LAKE_INCOMPLETE)
    [row] = [r for r in store.weekly_trends() if r.week_start == week]
    return row.regression_verdict


def _lake_intact(store: Warehouse, week: date):
    quarantined = [r for r in store.lake_quarantine() if r.week_start == week and r.scenario == "canary"]
    missing = [r for r in store.lake_missing() if r.week_start == week and r.scenario == "canary"]
    return check_lake_quarantine(pd.DataFrame(quarantined), pd.DataFrame(missing))


def _requests_file(store: Warehouse) -> Path:
    return partition_path(store.lake_root, "requests", LOST, "canary") / "part-0.parquet"


def _remove_file(path: Path) -> None:
    path.unlink()


def _remove_folder(path: Path) -> None:
    shutil.rmtree(path.parent)


def _truncate(path: Path) -> None:
    path.write_bytes(b"")


def _emptied_by_a_tool(path: Path) -> None:
    # A valid Parquet file of the same columns and no rows, its sidecar checksum dropped (a tool that "truncated the
    # table"): it reads, and without the manifest the refresh would decode it, trust it and record its checksum.
    pq.write_table(pa.Table.from_batches([], pq.read_schema(path)), path)
    sidecar_of(path).unlink()


GONE = {"rm the file": _remove_file, "rm the partition folder": _remove_folder}
CHANGED = {"truncate it": _truncate, "empty it, dropping its checksum": _emptied_by_a_tool}


@pytest.mark.parametrize("lose", list(GONE.values()), ids=list(GONE))
def test_a_partition_written_and_gone_is_named_fails_its_week_and_is_not_judged(store, lose, capsys):
    lose(_requests_file(store))
    capsys.readouterr()

    assert main(["refresh", "--root", str(store.root)]) == EXIT_LAKE_INCOMPLETE
    printed = capsys.readouterr()
    assert "1 lake partitions missing: see table lake_missing" in printed.out
    assert "the lake lacks 1 partition(s)" in printed.err

    [missing] = store.lake_missing()
    assert (missing.table_name, missing.week_start, missing.scenario) == ("requests", LOST, "canary")
    assert missing.path == "lake/requests/week=2025-03-03/scenario=canary/part-0.parquet"
    assert missing.written_rows == N and missing.written_size_bytes > 0 and len(missing.written_sha256) == 64
    gone = "its partition folder is gone" if lose is _remove_folder else "its file is gone"
    assert missing.reason.startswith("written ") and f"with {N} rows" in missing.reason and gone in missing.reason
    failed = _lake_intact(store, LOST)
    assert not failed.success
    [example] = failed.failures[0].examples
    assert example.startswith("requests 2025-03-03 canary: missing lake/requests/week=2025-03-03/scenario=canary/")
    assert all(_lake_intact(store, week).success for week in WEEKS[:4])  # only its own week fails

    [row] = [r for r in store.weekly_trends() if r.week_start == LOST]
    assert row.regression_verdict == "not_judged"  # not "ok" on the runs row without its requests
    reasons = json.loads(row.regression_reasons)
    assert reasons[0].startswith("not judged: the lake lacks part of this week")
    assert reasons[1].startswith("lake: requests partition missing: written ")
    assert json.loads(row.caveats) == reasons[1:]

    _week(store, LOST, 0.13)  # written again: the week is whole, and judged again
    assert main(["refresh", "--root", str(store.root)]) == 0
    assert store.lake_missing() == [] and _lake_intact(store, LOST).success
    assert _verdict(store, LOST) == "regression"


@pytest.mark.parametrize("change", list(CHANGED.values()), ids=list(CHANGED))
def test_a_partition_cut_short_is_quarantined_by_name_and_its_week_not_judged(store, change):
    change(_requests_file(store))

    result = store.refresh()

    [quarantined] = result.quarantined
    assert quarantined.source_path == "lake/requests/week=2025-03-03/scenario=canary/part-0.parquet"
    if change is _emptied_by_a_tool:  # held to the manifest's sha256, its sidecar gone
        assert "does not match the one recorded when it was written" in quarantined.reason
        assert "(the manifest: written " in quarantined.reason and "it holds 0 rows now" in quarantined.reason
    assert result.lake_gaps == 1 and not _lake_intact(store, LOST).success
    [row] = [r for r in store.weekly_trends() if r.week_start == LOST]
    assert row.regression_verdict == "not_judged"
    assert json.loads(row.caveats)[0].startswith("lake: requests file quarantined: ")
    assert store.refresh().lake_gaps == 1  # and stays so, refresh after refresh, until it is written again


def test_a_lake_written_before_the_manifest_is_recorded_by_its_first_refresh_then_missed(store):
    manifest_path(store.lake_root).unlink()
    store.refresh()  # finds every partition unrecorded: records each as seen
    entries = latest_entries(store.lake_root)
    assert len(entries) == 10 and {e.event for e in entries.values()} == {"seen"}
    _requests_file(store).unlink()
    [missing] = store.refresh().missing
    assert missing.reason.startswith("first found by a refresh ") and "its file is gone" in missing.reason


def test_a_later_week_is_not_baselined_on_an_incomplete_one(store):
    _week(store, LOST + timedelta(days=7), 0.13)  # the regression persists a week
    assert _verdict(store, LOST + timedelta(days=7)) == "sustained"
    _requests_file(store).unlink()
    store.refresh()
    [later] = [r for r in store.weekly_trends() if r.week_start == LOST + timedelta(days=7)]
    # Judged against the four complete weeks before the lost one, not against a week of no requests.
    assert later.baseline_weeks == 4 and later.regression_verdict == "regression"


def test_a_partition_removed_on_purpose_is_forgotten_and_named_no_more(store, capsys):
    _remove_folder(_requests_file(store))
    argv = ["forget", "--root", str(store.root), "--table", "requests", "--scenario", "canary", "--week"]
    assert main([*argv, "2025-02-24"]) == 1  # a week still there: nothing to forget
    assert "its file is still there" in capsys.readouterr().err
    argv.append("2025-03-03")
    assert main(argv) == 0
    assert capsys.readouterr().out.startswith("forgot requests.week=2025-03-03.scenario=canary (written ")
    assert main(["refresh", "--root", str(store.root)]) == 0
    assert store.lake_missing() == [] and _lake_intact(store, LOST).success
    assert main(argv) == 1  # nothing left to forget
