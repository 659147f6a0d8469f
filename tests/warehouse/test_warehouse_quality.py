"""The Great Expectations suites: each rule catches its violation with the right count; good data passes."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from replay.recording.records import RequestStatus
from warehouse.quality import check_lake_quarantine, check_requests, check_runs, check_weekly_trends
from warehouse_builders import failed_request, request, requests_table

REPO = Path(__file__).resolve().parents[2]


def _good_requests() -> pd.DataFrame:
    records = [
        request("r1", "q1", 100, 1000, cached_tokens=0),
        request("r1", "q2", 200, 2000, cached_tokens=500),
        request("r1", "q3", 300, 3000, cached_tokens=None),  # not reported: not a violation
        failed_request("r1", "q4"),
        request(
            "r1",
            "q5",
            None,
            None,
            status=RequestStatus.TIMEOUT,
            prompt_tokens=None,
            cached_tokens=None,
            completion_tokens=None,
        ),
    ]
    return requests_table(records).to_pandas()  # what the asset check hands over


def test_good_requests_pass_every_expectation():
    result = check_requests(_good_requests())
    assert result.success and result.failures == ()
    # 6 token columns >= 0, cached <= prompt, sent <= first token <= finish, status not null and in set, outputs.
    assert result.evaluated == 12


def test_each_violated_request_rule_is_reported_with_its_count_and_examples():
    df = _good_requests()
    df.loc[0, "cached_tokens"] = 1200  # more cached than prompt (1000)
    df.loc[1, "cached_tokens"] = -5  # negative, and also <= prompt
    df.loc[[0, 1], "finish_mono_s"] = df.loc[[0, 1], "first_token_mono_s"] - 0.5  # finish before first token
    df.loc[3, "status"] = "exploded"
    df.loc[2, "completion_tokens"] = 99  # an ok request that stopped short of the enforced 100
    df.loc[4, "completion_tokens"] = 7  # a timeout: the output rule does not apply
    result = check_requests(df)
    assert not result.success
    failed = {f.rule: f for f in result.failures}
    assert set(failed) == {
        "cached_tokens >= 0",
        "cached_tokens <= prompt_tokens",
        "first_token_mono_s <= finish_mono_s",
        "status in ok|error|timeout|cancelled",
        "completion_tokens == output_tokens for ok requests",
    }
    assert failed["cached_tokens >= 0"].unexpected_count == 1
    assert failed["cached_tokens >= 0"].examples == (-5.0,)
    assert failed["cached_tokens <= prompt_tokens"].unexpected_count == 1
    assert failed["cached_tokens <= prompt_tokens"].columns == ("prompt_tokens", "cached_tokens")
    assert failed["cached_tokens <= prompt_tokens"].examples == ((1000.0, 1200.0),)
    assert failed["first_token_mono_s <= finish_mono_s"].unexpected_count == 2
    assert failed["status in ok|error|timeout|cancelled"].examples == ("exploded",)
    assert failed["completion_tokens == output_tokens for ok requests"].unexpected_count == 1
    assert failed["completion_tokens == output_tokens for ok requests"].examples == ((99.0, 100),)
    as_metadata = result.failures[0].to_dict()
    assert set(as_metadata) == {"rule", "expectation", "columns", "unexpected_count", "examples", "error"}


def test_output_rule_can_be_switched_off_for_replays_without_ignore_eos():
    df = _good_requests()
    df.loc[0, "completion_tokens"] = 42
    assert not check_requests(df).success
    assert check_requests(df, outputs_enforced=False).success


def test_missing_columns_are_a_clear_error():
    with pytest.raises(ValueError, match=r"missing columns \['cached_tokens'\]"):
        check_requests(_good_requests().drop(columns=["cached_tokens"]))


def _trend(scenario: str, verdict: str, reasons: str | None = None) -> dict:
    return {
        "week_start": "2025-03-03",
        "scenario": scenario,
        "endpoint": "v3",
        "regression_verdict": verdict,
        "regression_reasons": reasons,
    }


def test_regression_check_fails_exactly_on_regression_verdicts_and_says_why():
    rows = [_trend("a", "ok"), _trend("b", "within_noise", '["cost +12% inside noise"]'), _trend("c", "no_baseline"),
            _trend("e", "drift", '["cost drifted +6%"]')]  # fmt: skip
    # within_noise warns in the table and a drift is told by the notice sensor: neither fails the check.
    assert check_weekly_trends(pd.DataFrame(rows)).success
    rows.append(_trend("d", "regression", '["realised_cost_per_request_usd +30.0% vs baseline 0.1"]'))
    result = check_weekly_trends(pd.DataFrame(rows))
    assert not result.success and result.evaluated == 1
    [failure] = result.failures
    assert failure.unexpected_count == 1
    assert failure.examples == ('2025-03-03 d v3: ["realised_cost_per_request_usd +30.0% vs baseline 0.1"]',)
    rows.append(_trend("f", "sustained", '["realised_cost_per_request_usd +25.0% vs baseline 0.1"]'))
    [failure] = check_weekly_trends(pd.DataFrame(rows)).failures
    assert failure.unexpected_count == 2  # a regression that persists fails it too


def test_no_trend_rows_is_no_regression():
    assert check_weekly_trends(pd.DataFrame([])).success
    with pytest.raises(ValueError, match="missing columns"):
        check_weekly_trends(pd.DataFrame([{"realised_cost_change_pct": 30.0}]))


def test_the_lake_check_passes_a_week_with_nothing_quarantined_or_only_replaced_files():
    assert check_lake_quarantine(pd.DataFrame([])).success  # the usual week
    row = {
        "table_name": "requests",
        "week_start": "2025-03-03",
        "scenario": "chat",
        "reason": "unreadable footer",
        "quarantined_path": "lake/_quarantine/requests/week=2025-03-03/scenario=chat/part-0.1.parquet",
        "replaced": True,
    }
    assert check_lake_quarantine(pd.DataFrame([row])).success
    [failure] = check_lake_quarantine(pd.DataFrame([{**row, "replaced": False}])).failures
    assert failure.examples == (f"requests 2025-03-03 chat: unreadable footer ({row['quarantined_path']})",)


def _run_rows(**overrides) -> pd.DataFrame:
    row = {
        "completed_requests": 99,
        "failed_requests": 1,
        "schedule_lag_p99_ms": 3.0,
        "client_degraded": False,
        "server_sample_count": 40,
        "partial": False,
    }
    row.update(overrides)
    return pd.DataFrame([row])


def test_runs_suite_passes_a_good_run_and_names_each_problem():
    assert check_runs(_run_rows()).success  # 99 / 100 completed is on the line
    cases = {
        "completion_rate >= 0.99": dict(completed_requests=98, failed_requests=2),
        "some request completed": dict(completed_requests=0, failed_requests=0),
        "schedule_lag_p99_ms <= 100": dict(schedule_lag_p99_ms=250.0),
        "server samples present": dict(server_sample_count=0),
        "run finished (not partial)": dict(partial=True),
    }
    for rule, overrides in cases.items():
        result = check_runs(_run_rows(**overrides))
        assert [f.rule for f in result.failures] == [rule], rule
    assert check_runs(_run_rows(schedule_lag_p99_ms=250.0), max_schedule_lag_p99_ms=300).success
    # The replay's 10 ms degraded flag is shown in run_summary and the report, not a blocking rule.
    assert check_runs(_run_rows(client_degraded=True, schedule_lag_p99_ms=12.0)).success


def test_gx_runs_the_suites_without_its_distribution_libraries_and_still_has_them_when_an_expectation_needs_them(
    tmp_path,
):
    # A fresh interpreter: this one may have imported scipy.stats already. First a suite of this module, then one of
    # GX's own expectations that reads scipy.stats (KL divergence against a known distribution), in the same process.
    script = """
import importlib.util, json, sys
import pandas as pd
from warehouse.quality import GX_DEFERRED, _ephemeral_context, check_requests
assert check_requests(pd.read_parquet(sys.argv[1])).success
before = {name: isinstance(sys.modules.get(name), importlib.util._LazyModule) for name in GX_DEFERRED}
import great_expectations.expectations as gxe
context = _ephemeral_context()
frame = pd.DataFrame({"x": ["a"] * 50 + ["b"] * 50})
batch = (context.data_sources.add_pandas("s").add_dataframe_asset("a").add_batch_definition_whole_dataframe("w")
         .get_batch(batch_parameters={"dataframe": frame}))
partition = {"values": ["a", "b"], "weights": [0.9, 0.1]}
result = batch.validate(gxe.ExpectColumnKLDivergenceToBeLessThan(column="x", partition_object=partition, threshold=5))
print(json.dumps({"before": before, "kl": result.result["observed_value"],
                  "after": isinstance(sys.modules["scipy.stats"], importlib.util._LazyModule)}))
"""
    requests = tmp_path / "requests.parquet"
    _good_requests().to_parquet(requests)  # the frame the asset check hands over
    done = subprocess.run(
        [sys.executable, "-c", script, str(requests)], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    # The suites ran with both still unread; GX's KL expectation then loaded scipy.stats and got the textbook value:
    # KL(0.5, 0.5 || 0.9, 0.1) = 0.5 ln(0.5/0.9) + 0.5 ln(0.5/0.1).
    assert seen["before"] == {"scipy.stats": True, "altair": True}
    assert seen["kl"] == pytest.approx(0.5 * math.log(0.5 / 0.9) + 0.5 * math.log(0.5 / 0.1))
    assert seen["after"] is False
