"""One bad lake file costs its own week, not the warehouse: the refresh quarantines it, names it, builds the
other weeks, records it in lake_quarantine, and the lake_intact check fails exactly that week and scenario."""

from __future__ import annotations

import os
from datetime import date
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow.parquet as pq
import pytest

from warehouse.backends.store import Warehouse
from warehouse.parquet.lake import LakeError, partition_path, read_partition
from warehouse.parquet.lake_checksum import read_checksums, sha256_of, sidecar_of, write_checksums
from warehouse.parquet.lake_manifest import manifest_path
from warehouse.quality import check_lake_quarantine
from warehouse_builders import endpoint, request, run_info, write_run

WEEKS = [date(2025, 3, 3), date(2025, 3, 10), date(2025, 3, 17)]
SPEC = endpoint()
NOW_WALL_S = 1_800_000_000.0


def _write_week(store: Warehouse, week: date, requests: int = 3) -> None:
    run_id = f"run-{week.isoformat()}"
    records = [request(run_id, f"q{i}", 100, 1000) for i in range(requests)]
    write_run(store.lake_root, week, "chat", run_info(run_id, 90.0), SPEC, records)


def _requests_file(store: Warehouse, week: date) -> Path:
    return partition_path(store.lake_root, "requests", week, "chat") / "part-0.parquet"


def _requests_per_week(store: Warehouse) -> dict[date, int]:
    with store.connect() as con:
        return dict(con.execute("SELECT week_start, count(*) FROM requests GROUP BY ALL ORDER BY 1").fetchall())


def _quarantine_check(store: Warehouse, week: date):
    rows = [r for r in store.lake_quarantine() if r.week_start == week and r.scenario == "chat"]
    return check_lake_quarantine(pd.DataFrame(rows))


@pytest.fixture
def store(tmp_path) -> Warehouse:
    store = Warehouse(tmp_path / "wh", clock_wall_s=lambda: NOW_WALL_S)
    for week in WEEKS:
        _write_week(store, week)
    return store


def test_a_truncated_file_is_quarantined_by_name_and_the_other_weeks_still_build(store, caplog):
    bad = _requests_file(store, WEEKS[1])
    bad.write_bytes(bad.read_bytes()[:200])  # a copy cut short, as a full disk or a killed rsync leaves it

    result = store.refresh()

    [quarantined] = result.quarantined
    assert (quarantined.table, quarantined.week_start, quarantined.scenario) == ("requests", WEEKS[1], "chat")
    assert quarantined.source_path == "lake/requests/week=2025-03-10/scenario=chat/part-0.parquet"
    assert quarantined.reason.startswith("unreadable footer: ")
    assert quarantined.message.startswith(
        "quarantined lake/requests/week=2025-03-10/scenario=chat/part-0.parquet "
        "(table requests, week 2025-03-10, scenario chat): unreadable footer: "
    )
    assert quarantined.message in caplog.text  # what the CLI prints and the asset logs
    assert not bad.exists() and (store.root / quarantined.quarantined_path).read_bytes()  # moved, not deleted
    # Every query on requests works again and reads the other weeks; the marts have every run.
    assert _requests_per_week(store) == {WEEKS[0]: 3, WEEKS[2]: 3}
    assert [(r.week_start, r.completed_requests) for r in store.run_summary()] == [
        (WEEKS[0], 3),
        (WEEKS[1], 0),  # its runs row is intact; its requests are what is missing
        (WEEKS[2], 3),
    ]
    [row] = store.lake_quarantine()
    assert row.replaced is False and row.quarantined_wall_s == NOW_WALL_S
    with pytest.raises(LakeError, match="quarantined it as unreadable"):
        read_partition(store.lake_root, "requests", WEEKS[1], "chat")


def test_the_lake_intact_check_fails_the_affected_week_until_the_partition_is_written_again(store):
    bad = _requests_file(store, WEEKS[1])
    bad.write_bytes(bad.read_bytes()[:200])
    store.refresh()
    failed = _quarantine_check(store, WEEKS[1])
    assert not failed.success
    [failure] = failed.failures
    assert failure.unexpected_count == 1
    assert failure.examples[0].startswith("requests 2025-03-10 chat: unreadable footer")
    assert all(_quarantine_check(store, week).success for week in (WEEKS[0], WEEKS[2]))

    _write_week(store, WEEKS[1], requests=5)  # the partition re-materialized
    assert store.refresh().quarantined == ()
    assert _requests_per_week(store)[WEEKS[1]] == 5
    [row] = store.lake_quarantine()  # kept as history, marked replaced
    assert row.replaced is True
    assert _quarantine_check(store, WEEKS[1]).success


def _flip_a_byte_inside_a_page(path: Path, column: str) -> None:
    metadata = pq.ParquetFile(path).metadata.row_group(0)
    chunk = next(metadata.column(i) for i in range(metadata.num_columns) if metadata.column(i).path_in_schema == column)
    end = (chunk.dictionary_page_offset or chunk.data_page_offset) + chunk.total_compressed_size
    data = bytearray(path.read_bytes())
    data[end - 2] ^= 0x01  # inside the last page's values: still decodes, to another number
    stat = path.stat()
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_a_file_written_before_checksums_is_decoded_its_page_checksums_verified_then_gets_one(store):
    files = sorted(store.lake_root.glob("*/week=*/scenario=*/part-0.parquet"))
    for path in files:
        sidecar_of(path).unlink()  # as a lake written before checksums has them
    manifest_path(store.lake_root).unlink()  # and before the manifest of what was written
    # DuckDB does not verify page checksums: it would read the flipped value as data.
    _flip_a_byte_inside_a_page(_requests_file(store, WEEKS[2]), "finish_mono_s")
    result = store.refresh()
    [quarantined] = result.quarantined
    assert quarantined.week_start == WEEKS[2]
    assert "does not decode" in quarantined.reason and "CRC" in quarantined.reason
    assert _requests_per_week(store) == {WEEKS[0]: 3, WEEKS[1]: 3}
    # The others passed the full decode, so their checksums are recorded now; from then on those are checked.
    assert result.decoded_files == 5 and all(read_checksums(p) for p in files if p.exists())
    assert store.refresh().decoded_files == 0


def test_a_file_damaged_before_its_checksum_was_taken_is_found_when_duckdb_fails_on_it(store):
    first = store.refresh()
    assert (first.lake_files, first.decoded_files) == (6, 0)  # every sha256 matched: nothing to decode
    # A damaged page header, its checksum taken after the damage (a tool that rewrote the file and its
    # sidecar): the footer still reads and the sha256 matches, but DuckDB cannot decode the column.
    path = _requests_file(store, WEEKS[0])
    metadata = pq.ParquetFile(path).metadata.row_group(0)
    chunk = next(
        metadata.column(i) for i in range(metadata.num_columns) if metadata.column(i).path_in_schema == "sent_mono_s"
    )
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    stat = path.stat()
    data = bytearray(path.read_bytes())
    data[start : start + 8] = b"\xff" * 8
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    write_checksums(path, (sha256_of(path),))

    result = store.refresh()  # DuckDB fails, every file is decoded, the culprit goes, the build runs again

    [quarantined] = result.quarantined
    assert (quarantined.week_start, quarantined.table) == (WEEKS[0], "requests")
    assert "does not decode" in quarantined.reason
    assert result.decoded_files == 5
    assert [r.completed_requests for r in store.run_summary()] == [0, 3, 3]


def test_a_file_outside_any_partition_folder_is_quarantined_not_read(store):
    # DuckDB's glob would match it and fail to read 'someday' as the week's DATE, for every query.
    stray = store.lake_root / "requests" / "week=someday" / "scenario=chat" / "part-0.parquet"
    stray.parent.mkdir(parents=True)
    stray.write_bytes(_requests_file(store, WEEKS[0]).read_bytes())
    [quarantined] = store.refresh().quarantined
    assert quarantined.week_start is None and quarantined.scenario is None
    assert quarantined.reason.startswith("not in a partition folder")
    assert sum(_requests_per_week(store).values()) == 9
    [row] = store.lake_quarantine()
    assert row.week_start is None and row.source_path == "lake/requests/week=someday/scenario=chat/part-0.parquet"


def test_a_value_flipped_in_a_file_already_checked_is_caught_by_the_next_refresh(store):
    # The refresh decodes a file once; after that its size and mtime said "unchanged", and a flipped value
    # (same size, same mtime restored) was served. The checksum recorded when it was written is checked every time.
    store.refresh()
    path = _requests_file(store, WEEKS[2])
    with store.connect() as con:
        before = con.execute("SELECT sum(finish_mono_s) FROM requests WHERE week_start = ?", [WEEKS[2]]).fetchone()
    chunk = pq.ParquetFile(path).metadata.row_group(0).column(_column_index(path, "finish_mono_s"))
    stat = path.stat()
    data = bytearray(path.read_bytes())
    data[chunk.data_page_offset - 1] ^= 0x01  # the dictionary's last byte: the one distinct value, 2.0, changes
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    served = duckdb.sql(f"SELECT sum(finish_mono_s) FROM read_parquet('{path}')").fetchone()
    assert served != before  # DuckDB reads the flipped value as data

    [quarantined] = store.refresh().quarantined

    assert quarantined.source_path == "lake/requests/week=2025-03-17/scenario=chat/part-0.parquet"
    assert "sha256" in quarantined.reason and "recorded when it was written" in quarantined.reason
    assert _requests_per_week(store) == {WEEKS[0]: 3, WEEKS[1]: 3}  # not served
    assert not path.exists()


def _column_index(path: Path, column: str) -> int:
    metadata = pq.ParquetFile(path).metadata.row_group(0)
    return next(i for i in range(metadata.num_columns) if metadata.column(i).path_in_schema == column)
