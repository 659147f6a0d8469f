"""Structured output in the warehouse: the valid-answer rate, the cost per valid request, the retries and the
TPOT with and without the constraint, from request records to run_summary, weekly_trends, the
structured_output quality check, the report section and the demo's console table (docs/warehouse.md)."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from rich.console import Console

from pipelines.commands.trend_console import print_weekly_trends
from warehouse.backends.store import Warehouse
from warehouse.marts.mart_rows import WeeklyTrendRow
from warehouse.marts.run_rows import RunContext, build_run_row
from warehouse.parquet.lake import write_partition
from warehouse.quality import check_structured_output
from warehouse.report.structured_output import StructuredRow, comparisons, structured_output_section, structured_rows
from warehouse.report.weekly_report import write_weekly_report
from warehouse_builders import endpoint, failed_request, request, requests_table, run_info, write_run

REPO_ROOT = Path(__file__).resolve().parents[2]
WEEK_1 = date(2026, 11, 16)
WEEK_2 = date(2026, 11, 23)
# Every run: 30 s on 8 GPUs at $2/GPU-hour = $0.1333, over 10 completed requests = $0.01333 a request.
RUN_COST_USD = 8 * 2.0 * 30 / 3600
COST_PER_REQUEST_USD = RUN_COST_USD / 10
SCHEMA_ERROR = "$.priority: 'urgent' is not one of ['low', 'normal', 'high']"


def _tpot_request(run_id: str, i: int, tpot_ms: float, **structured) -> object:
    # 100 completion tokens: tpot_ms = (e2e - ttft) / 99.
    return request(run_id, f"q{i}", 100.0, 100.0 + 99 * tpot_ms, sent_mono_s=1 + i, **structured)


def _records(run_id: str, constrained: bool, valid: list[bool], structured_tpot_ms: float) -> list:
    """len(valid) structured requests (answer_valid as given), then 5 free-form ones at 20 ms TPOT."""
    structured = [
        _tpot_request(
            run_id, i, structured_tpot_ms, response_format_type="json_schema", constrained=constrained,
            answer_valid=ok, answer_error=None if ok else SCHEMA_ERROR,
        )
        for i, ok in enumerate(valid)
    ]  # fmt: skip
    free = [_tpot_request(run_id, len(valid) + i, 20.0) for i in range(5)]
    # Neither a failed nor a warm-up request's answer counts, whatever its format.
    others = [
        failed_request(run_id, "failed"),
        request(run_id, "warm", 100.0, 2000.0, is_warmup=True, response_format_type="json_schema",
                constrained=constrained, answer_valid=False, answer_error=SCHEMA_ERROR),
    ]  # fmt: skip
    return structured + free + others


def _write(store: Warehouse, week: date, scenario: str, run_id: str, records: list, min_valid_rate: float | None):
    info = run_info(run_id, 30.0, requests_total=12, requests_recorded=12, requests_ok=11)
    write_run(store.lake_root, week, scenario, info, endpoint(), records, RunContext(min_valid_rate=min_valid_rate))


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Warehouse:
    store = Warehouse(tmp_path_factory.mktemp("structured") / "wh")
    # Week 1: the constrained scenario's answers all parse; the prompt-only variant's 4 of 5.
    _write(store, WEEK_1, "tickets", "t1", _records("t1", True, [True] * 5, 30.0), 0.99)
    _write(store, WEEK_1, "tickets-prompt", "p1", _records("p1", False, [True] * 4 + [False], 20.0), 0.95)
    _write(store, WEEK_1, "chat", "c1", _records("c1", False, [], 20.0)[:5], None)
    # Week 2: two constrained runs, 9 of their 10 answers parse (below 0.99).
    runs = [
        build_run_row(run_info(run_id, 30.0), endpoint(), "tickets", WEEK_2, RunContext(min_valid_rate=0.99))
        for run_id in ("t2a", "t2b")
    ]
    records = _records("t2a", True, [True] * 4 + [False], 30.0) + _records("t2b", True, [True] * 5, 40.0)
    write_partition(store.lake_root, "runs", WEEK_2, "tickets", pa.concat_tables(runs))
    write_partition(store.lake_root, "requests", WEEK_2, "tickets", requests_table(records))
    store.refresh()
    return store


def _rows(rows: list[WeeklyTrendRow]) -> dict[tuple[date, str], WeeklyTrendRow]:
    return {(row.week_start, row.scenario): row for row in rows}


def test_run_summary_counts_valid_answers_of_completed_structured_requests(store):
    runs = {row.run_id: row for row in store.run_summary()}
    constrained, prompt_only, chat = runs["t1"], runs["p1"], runs["c1"]
    assert constrained.completed_requests == 10
    assert (constrained.structured_requests, constrained.constrained_requests, constrained.valid_answers) == (
        5,
        5,
        5,
    )
    assert constrained.valid_answer_rate == 1.0 and constrained.retries == 0.0
    assert constrained.usd_per_valid_request == pytest.approx(COST_PER_REQUEST_USD)
    assert constrained.min_valid_rate == 0.99
    # Decoding under the grammar against the same run's free-form requests.
    assert constrained.tpot_constrained_ms == pytest.approx(30.0)
    assert constrained.tpot_unconstrained_ms == pytest.approx(20.0)

    assert (prompt_only.structured_requests, prompt_only.constrained_requests, prompt_only.valid_answers) == (
        5,
        0,
        4,
    )
    assert prompt_only.valid_answer_rate == pytest.approx(0.8)
    # A parseable answer costs 1 / 0.8 requests; 5 structured requests need 5 x (1/0.8 - 1) = 1.25 more.
    assert prompt_only.usd_per_valid_request == pytest.approx(COST_PER_REQUEST_USD / 0.8)
    assert prompt_only.retries == pytest.approx(1.25)
    assert prompt_only.tpot_constrained_ms is None and prompt_only.tpot_unconstrained_ms == pytest.approx(20.0)

    # Free-form traffic only: nothing to validate, no rate, no made-up cost per valid request.
    assert (chat.structured_requests, chat.valid_answers) == (0, 0)
    assert chat.valid_answer_rate is None and chat.usd_per_valid_request is None and chat.retries is None


def test_weekly_trends_pool_the_answers_and_the_tpot_of_all_runs(store):
    trends = _rows(store.weekly_trends())
    week = trends[(WEEK_2, "tickets")]
    assert week.runs == 2
    assert (week.structured_requests, week.constrained_requests, week.valid_answers) == (10, 10, 9)
    assert week.valid_answer_rate == pytest.approx(0.9)
    assert week.usd_per_valid_request == pytest.approx(COST_PER_REQUEST_USD / 0.9)
    assert week.retries == pytest.approx(10 * (1 / 0.9 - 1))
    # The median of the pooled requests (5 at 30 ms, 5 at 40 ms), not either run's median.
    assert week.tpot_constrained_ms == pytest.approx(35.0)
    assert week.tpot_unconstrained_ms == pytest.approx(20.0)
    assert week.min_valid_rate == 0.99
    assert trends[(WEEK_1, "tickets-prompt")].valid_answer_rate == pytest.approx(0.8)


def _check(store: Warehouse, week: date, scenario: str):
    rows = [r for r in store.weekly_trends() if r.week_start == week and r.scenario == scenario]
    return check_structured_output(pd.DataFrame(rows))


def test_the_check_fails_the_week_a_constrained_scenario_drops_below_its_threshold(store):
    assert _check(store, WEEK_1, "tickets").success
    failed = _check(store, WEEK_2, "tickets")
    assert not failed.success
    [failure] = failed.failures
    assert failure.unexpected_count == 1
    assert failure.examples == ((pytest.approx(0.9), 0.99),)
    assert failure.columns == ("valid_answer_rate", "min_valid_rate")


def test_the_check_passes_prompt_only_variants_scenarios_without_a_threshold_and_empty_weeks(store):
    # 0.8 against a threshold of 0.95, but the format was only in the prompt: its failures are the measurement.
    assert _check(store, WEEK_1, "tickets-prompt").success
    assert _check(store, WEEK_1, "chat").success
    assert check_structured_output(pd.DataFrame([])).success
    with pytest.raises(ValueError, match=r"missing columns \['min_valid_rate'\]"):
        check_structured_output(pd.DataFrame([{"constrained_requests": 1, "valid_answer_rate": 0.5}]))


def test_the_report_section_compares_the_constraint_with_the_prompt_only_variant(store, tmp_path):
    trends = pd.DataFrame(store.weekly_trends())
    assert [r.scenario for r in structured_rows(trends, WEEK_1)] == ["tickets", "tickets-prompt"]
    section = structured_output_section(trends, WEEK_1)
    assert section.startswith("<h2>Structured output</h2>")
    assert (
        "<td>tickets</td><td>v3-8xh200</td><td>server constraint</td><td>5</td><td>100.0%</td><td>99.0%</td>"
        "<td>0.0</td><td>$0.01333</td><td>$0.01333</td><td>30.00 ms</td><td>20.00 ms</td>" in section
    )
    assert (
        "<td>tickets-prompt</td><td>v3-8xh200</td><td>prompt only</td><td>5</td><td>80.0%</td><td>95.0%</td>"
        "<td>250.0</td><td>$0.01333</td><td>$0.01667</td><td>—</td><td>20.00 ms</td>" in section
    )
    assert (
        "The constraint (tickets on v3-8xh200 against the prompt-only tickets-prompt on v3-8xh200) costs +50.0% "
        "TPOT and +0.0% cost per request, and saves 250.0 retries per 1,000 structured requests: cost per valid "
        "request -20.0%." in section
    )
    page = write_weekly_report(store, WEEK_1, tmp_path).html_path.read_text()
    assert section in page  # the weekly page shows the section as it is
    below = structured_output_section(trends, WEEK_2)
    assert "<b>90.0% below threshold</b>" in below
    assert "No scenario this week" in structured_output_section(trends, date(2026, 11, 30))


def _row(scenario: str, endpoint: str, constrained: bool, role: str | None, structured: int = 30) -> StructuredRow:
    return StructuredRow(
        scenario, endpoint, "sim", "abc123", role, constrained, structured, 1.0, None, None, None, None, None, None
    )


def test_a_prompt_only_variant_is_paired_with_the_constrained_scenario_of_the_same_traffic():
    live = _row("r1", "r1-8xh200", True, "live", structured=41)
    canary = _row("r1-canary", "r1-8xh200", True, "canary")
    prompt_only = _row("r1-prompt-json", "r1-8xh200-b", False, "canary")  # another replica, the same flags
    [pair] = comparisons([live, canary, prompt_only])
    assert (pair.constrained, pair.prompt_only) == (canary, prompt_only)
    # Without roles, the same number of structured requests (the same window and share) decides.
    [pair] = comparisons([live, _row("r1-canary", "r1-8xh200", True, None), _row("p", "r1-8xh200-b", False, None)])
    assert pair.constrained.scenario == "r1-canary"
    other_config = StructuredRow("v3", "v3", "sim", "def456", "canary", True, 30, *[None] * 7)
    assert comparisons([other_config, prompt_only]) == []  # another configuration is not the same serving
    assert comparisons([canary, _row("c2", "r1-8xh200-b", True, "canary"), prompt_only]) == []  # ambiguous


def test_the_trend_console_prints_the_structured_output_table(store):
    console = Console(record=True, width=200)
    print_weekly_trends(store.weekly_trends(), console)
    text = console.export_text()
    table = text[text.index("Structured output") :]
    assert "tickets-prompt" in table and "prompt only" in table and "80.0%" in table and "$0.01667" in table
    # Retries as the report and its sentence count them: per 1,000 structured requests, not the week's count.
    row = next(line for line in table.splitlines() if "tickets-prompt" in line and "2026-11-16" in line)
    assert "retries/1,000" in table and "250.0" in row
    assert "chat " not in table  # no structured requests: not in this table
    assert "Week of" not in table  # the latest week has no prompt-only variant to compare with
    console = Console(record=True, width=300)
    print_weekly_trends([r for r in store.weekly_trends() if r.week_start == WEEK_1], console)
    assert (
        "Week of 2026-11-16: The constraint (tickets on v3-8xh200 against the prompt-only tickets-prompt on "
        "v3-8xh200) costs +50.0% TPOT" in console.export_text()
    )


def test_the_check_runs_on_every_weekly_trends_partition_without_blocking_the_report():
    from assets.partitions import build_partitions
    from assets.quality_checks import build_quality_checks

    checks = build_quality_checks(build_partitions(["tickets"]))
    [spec] = [spec for check in checks for spec in check.check_specs if spec.name == "structured_output"]
    assert spec.asset_key.path == ["weekly_trends"]
    assert not spec.blocking


def test_a_scenarios_threshold_reaches_its_runs_and_the_bundled_schema_is_valid(tmp_path):
    import json

    import jsonschema
    import yaml

    from workloads.scenarios import load_scenarios

    schema_file = REPO_ROOT / "workloads" / "schemas" / "support_ticket.json"
    jsonschema.Draft202012Validator.check_schema(json.loads(schema_file.read_text()))
    entry = {
        "name": "tickets", "trace": "workloads/traces/azure_conv_2023.csv", "format": "azure", "start_s": 2614,
        "duration_s": 6, "speedup": 1, "endpoint": "r1-8xh200", "slo": {"ttft_ms": 1000, "tpot_ms": 100},
        "structured_output": {"share": 0.5, "schema_file": "workloads/schemas/support_ticket.json",
                              "constrain": True, "min_valid_rate": 0.99},
    }  # fmt: skip
    path = tmp_path / "scenarios.yaml"
    path.write_text(yaml.safe_dump({"scenarios": [entry, {**entry, "name": "plain", "structured_output": None}]}))
    scenarios = load_scenarios(path, REPO_ROOT)
    assert RunContext.of_scenario(scenarios["tickets"]).min_valid_rate == 0.99
    assert RunContext.of_scenario(scenarios["plain"]).min_valid_rate is None


@pytest.mark.timeout(120)
def test_replayed_against_the_twin_the_warehouse_counts_what_the_replay_validated(tmp_path):
    """The R1 twin over HTTP, the ticket schema constrained on half the requests, and the same traffic with
    the schema only in the prompt: run_summary's numbers checked by hand from requests.parquet."""
    import json
    import statistics

    from endpoints.spec import EndpointMode, EndpointSpec
    from replay.recording.requests_reader import read_requests
    from replay.recording.run_json import read_run_json
    from replay.runner import ReplayConfig, run_replay
    from replay_sglang_peer import make_workload
    from twin_process import running_sim
    from workloads.prompts.response_format import StructuredOutput, json_schema_format, with_structured_output

    schema = json.loads((REPO_ROOT / "workloads" / "schemas" / "support_ticket.json").read_text())
    ticket = json_schema_format("support_ticket", schema)
    # 16 requests: 30 reasoning tokens, then a 50-token answer (the smallest ticket takes 18).
    traffic = make_workload(
        [i * 0.05 for i in range(16)], input_tokens=48, output_tokens=80, reasoning_tokens=[30] * 16
    )
    r1 = ("--model-path", "deepseek-ai/DeepSeek-R1", "--reasoning-parser", "deepseek-r1")
    spec = EndpointSpec("r1-twin", EndpointMode.SIM, "deepseek-ai/DeepSeek-R1", r1, "H200", 8, 3.5)
    store = Warehouse(tmp_path / "wh")
    parquet = {}
    with running_sim(*r1, "--sim-unconstrained-failure-rate", "0.5") as (url, _):
        for scenario, constrain in (("tickets", True), ("tickets-prompt", False)):
            workload = with_structured_output(traffic, StructuredOutput(0.5, ticket, constrain=constrain))
            out = tmp_path / scenario
            config = ReplayConfig(url=url, run_id=scenario, require_reasoning=True, request_timeout_s=30)
            run_replay(workload, config, out)
            context = RunContext(min_valid_rate=0.99)
            row = build_run_row(read_run_json(out), spec, scenario, WEEK_1, context)
            write_partition(store.lake_root, "runs", WEEK_1, scenario, row)
            write_partition(store.lake_root, "requests", WEEK_1, scenario, read_requests(out))
            parquet[scenario] = read_requests(out).to_pylist()
    store.refresh()
    runs = {row.run_id: row for row in store.run_summary()}
    for scenario, constrain in (("tickets", True), ("tickets-prompt", False)):
        rows, summary = parquet[scenario], runs[scenario]
        ok = [r for r in rows if r["status"] == "ok" and not r["is_warmup"]]
        structured = [r for r in ok if r["answer_valid"] is not None]
        valid = [r for r in structured if r["answer_valid"]]
        assert len(ok) == 16 and 0 < len(structured) < 16
        assert (summary.structured_requests, summary.valid_answers) == (len(structured), len(valid))
        assert summary.constrained_requests == (len(structured) if constrain else 0)
        rate = len(valid) / len(structured)
        assert summary.valid_answer_rate == pytest.approx(rate)
        assert summary.usd_per_valid_request == pytest.approx(summary.realised_cost_per_request_usd / rate)
        tpots = [(r["finish_mono_s"] - r["first_token_mono_s"]) * 1000 / (r["completion_tokens"] - 1) for r in ok]
        grammar = [t for t, r in zip(tpots, ok) if r["constrained"]]
        other = [t for t, r in zip(tpots, ok) if not r["constrained"]]
        assert summary.tpot_unconstrained_ms == pytest.approx(statistics.median(other))
        if constrain:
            assert summary.tpot_constrained_ms == pytest.approx(statistics.median(grammar))
    # The constraint holds every answer to the schema; the prompt alone does not (the twin's 50% failures).
    assert runs["tickets"].valid_answer_rate == 1.0 and runs["tickets"].retries == 0.0
    assert runs["tickets-prompt"].valid_answer_rate < 1.0 and runs["tickets-prompt"].retries > 0
    trends = pd.DataFrame(store.weekly_trends())
    assert check_structured_output(trends[trends["scenario"] == "tickets"]).success
    assert check_structured_output(trends[trends["scenario"] == "tickets-prompt"]).success  # prompt-only: not judged
