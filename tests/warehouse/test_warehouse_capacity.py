"""Cost at the SLO capacity: the virtual-time load sweep on the twin (the same engine as behind HTTP) finds the
highest rate a configuration sustains inside an SLO, and run_summary turns it into the cost per request at
that load, the price of idle capacity, the replicas for target_rps and the break-even rate against the API."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from datetime import date

import pyarrow as pa
import pytest

from endpoints.capacity.deployment import Deployment
from endpoints.capacity.slo_capacity import (
    MAX_SWEEP_REQUESTS,
    MIN_GOOD_SHARE,
    MIN_TURNOVERS,
    measure_capacity,
    read_capacity_json,
    read_fleet_capacity_json,
    sweep_capacity,
    workload_bench_requests,
    write_capacity_json,
    write_fleet_capacity_json,
)
from endpoints.sim.virtual_bench import BenchRequest, random_ids
from endpoints.spec import EndpointMode
from warehouse.backends.store import Warehouse
from warehouse.marts.run_rows import RunContext
from warehouse_builders import endpoint, request, run_info, write_run
from workloads.workload import WORKLOAD_SCHEMA, TraceFormat, Workload

FLAGS = ["--tp", "8", "--sim-hardware", "h200"]
NO_CACHE = [*FLAGS, "--disable-radix-cache"]


def _requests() -> list[BenchRequest]:
    """40 requests, 4 per second, each a shared 1,024-token system prompt and 1,024 tokens of its own."""
    rng = random.Random(3)
    shared = random_ids(1024, rng)
    return [BenchRequest(shared + random_ids(1024, rng), 64, i * 0.25) for i in range(40)]


@pytest.fixture(scope="module")
def sweeps() -> dict[str, object]:
    requests = _requests()
    return {
        "cache": sweep_capacity(Deployment(tuple(FLAGS), 8), requests, 2000.0, 100.0).capacity,
        "no_cache": sweep_capacity(Deployment(tuple(NO_CACHE), 8), requests, 2000.0, 100.0).capacity,
        "strict": sweep_capacity(Deployment(tuple(NO_CACHE), 8), requests, 500.0, 50.0).capacity,
    }


def test_the_capacity_is_sustained_and_the_next_rate_up_is_not(sweeps):
    sweep = sweeps["no_cache"]
    assert sweep.offered_rps == pytest.approx(40 / 9.75)
    assert sweep.idle_good_share == 1.0
    needed = MIN_GOOD_SHARE * sweep.idle_good_share
    good = max((p for p in sweep.probes if p.good_share >= needed), key=lambda p: p.rate_rps)
    bad = min((p for p in sweep.probes if p.rate_rps > good.rate_rps), key=lambda p: p.rate_rps)
    assert bad.good_share < needed
    assert bad.rate_rps <= good.rate_rps * 2 ** (1 / 8) * 1.0001  # bisected three times: a bracket of ~9%
    # Read inside that bracket where the share crosses its threshold, linear in log(rate).
    weight = (good.good_share - needed) / (good.good_share - bad.good_share)
    expected = math.exp(math.log(good.rate_rps) + weight * math.log(bad.rate_rps / good.rate_rps))
    assert good.rate_rps <= sweep.capacity_rps_at_slo <= bad.rate_rps
    assert sweep.capacity_rps_at_slo == pytest.approx(expected)
    assert sweep.cpu_s < 5.0


def test_a_sweep_whose_batch_never_settles_is_swept_again_on_more_requests(tmp_path):
    # Short prompts and 200-token answers on a server that runs up to 2,048 requests at once: 300 requests end
    # before its batch turns over 4 times at the rate they seem to sustain, so the sweep runs again on more of the
    # window. (On bench/worked_example.py's V3 traffic, 400-token answers, 300 requests read 126 requests/s; settled on
    # 1,027 of them, 6.0.)
    rows = [
        {"request_id": f"r{i}", "arrival_s": i * 0.1, "input_tokens": 64, "output_tokens": 200, "prefix_blocks": [i]}
        for i in range(600)
    ]
    window = Workload("w", "trace", TraceFormat.MOONCAKE, "ms", 64, pa.Table.from_pylist(rows, schema=WORKLOAD_SCHEMA))
    settled = measure_capacity(endpoint(server_args=tuple(FLAGS)), window, 1000.0, 100.0)
    # The first 300 alone left the batch at capacity unsettled (82 running: fewer than MIN_TURNOVERS turnovers), so
    # it was swept again on as many as that batch asked for, and again once the larger sample's batch asked for more.
    assert settled is not None and settled.requests > MAX_SWEEP_REQUESTS and settled.capacity_rps_at_slo is not None
    assert settled.requests >= MIN_TURNOVERS * 82


def test_a_prefix_cache_and_a_looser_slo_each_raise_the_capacity(sweeps):
    assert sweeps["cache"].capacity_rps_at_slo > 2 * sweeps["no_cache"].capacity_rps_at_slo
    assert sweeps["strict"].capacity_rps_at_slo < sweeps["no_cache"].capacity_rps_at_slo


def test_capacity_file_round_trip_and_where_no_sweep_applies(sweeps, tmp_path):
    write_capacity_json(tmp_path, sweeps["strict"])
    assert read_capacity_json(tmp_path) == sweeps["strict"]
    assert read_capacity_json(tmp_path / "elsewhere") is None
    (tmp_path / "capacity.json").write_text("{}")
    with pytest.raises(ValueError, match="not a costbench capacity.json"):
        read_capacity_json(tmp_path)
    with pytest.raises(ValueError, match="at least two requests"):
        sweep_capacity(Deployment(tuple(FLAGS), 8), _requests()[:1], 2000.0, 100.0)


def test_a_real_endpoint_gets_no_twin_sweep():
    empty = Workload("w", "t", TraceFormat.MOONCAKE, "ms", 512, WORKLOAD_SCHEMA.empty_table())
    assert measure_capacity(endpoint(mode=EndpointMode.LAUNCH), empty, 1000.0, 100.0) is None
    assert measure_capacity(endpoint(), empty, 1000.0, 100.0) is None  # no arrivals to sweep


def test_run_summary_prices_the_slo_capacity_and_sizes_the_fleet_on_it(tmp_path):
    store = Warehouse(tmp_path / "wh")
    week = date(2026, 11, 2)
    records = [request("r1", f"q{i}", 100.0, 300.0, sent_mono_s=1 + i * 0.25) for i in range(40)]
    context = RunContext(slo_ttft_ms=1000.0, slo_tpot_ms=100.0, target_rps=10.0, capacity_rps_at_slo=4.0)
    write_run(store.lake_root, week, "chat", run_info("r1", 20.0), endpoint(), records, context)
    store.refresh()
    [row] = store.run_summary()
    per_second_usd = 8 * 2.0 / 3600  # 8 GPUs at $2/h
    assert row.realised_cost_per_request_usd == pytest.approx(per_second_usd * 20 / 40)
    assert row.efficiency_cost_per_request_usd == pytest.approx(per_second_usd / 4.0)
    assert row.idle_cost_per_request_usd == pytest.approx(per_second_usd * (0.5 - 0.25))
    assert row.replicas_for_target == math.ceil(10.0 / 4.0)
    assert row.fleet_usd_per_hour == pytest.approx(3 * 8 * 2.0)
    assert row.break_even_rps == pytest.approx(per_second_usd / row.api_cost_per_request_usd)
    assert row.price_book == "endpoint"


def _workload(requests: int) -> Workload:
    """`requests` requests 0.5 s apart, each two 512-token blocks: one shared by all, one its own."""
    rows = [
        {"request_id": f"r{i}", "arrival_s": i * 0.5, "input_tokens": 1024, "output_tokens": 32,
         "prefix_blocks": [7, 100 + i]}
        for i in range(requests)
    ]  # fmt: skip
    return Workload("w", "trace", TraceFormat.MOONCAKE, "ms", 512, pa.Table.from_pylist(rows, schema=WORKLOAD_SCHEMA))


def test_a_short_window_is_repeated_with_fresh_ids_so_its_burst_cannot_hide_the_queue():
    requests = workload_bench_requests(_workload(15))
    assert len(requests) == MAX_SWEEP_REQUESTS == 300  # twenty copies of 15
    assert [r.arrival_s for r in requests[14:16]] == pytest.approx([7.0, 7.5])  # the next copy one gap later
    first, second = requests[:15], requests[15:30]
    assert len({r.input_ids[:512] for r in first}) == 1  # the shared block is shared inside a copy...
    assert first[0].input_ids[:512] != second[0].input_ids[:512]  # ...and never with an earlier copy


def test_a_sweep_is_done_once_per_requests_flags_and_slo(tmp_path):
    spec = endpoint(server_args=tuple(FLAGS))
    first = measure_capacity(spec, _workload(30), 1000.0, 100.0, tmp_path)
    [cached] = tmp_path.glob("sweep-*.json")
    assert first is not None and first.capacity_rps_at_slo is not None
    kept = read_fleet_capacity_json(cached)
    assert kept.capacity == first
    write_fleet_capacity_json(cached, replace(kept, capacity=replace(first, capacity_rps_at_slo=123.0)))
    assert measure_capacity(spec, _workload(30), 1000.0, 100.0, tmp_path).capacity_rps_at_slo == 123.0
    other = measure_capacity(spec, _workload(30), 500.0, 100.0, tmp_path)  # another SLO: swept again
    assert other.capacity_rps_at_slo != 123.0 and len(list(tmp_path.glob("sweep-*.json"))) == 2
