"""cost_attribution: the change in the realised cost per request against weekly_trends' baseline, split into price,
traffic (volume: the idle share; mix; offered reuse) and the runtime's levers, parts that add up to it exactly. Built
lake rows where the answer is known by construction."""

from __future__ import annotations

import json
from datetime import date, timedelta

import pytest

from endpoints.spec import EndpointRevision, EndpointSpec
from warehouse.backends.store import Warehouse
from warehouse.marts.mart_rows import CostAttributionRow, WeeklyTrendRow
from warehouse.marts.run_rows import RunContext
from warehouse_builders import endpoint, request, run_info, server_sample, write_run

WEEKS = [date(2026, 11, 2) + timedelta(days=7 * i) for i in range(5)]
PARTS = (
    "price_usd",
    "traffic_volume_usd",
    "traffic_mix_usd",
    "traffic_prefix_reuse_usd",
    "prefix_cache_usd",
    "batching_usd",
    "speculative_decoding_usd",
    "routing_usd",
    "structured_output_usd",
)
# The "reconfigured" scenarios' endpoint turns its radix cache off from WEEKS[1] on (a dated revision, and why).
NOTE = "radix cache disabled while debugging a KV-cache memory leak"
RADIX_OFF = endpoint(revisions=(EndpointRevision(WEEKS[1], ("--tp", "8", "--disable-radix-cache"), NOTE),))
LEVERS = (
    "prefix_cache_usd",
    "batching_usd",
    "speculative_decoding_usd",
    "routing_usd",
    "structured_output_usd",
)


def _week(
    store: Warehouse,
    week: date,
    scenario: str,
    *,
    requests: int = 40,
    usd_per_gpu_hour: float = 2.0,
    cached: int = 500,
    completion: int = 100,
    window_s: float = 20.0,
    capacity_rps: float | None = 8.0,
    running_at_slo: float = 16.0,
    spec_accept_length: float | None = None,
    server_info: dict | None = None,
    spec: EndpointSpec | None = None,
    role: str | None = None,
) -> None:
    """One run: `requests` requests scheduled evenly over the first 10 s (the last at 10 s), a measured window
    of `window_s`, 1,000 prompt tokens each of which the trace offers half for reuse; 4 requests running (the
    samples), a batch of `running_at_slo` at the SLO capacity."""
    run_id = f"{scenario}-{week.isoformat()}"
    records = [
        request(
            run_id,
            f"q{i}",
            100.0,
            300.0,
            cached_tokens=cached,
            completion_tokens=completion,
            sent_mono_s=(i + 1) * 10.0 / requests,
            lag_ms=0.0,
        )
        for i in range(requests)
    ]
    info = run_info(run_id, window_s, requests_total=requests, requests_recorded=requests, requests_ok=requests,
                    **({} if server_info is None else {"server_info": server_info}))  # fmt: skip
    context = RunContext(
        slo_ttft_ms=1000.0,
        slo_tpot_ms=100.0,
        prefix_reuse_share=0.5,
        capacity_rps_at_slo=capacity_rps,
        capacity_source=None if capacity_rps is None else "twin_sweep",
        running_requests_at_slo=None if capacity_rps is None else running_at_slo,
        role=role,
    )
    gauges = [("sglang:num_running_reqs", 4.0)]
    if spec_accept_length is not None:
        gauges.append(("sglang:spec_accept_length", spec_accept_length))
    samples = [server_sample(run_id, t, m, v) for t in (0.5, window_s / 2) for m, v in gauges]
    write_run(
        store.lake_root, week, scenario, info, spec or endpoint(usd_per_gpu_hour=usd_per_gpu_hour), records, context,
        server_samples=samples,
    )  # fmt: skip


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Warehouse:
    store = Warehouse(tmp_path_factory.mktemp("attribution") / "wh")
    for scenario in ("price", "cache-off", "volume", "no-capacity", "batch", "mtp"):
        _week(store, WEEKS[0], scenario)
    _week(store, WEEKS[1], "price", usd_per_gpu_hour=4.0)  # the price book doubled, nothing else
    # The same traffic with the radix cache off: nothing cached, a slower drain, less capacity at the SLO.
    _week(store, WEEKS[1], "cache-off", cached=0, window_s=23.0, capacity_rps=5.0)
    _week(store, WEEKS[1], "volume", requests=20)  # half the requests in the same window
    _week(store, WEEKS[1], "no-capacity", completion=150, window_s=21.0, capacity_rps=None)
    # Half the batch at the SLO, and the capacity with it (the same time in flight per request).
    _week(store, WEEKS[1], "batch", capacity_rps=4.0, running_at_slo=8.0)
    # Someone turned the radix cache off: a new configuration, as the server's /server_info reported it.
    cache_on = {"version": "0.5.4", "backend": "sim", "tp_size": 8, "disable_radix_cache": False}
    for scenario, role in (("reconfigured", None), ("reconfigured-live", "live")):
        _week(store, WEEKS[0], scenario, server_info=cache_on, spec=RADIX_OFF.as_of(WEEKS[0]), role=role)
        _week(store, WEEKS[1], scenario, cached=0, window_s=23.0, capacity_rps=5.0, spec=RADIX_OFF.as_of(WEEKS[1]),
              server_info={**cache_on, "disable_radix_cache": True}, role=role)  # fmt: skip
    # Speculative decoding on: two tokens a step, twice the capacity, the same batch.
    _week(store, WEEKS[1], "mtp", capacity_rps=16.0, spec_accept_length=2.0)
    # Four different baseline weeks (an even median: the middle two), then a week where everything moved.
    for week, (n, usd, cached, window, capacity) in zip(
        WEEKS[:4],
        ((40, 2.0, 500, 20.0, 8.0), (32, 2.5, 400, 18.0, 7.0), (48, 2.0, 450, 24.0, 9.0), (36, 3.0, 500, 20.0, 6.0)),
    ):
        _week(
            store,
            week,
            "mixed",
            requests=n,
            usd_per_gpu_hour=usd,
            cached=cached,
            window_s=window,
            capacity_rps=capacity,
        )
    _week(store, WEEKS[4], "mixed", requests=30, usd_per_gpu_hour=3.5, cached=200, completion=180, window_s=26.0,
          capacity_rps=4.0, running_at_slo=12.0, spec_accept_length=1.5)  # fmt: skip
    store.refresh()
    return store


@pytest.fixture(scope="module")
def rows(store) -> dict[tuple[str, date], CostAttributionRow]:
    return {(r.scenario, r.week_start): r for r in store.cost_attribution()}


@pytest.fixture(scope="module")
def trends(store) -> dict[tuple[str, date], WeeklyTrendRow]:
    return {(r.scenario, r.week_start): r for r in store.weekly_trends()}


def _others_zero(row: CostAttributionRow, *kept: str) -> None:
    for part in PARTS:
        if part not in kept:
            assert getattr(row, part) == pytest.approx(0.0, abs=1e-12), part


def test_every_week_has_a_row_and_the_first_has_no_baseline(rows):
    assert len(rows) == 8 * 2 + 5  # eight scenarios of two weeks, and five weeks of one
    first = rows[("price", WEEKS[0])]
    assert first.baseline_realised_cost_per_request_usd is None and first.change_usd is None
    assert all(getattr(first, part) is None for part in PARTS)
    assert first.traffic_usd is None and first.runtime_usd is None


def test_a_doubled_price_is_all_price(rows):
    row = rows[("price", WEEKS[1])]
    # 8 GPUs x $4/h x 20 s / 40 requests, against the same at $2/h.
    assert row.realised_cost_per_request_usd == pytest.approx(8 * 4.0 * 20 / 3600 / 40)
    assert row.change_usd == pytest.approx(row.realised_cost_per_request_usd / 2)
    assert row.price_usd == pytest.approx(row.change_usd, rel=1e-12)
    _others_zero(row, "price_usd")
    assert row.unattributed_usd == pytest.approx(0.0, abs=1e-15)
    assert row.usd_per_gpu_hour == pytest.approx(4.0)


def test_the_same_traffic_with_the_cache_off_is_all_runtime_and_mostly_the_cache(rows, trends):
    row = rows[("cache-off", WEEKS[1])]
    assert row.change_usd > 0
    assert row.price_usd == pytest.approx(0.0, abs=1e-15)
    assert row.traffic_mix_usd == pytest.approx(0.0, abs=1e-12)
    assert row.traffic_prefix_reuse_usd == pytest.approx(0.0, abs=1e-12)
    assert row.prefix_cache_usd > 0  # the work the cache no longer saved
    # Capacity fell from 8 to 5 requests/s, and the realised cost rose by less (the same traffic filled more of it).
    efficiency = trends[("cache-off", WEEKS[1])].efficiency_cost_change_pct
    assert efficiency == pytest.approx(100 * (8 / 5 - 1))
    assert row.runtime_usd > row.change_usd > 0 > row.traffic_volume_usd
    assert row.prefill_token_weight is not None and row.prefill_token_weight > 0
    assert row.capacity_known is True


def test_half_the_requests_on_the_same_gpus_is_all_traffic_volume(rows):
    row = rows[("volume", WEEKS[1])]
    assert row.change_usd == pytest.approx(row.baseline_realised_cost_per_request_usd)  # twice the cost each
    assert row.traffic_volume_usd == pytest.approx(row.change_usd, rel=1e-12)
    _others_zero(row, "traffic_volume_usd")


def test_a_halved_batch_at_capacity_is_batching(rows):
    row = rows[("batch", WEEKS[1])]
    # Half the capacity doubles what each request needs at capacity; the same window costs the same.
    assert row.change_usd == pytest.approx(0.0, abs=1e-15)
    assert row.batching_usd == pytest.approx(-row.traffic_volume_usd, rel=1e-9) and row.batching_usd > 0
    _others_zero(row, "batching_usd", "traffic_volume_usd")


def test_speculative_decoding_is_its_own_lever(rows):
    row = rows[("mtp", WEEKS[1])]
    # Twice the capacity with two tokens a step: all of the runtime's part is speculative decoding's.
    assert row.speculative_decoding_usd < 0
    assert row.speculative_decoding_usd == pytest.approx(-row.traffic_volume_usd, rel=1e-9)
    _others_zero(row, "speculative_decoding_usd", "traffic_volume_usd")


def test_without_a_capacity_the_idle_share_and_the_speed_are_unattributed(rows):
    row = rows[("no-capacity", WEEKS[1])]
    assert row.capacity_known is False
    assert row.traffic_volume_usd is None and row.batching_usd is None
    assert row.traffic_mix_usd > 0  # 150 output tokens instead of 100
    total = sum(getattr(row, p) for p in PARTS if getattr(row, p) is not None)
    assert total + row.unattributed_usd == pytest.approx(row.change_usd, rel=1e-12)
    assert row.unattributed_usd != 0


def test_parts_add_up_to_the_change_against_weekly_trends_own_median(rows, trends):
    row = rows[("mixed", WEEKS[4])]
    trend = trends[("mixed", WEEKS[4])]
    assert row.baseline_weeks == 4 and row.baseline_source == "same_config"
    assert row.baseline_realised_cost_per_request_usd == pytest.approx(
        trend.baseline_realised_cost_per_request_usd, rel=1e-12
    )
    assert row.realised_cost_per_request_usd == pytest.approx(trend.realised_cost_per_request_usd, rel=1e-12)
    assert len(row.baseline_median_weeks.split(",")) == 2  # an even count: the middle two weeks
    moved = ("price_usd", "traffic_volume_usd", "traffic_mix_usd", "prefix_cache_usd", "batching_usd",
             "speculative_decoding_usd")  # fmt: skip
    assert all(getattr(row, part) not in (None, 0) for part in moved)
    assert sum(getattr(row, p) for p in PARTS) == pytest.approx(row.change_usd, rel=1e-12)
    assert row.price_usd + row.traffic_usd + row.runtime_usd == pytest.approx(row.change_usd, rel=1e-12)
    assert row.runtime_usd == pytest.approx(sum(getattr(row, p) for p in LEVERS), rel=1e-12)
    assert row.unattributed_usd == pytest.approx(0.0, abs=1e-15)
    for week in WEEKS[1:4]:  # every week with a baseline adds up, whatever its median weeks
        earlier = rows[("mixed", week)]
        assert sum(getattr(earlier, p) for p in PARTS) + earlier.unattributed_usd == pytest.approx(earlier.change_usd)


def test_the_console_prints_why_cost_moved_for_every_week_with_a_baseline(rows):
    from rich.console import Console

    from pipelines.commands.trend_console import print_cost_attribution

    console = Console(record=True, width=200)
    print_cost_attribution(list(rows.values()), console)
    text = console.export_text()
    price = rows[("price", WEEKS[1])]
    line = next(line for line in text.splitlines() if "price" in line and str(WEEKS[1]) in line)
    # The doubled price week: its change, all of it price, per 1,000 requests.
    assert f"{1000 * price.change_usd:+.3f}" in line and line.count(f"{1000 * price.price_usd:+.3f}") >= 2
    assert str(WEEKS[0]) not in text  # a week without a baseline has nothing to split


def test_a_new_configuration_is_named_by_the_flags_that_changed(rows):
    # Not by two fingerprints: the analyst reads what someone changed.
    assert json.loads(rows[("reconfigured", WEEKS[1])].runtime_changes) == ["disable_radix_cache: false -> true"]
    assert json.loads(rows[("cache-off", WEEKS[1])].runtime_changes) == []  # the same configuration: nothing named
    # Why it changed: the revision's note, stored with the run and carried to the row.
    assert rows[("reconfigured", WEEKS[1])].revision_note == NOTE
    assert rows[("reconfigured", WEEKS[0])].revision_note is None  # before the revision
    assert rows[("cache-off", WEEKS[1])].revision_note is None  # an endpoint without revisions


def test_the_note_lands_in_runs_with_the_revision_it_belongs_to(store):
    with store.connect() as con:
        found = con.execute(
            "SELECT week_start, revision_note FROM runs WHERE scenario = 'reconfigured' ORDER BY week_start"
        ).fetchall()
    assert found == [(WEEKS[0], None), (WEEKS[1], NOTE)]


def test_the_verdict_s_reasons_name_the_change_as_cost_attribution_does_with_the_note(rows, trends):
    changed = trends[("reconfigured", WEEKS[1])]
    assert changed.config_changed and changed.baseline_source == "previous_config"
    [change] = json.loads(rows[("reconfigured", WEEKS[1])].runtime_changes)  # the same words, one definition
    reasons = json.loads(changed.regression_reasons)
    assert reasons[0] == (
        f"configuration changed this week: {change}, note '{NOTE}'; compared with the previous configuration's baseline"
    )
    assert change == "disable_radix_cache: false -> true"
    # A live row is not judged, but says what changed in its configuration all the same, and nothing else.
    live = trends[("reconfigured-live", WEEKS[1])]
    assert live.regression_verdict == "not_judged" and json.loads(live.regression_reasons) == reasons[:1]
    assert trends[("cache-off", WEEKS[1])].config_changed is False
