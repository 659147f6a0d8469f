"""The open-loop scheduler and the runner on a scripted clock: requests leave at t0 + arrival/speedup."""

from __future__ import annotations

import asyncio

import numpy as np
import pyarrow.parquet as pq
import pytest

from replay.prepared_request import PreparedRequest, prepare_requests
from replay.recording.records import RequestRecord, RequestStatus
from replay.recording.run_json import read_run_json
from replay.runner import ReplayConfig, ReplayInputError, run_replay_async
from replay.schedule.open_loop import run_open_loop
from replay_sglang_peer import PeerBehaviour, ScriptedClock, SglangPeer, make_workload


def _record(request: PreparedRequest, sent_s: float) -> RequestRecord:
    return RequestRecord(
        run_id="r",
        request_id=request.request_id,
        session_id=None,
        turn=None,
        input_tokens=request.input_tokens,
        output_tokens=request.output_tokens,
        scheduled_mono_s=request.offset_s,
        sent_mono_s=sent_s,
        first_token_mono_s=None,
        first_answer_mono_s=None,
        finish_mono_s=None,
        chunk_mono_s=(),
        prompt_tokens=None,
        completion_tokens=None,
        cached_tokens=None,
        reasoning_tokens=None,
        finish_reason=None,
        http_status=None,
        status=RequestStatus.OK,
    )


def test_prepare_scales_offsets_by_speedup_and_keeps_ids():
    workload = make_workload([0.0, 2.0, 0.5], input_tokens=3)
    ids = [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
    prepared = prepare_requests(workload, ids, speedup=2.0)
    assert [(p.request_id, p.offset_s) for p in prepared] == [("r0", 0.0), ("r2", 0.25), ("r1", 1.0)]
    assert prepared[1].input_ids.tolist() == [7, 8, 9] and prepared[1].input_ids.dtype == np.int32


def test_prepare_rejects_ids_of_the_wrong_length_naming_the_request():
    workload = make_workload([0.0, 1.0], input_tokens=3)
    with pytest.raises(ValueError, match="'r1'.*2 input ids for 3 input tokens"):
        prepare_requests(workload, [[1, 2, 3], [1, 2]], speedup=1.0)


def test_scheduler_sends_at_absolute_offsets_even_while_earlier_requests_hang():
    clock = ScriptedClock(start_s=500.0)
    t0_s = 510.0
    requests = prepare_requests(make_workload([0.0, 0.5, 0.5, 3.0], input_tokens=1), [[1]] * 4, speedup=2.0)
    release = asyncio.Event()
    sent: dict[str, float] = {}
    records: list[RequestRecord] = []

    async def dispatch(request: PreparedRequest) -> RequestRecord:
        sent[request.request_id] = clock.now_s() - t0_s
        if request.request_id == "r0":
            await release.wait()  # the server never answers the first request until the end
        return _record(request, sent[request.request_id])

    async def main() -> int:
        async def unblock() -> None:
            while len(sent) < 4:
                await asyncio.sleep(0)
            release.set()

        asyncio.get_running_loop().create_task(unblock())
        return await run_open_loop(requests, dispatch, clock, t0_s, records.append)

    assert asyncio.run(main()) == 4
    assert clock.sleeps == [510.0, 510.25, 510.25, 511.5]  # absolute deadlines, not deltas
    assert sent == {"r0": 0.0, "r1": 0.25, "r2": 0.25, "r3": 1.5}
    assert [r.request_id for r in records][-1] == "r0"  # finished last, sent first


def test_scheduler_propagates_a_dispatch_bug_instead_of_losing_requests():
    requests = prepare_requests(make_workload([0.0, 1.0], input_tokens=1), [[1]] * 2, speedup=1.0)

    async def dispatch(request: PreparedRequest) -> RequestRecord:
        raise RuntimeError("client bug")

    with pytest.raises(RuntimeError, match="client bug"):
        asyncio.run(run_open_loop(requests, dispatch, ScriptedClock(), 1000.0, lambda r: None))


def _replay(tmp_path, clock, behaviour=None, arrivals=(0.0, 0.5, 1.0, 4.0), speedup=2.0):
    async def main():
        async with SglangPeer(behaviour) as peer:
            config = ReplayConfig(url=peer.url, speedup=speedup, run_id="run-x", lag_degraded_ms=10.0)
            return await run_replay_async(make_workload(list(arrivals)), config, tmp_path, clock), peer

    return asyncio.run(main())


def test_replay_on_a_scripted_clock_has_zero_lag_and_records_every_request(tmp_path):
    clock = ScriptedClock()
    run, peer = _replay(tmp_path, clock)
    table = pq.read_table(tmp_path / "requests.parquet")
    rows = sorted(table.to_pylist(), key=lambda r: r["request_id"])
    assert [r["scheduled_mono_s"] for r in rows] == [0.0, 0.25, 0.5, 2.0]
    assert all(r["sent_mono_s"] == r["scheduled_mono_s"] for r in rows)
    assert all(r["status"] == "ok" and r["completion_tokens"] == 4 for r in rows)
    assert len(peer.bodies) == 4
    assert (run.requests_total, run.requests_recorded, run.requests_ok) == (4, 4, 4)
    assert run.schedule_lag_p99_ms == 0.0 and not run.client_degraded
    assert not run.partial and run.server_info["version"] == "0.0-peer"
    assert run.window_s == 2.0  # t0 to the last finish, on the scripted clock
    assert read_run_json(tmp_path) == run


def test_a_client_that_wakes_late_is_flagged_degraded(tmp_path):
    run, _ = _replay(tmp_path, ScriptedClock(late_s=0.05))
    assert run.schedule_lag_p99_ms == pytest.approx(50.0)
    assert run.client_degraded


def test_missing_server_info_is_stored_empty_and_the_replay_runs(tmp_path):
    run, _ = _replay(tmp_path, ScriptedClock(), PeerBehaviour(server_info_status=404))
    assert run.server_info == {} and run.requests_ok == 4


def test_empty_window_is_bad_input(tmp_path):
    config = ReplayConfig(url="http://127.0.0.1:1", start_s=100.0, duration_s=5.0)
    with pytest.raises(ReplayInputError, match=r"test.jsonl: no requests arrive in the window \[100 s, 105 s\)"):
        asyncio.run(run_replay_async(make_workload([0.0, 1.0]), config, tmp_path))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"url": "127.0.0.1:30000"}, "expected http://host:port"),
        ({"url": "http://h:1/generate"}, "without a path"),
        ({"url": "http://h:1", "speedup": 0}, "speedup must be > 0"),
        ({"url": "http://h:1", "api_key_env": "sk-abc123"}, "must name an environment variable"),
        ({"url": "http://h:1", "backend": "vllm"}, "unknown backend 'vllm'"),
    ],
)
def test_config_rejects_bad_values(kwargs, message):
    with pytest.raises(ReplayInputError, match=message):
        ReplayConfig(**kwargs)


def test_api_key_comes_from_the_named_environment_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("COSTBENCH_TEST_KEY", "secret-123")

    async def main():
        async with SglangPeer() as peer:
            config = ReplayConfig(url=peer.url, api_key_env="COSTBENCH_TEST_KEY", run_id="k")
            await run_replay_async(make_workload([0.0]), config, tmp_path, ScriptedClock())
            return peer

    peer = asyncio.run(main())
    assert peer.headers[0]["Authorization"] == "Bearer secret-123"
    assert b"secret-123" not in (tmp_path / "run.json").read_bytes()
    assert b"secret-123" not in (tmp_path / "requests.parquet").read_bytes()


def test_unset_api_key_variable_is_bad_input(tmp_path, monkeypatch):
    monkeypatch.delenv("COSTBENCH_TEST_KEY", raising=False)
    config = ReplayConfig(url="http://127.0.0.1:1", api_key_env="COSTBENCH_TEST_KEY")
    with pytest.raises(ReplayInputError, match="COSTBENCH_TEST_KEY"):
        asyncio.run(run_replay_async(make_workload([0.0]), config, tmp_path))


def test_an_output_path_that_is_a_file_is_bad_input(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    config = ReplayConfig(url="http://127.0.0.1:1")
    with pytest.raises(ReplayInputError, match="cannot create the output directory"):
        asyncio.run(run_replay_async(make_workload([0.0]), config, blocker / "run"))
