"""Scheduling on virtual time: concurrency cap, session order, warm-up, window, shard, shared start."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from dataclasses import replace

import pytest

from replay.prepared_request import PreparedRequest, prepare_requests
from replay.recording.records import RequestRecord, RequestStatus
from replay.recording.requests_reader import read_requests
from replay.recording.schedule_lag import RunTally
from replay.replay_config import ReplayConfig, ReplayInputError
from replay.runner import run_replay_async
from replay.schedule.open_loop import run_open_loop
from replay.schedule.request_selection import select_requests
from replay.schedule.session_order import session_predecessors
from replay.schedule.shard import parse_shard, shard_of
from replay_sglang_peer import ScriptedClock, SglangPeer, VirtualClock, make_workload

T0 = 1010.0


def _run(requests: list[PreparedRequest], service_s: dict[str, float] | float, max_concurrency: int | None = None):
    """Replay `requests` with a fake server taking service_s virtual seconds; returns records by id."""
    clock = VirtualClock()
    records: dict[str, RequestRecord] = {}

    async def dispatch(request: PreparedRequest) -> RequestRecord:
        sent_s = clock.now_s() - T0
        took = service_s if isinstance(service_s, float) else service_s[request.request_id]
        await clock.sleep_until(clock.now_s() + took)
        return RequestRecord(
            run_id="r", request_id=request.request_id, session_id=request.session_id, turn=request.turn,
            input_tokens=request.input_tokens, output_tokens=request.output_tokens, scheduled_mono_s=request.offset_s,
            sent_mono_s=sent_s, first_token_mono_s=None, first_answer_mono_s=None, finish_mono_s=clock.now_s() - T0,
            chunk_mono_s=(), prompt_tokens=None, completion_tokens=None, cached_tokens=None, reasoning_tokens=None,
            finish_reason="length", http_status=200, status=RequestStatus.OK,
        )  # fmt: skip

    def on_record(record: RequestRecord) -> None:
        records[record.request_id] = record

    delivered = asyncio.run(clock.drive(run_open_loop(requests, dispatch, clock, T0, on_record, max_concurrency, "r")))
    assert delivered == len(requests)
    return records


def _lag_s(record: RequestRecord) -> float:
    return record.sent_mono_s - record.scheduled_mono_s - record.held_s


def _prepared(arrivals, **kwargs) -> list[PreparedRequest]:
    workload = make_workload(arrivals, input_tokens=1, **kwargs)
    return prepare_requests(workload, [[1]] * len(arrivals), speedup=1.0, warmup_s=kwargs.pop("warmup_s", 0.0))


def test_the_concurrency_cap_holds_requests_in_schedule_order_and_records_the_hold():
    records = _run(_prepared([0.0, 0.0, 0.0, 5.0]), service_s=1.0, max_concurrency=1)
    assert [records[r].sent_mono_s for r in ("r0", "r1", "r2", "r3")] == [0.0, 1.0, 2.0, 5.0]
    assert [(records[r].held_s, records[r].held_by) for r in ("r0", "r1", "r2", "r3")] == [
        (0.0, None), (1.0, "concurrency"), (2.0, "concurrency"), (0.0, None)]  # fmt: skip
    assert all(_lag_s(r) == 0.0 for r in records.values())  # held time is not schedule lag


def test_a_turn_waits_for_the_previous_turn_of_its_session_only():
    requests = _prepared([0.0, 0.5, 0.5, 3.0], sessions=["s", "s", None, "s"], turns=[1, 2, None, 3])
    records = _run(requests, service_s={"r0": 2.0, "r1": 0.1, "r2": 9.0, "r3": 0.1})
    assert records["r1"].sent_mono_s == 2.0 and records["r1"].held_by == "session"
    assert records["r1"].held_s == pytest.approx(1.5)
    assert records["r2"].sent_mono_s == 0.5 and records["r2"].held_by is None  # no session: never held
    assert records["r3"].sent_mono_s == 3.0 and records["r3"].held_by is None  # r1 finished at 2.1: not held
    assert all(_lag_s(r) == pytest.approx(0.0) for r in records.values())


def test_session_order_follows_turn_numbers_even_when_arrivals_disagree():
    requests = _prepared([0.0, 1.0], sessions=["s", "s"], turns=[2, 1])
    assert session_predecessors(requests) == [1, None]
    records = _run(requests, service_s=3.0)
    assert records["r1"].sent_mono_s == 1.0 and records["r0"].sent_mono_s == 4.0
    assert records["r0"].held_by == "session" and records["r0"].held_s == 4.0


def test_warmup_requests_are_flagged():
    workload = make_workload([0.0, 1.0, 2.0, 3.0], input_tokens=1)
    requests = prepare_requests(workload, [[1]] * 4, speedup=2.0, warmup_s=1.0)  # due at 0, 0.5, 1, 1.5
    records = _run(requests, service_s=0.1)
    assert [records[f"r{i}"].is_warmup for i in range(4)] == [True, True, False, False]


def test_run_tally_lag_subtracts_the_hold():
    tally = RunTally()
    records = _run(_prepared([0.0, 0.0]), service_s=1.0, max_concurrency=1)
    for record in records.values():
        tally.add(record)
    assert tally.lags_s == [0.0, 0.0]


def test_run_tally_ends_at_the_last_request_whatever_it_got_back():
    # A request refused or stopped has no last byte: it ends when its record came in. A router killed 10 s into a
    # 40 s window fails the rest of the schedule fast; the run still held its GPUs to the end.
    answered = replace(_run(_prepared([0.0]), service_s=1.0)["r0"], finish_mono_s=10.0)
    refused = replace(answered, request_id="r1", status=RequestStatus.ERROR, finish_mono_s=None)
    tally = RunTally()
    tally.add(answered, recorded_s=10.0)
    tally.add(refused, recorded_s=39.9)
    assert tally.last_end_s == 39.9
    tally.add(replace(answered, request_id="r2", finish_mono_s=12.0), recorded_s=40.5)
    assert tally.last_end_s == 39.9  # a last byte is its own end, whenever its record came in


def test_selection_windows_then_caps_then_shards_and_shards_partition_it():
    sessions = [f"s{i % 7}" if i % 3 else None for i in range(60)]
    workload = make_workload([i * 0.5 for i in range(60)], input_tokens=2, sessions=sessions)
    base = dict(url="http://127.0.0.1:1", start_s=2.0, duration_s=20.0, max_requests=30)
    _, everything = select_requests(workload, ReplayConfig(**base))
    assert [r.request_id for r in everything] == [f"r{i}" for i in range(4, 34)]
    shards = [select_requests(workload, ReplayConfig(**base, shard_index=k, shard_count=3))[1] for k in range(3)]
    ids = [{r.request_id for r in shard} for shard in shards]
    assert set().union(*ids) == {r.request_id for r in everything}
    assert sum(len(s) for s in ids) == len(everything)  # disjoint
    for shard in shards:  # a session never straddles shards
        for request in shard:
            if request.session_id is not None:
                assert shard_of(request.session_id, 3) == shards.index(shard)


def test_shard_hash_is_the_same_in_another_process_with_another_hash_seed():
    keys = [f"session-{i}" for i in range(50)]
    code = f"from replay.schedule.shard import shard_of; print([shard_of(k, 8) for k in {keys!r}])"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert other.stdout.strip() == str([shard_of(k, 8) for k in keys])
    assert len(set(shard_of(k, 8) for k in keys)) > 4  # and it spreads


def test_shard_specs_are_checked():
    assert parse_shard("1/4") == (1, 4)
    for bad in ("4/4", "1/0", "x", "-1/2"):
        with pytest.raises(ValueError, match="shard"):
            parse_shard(bad)


def test_a_shared_epoch_start_sets_t0_and_a_past_one_is_refused(tmp_path):
    clock = ScriptedClock()

    async def main(start_at: float):
        async with SglangPeer() as peer:
            config = ReplayConfig(url=peer.url, run_id="e", start_at_epoch_s=start_at)
            return await run_replay_async(make_workload([0.0, 1.0]), config, tmp_path, clock)

    start = clock.wall_s() + 30.0
    run = asyncio.run(main(start))
    assert run.t0_wall_s == start
    assert clock.sleeps == [pytest.approx(1030.0), pytest.approx(1031.0)]  # t0 = now + 30 s
    assert run.requests_ok == 2
    with pytest.raises(ReplayInputError, match="passed .* ago"):
        asyncio.run(main(clock.wall_s() - 5.0))


def test_runner_records_holds_warmup_and_window_end_to_end(tmp_path):
    async def main():
        async with SglangPeer() as peer:
            config = ReplayConfig(url=peer.url, run_id="w", max_concurrency=2, warmup_s=0.5, max_requests=3)
            workload = make_workload([0.0, 0.25, 1.0, 2.0], sessions=["a", "a", None, None], turns=[1, 2, None, None])
            return await run_replay_async(workload, config, tmp_path, ScriptedClock())

    run = asyncio.run(main())
    rows = {r["request_id"]: r for r in read_requests(tmp_path).to_pylist()}
    assert sorted(rows) == ["r0", "r1", "r2"]
    assert [rows[r]["is_warmup"] for r in ("r0", "r1", "r2")] == [True, True, False]
    assert (run.max_concurrency, run.warmup_s, run.requests_total, run.requests_ok) == (2, 0.5, 3, 3)
    assert run.window_s == pytest.approx(0.5)  # last finish (1.0) minus warm-up


def test_config_rejects_inconsistent_scheduling_options():
    for kwargs, message in [
        ({"max_concurrency": 0}, "max_concurrency"), ({"shard_index": 2, "shard_count": 2}, "need 0 <= k < n"),
        ({"arrival_process": "poisson"}, "needs rate_rps"), ({"rate_rps": 5.0}, "only for synthetic"),
        ({"arrival_process": "zipf", "rate_rps": 1.0}, "unknown arrival process 'zipf'"),
    ]:  # fmt: skip
        with pytest.raises(ReplayInputError, match=message):
            ReplayConfig(url="http://h:1", **kwargs)


def test_synthetic_arrivals_replace_the_trace_schedule_before_the_window():
    workload = make_workload([0.0] * 200, input_tokens=1)  # an untimed trace: every arrival at 0
    config = ReplayConfig(url="http://h:1", arrival_process="constant", rate_rps=50.0, duration_s=2.0)
    _, requests = select_requests(workload, config)
    assert [r.offset_s for r in requests] == pytest.approx([i / 50.0 for i in range(100)])  # 2 s at 50 req/s
    poisson = ReplayConfig(url="http://h:1", arrival_process="poisson", rate_rps=50.0, seed=3)
    first = [r.offset_s for r in select_requests(workload, poisson)[1]]
    assert first == [r.offset_s for r in select_requests(workload, poisson)[1]]  # seeded: repeatable
    gaps = [b - a for a, b in zip(first, first[1:])]
    assert len(set(round(g, 9) for g in gaps)) > 100  # not evenly spaced
