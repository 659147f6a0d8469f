"""GPU numbers through the warehouse: a twin's modelled samples reach run_summary marked 'twin' and the diagnosis
says modelled, never unmeasured; a lake file written before sm_active_pct and dram_active_pct still reads."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import date

import pyarrow as pa
import pytest

from endpoints.probes.probe_records import GPU_SAMPLE_SCHEMA
from warehouse.backends.store import Warehouse
from warehouse.parquet.lake import write_partition
from warehouse_builders import endpoint, gpu_sample, request, run_info, write_run

WEEK = date(2026, 3, 2)
OLD_COLUMNS = [name for name in GPU_SAMPLE_SCHEMA.names if name not in ("sm_active_pct", "dram_active_pct")]


def _twin_samples(run_id: str) -> list:
    """Two ticks of a twin's 2 GPUs inside the window, one after it."""
    rows = []
    for at_s, busy, sm, dram in ((20, 30.0, 4.0, 40.0), (40, 40.0, 6.0, 50.0), (500, 0.0, 0.0, 0.0)):
        for gpu in (0, 1):
            rows.append(
                replace(gpu_sample(run_id, at_s, busy, gpu), source="twin", sm_active_pct=sm, dram_active_pct=dram)
            )
    return rows


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Warehouse:
    store = Warehouse(tmp_path_factory.mktemp("wh"))
    records = [request("twin", f"q{i}", 100.0, 900.0, sent_mono_s=10.0 + i) for i in range(4)]
    write_run(
        store.lake_root, WEEK, "chat", run_info("twin", 90.0), endpoint(), records, gpu_samples=_twin_samples("twin")
    )
    # A run recorded before the two columns existed: its gpu_samples file lacks them.
    old_records = [request("old", f"q{i}", 100.0, 900.0, sent_mono_s=10.0 + i) for i in range(4)]
    write_run(store.lake_root, WEEK, "older", run_info("old", 90.0), endpoint(), old_records)
    old = pa.Table.from_pylist([vars_of(gpu_sample("old", 20, 55.0))], schema=GPU_SAMPLE_SCHEMA).select(OLD_COLUMNS)
    write_partition(store.lake_root, "gpu_samples", WEEK, "older", old)
    store.refresh()
    return store


def vars_of(sample) -> dict:
    return {name: getattr(sample, name) for name in sample.__slots__}


def test_a_twins_samples_reach_run_summary_marked_modelled(store):
    rows = {r.run_id: r for r in store.run_summary()}
    twin = rows["twin"]
    assert twin.gpu_metrics_source == "twin"
    assert twin.gpu_utilisation_pct == pytest.approx(35.0)  # the two ticks inside the window, both GPUs
    assert twin.sm_active_pct == pytest.approx(5.0) and twin.dram_active_pct == pytest.approx(45.0)
    assert twin.gpu_sample_count == 6


def test_a_file_from_before_the_new_columns_reads_them_as_null(store):
    old = {r.run_id: r for r in store.run_summary()}["old"]
    assert old.gpu_utilisation_pct == pytest.approx(55.0) and old.gpu_metrics_source == "nvml"
    assert old.sm_active_pct is None and old.dram_active_pct is None
    with store.connect(read_only=True) as con:
        found = con.execute("SELECT sm_active_pct, dram_active_pct FROM gpu_samples WHERE run_id = 'old'").fetchall()
    assert found == [(None, None)]


def test_no_diagnosis_of_a_twin_run_says_its_gpus_were_unmeasured(store):
    with store.connect(read_only=True) as con:
        [reasons] = con.execute("SELECT reasons FROM diagnoses WHERE run_id = 'twin'").fetchone()
    texts = json.loads(reasons)
    assert not any("unmeasured" in text for text in texts)
    assert "GPU utilisation 35.0% (modelled) is below 50% with no runtime lever showing" in texts
