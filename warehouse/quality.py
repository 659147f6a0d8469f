"""Data-quality suites (Great Expectations 1.x) over pandas DataFrames, returned as plain data.

`check_requests` guards the request records before they feed the marts; `check_runs` says whether a
run can be trusted (completion, schedule lag, server samples); `check_fleet` whether a fleet lost a worker or
its router mid-run (its figures are a degraded fleet's); `check_weekly_trends` is the regression
rule on the trend rows, exactly as weekly_trends.sql judges it; `check_lake_quarantine` fails a week
whose lake files a refresh had to quarantine, or found missing (written, the lake's manifest says, and gone:
warehouse/parquet/lake_audit.py), so its marts are incomplete;
`check_structured_output` fails a week whose constrained answers parse less often than the scenario asks.
The Dagster asset checks (assets/quality_checks.py) turn a QualityResult into check metadata. Each
call builds its own ephemeral GX context: nothing is written to disk, nothing is shared between
calls, and no analytics or progress bars leave the process.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from functools import cache
from types import ModuleType

import pandas as pd

from common.scoped_imports import deferred_imports
from replay.recording.records import RequestStatus
from warehouse.marts.judged_metrics import REGRESSED_VERDICTS
from workloads.scenarios import DEFAULT_MAX_SCHEDULE_LAG_P99_MS

EXAMPLES_KEPT = 5
# What GX imports at its top for its distribution expectations only (_great_expectations).
GX_DEFERRED = ("scipy.stats", "altair")
TOKEN_COLUMNS = (
    "input_tokens",
    "output_tokens",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "reasoning_tokens",
)
REQUEST_COLUMNS = (*TOKEN_COLUMNS, "status", "sent_mono_s", "first_token_mono_s", "finish_mono_s")
RUN_COLUMNS = (
    "completed_requests",
    "failed_requests",
    "schedule_lag_p99_ms",
    "client_degraded",
    "server_sample_count",
    "partial",
)
DEFAULT_MIN_COMPLETION_RATE = 0.99  # completed / (completed + failed)


@dataclass(frozen=True, slots=True)
class ExpectationFailure:
    rule: str  # what the data should satisfy, in words a reader of the check understands
    expectation: str  # the GX expectation type
    columns: tuple[str, ...]
    unexpected_count: int | None  # None when the expectation could not run
    examples: tuple  # a few offending values (pairs for two-column rules)
    error: str | None = None  # why the expectation could not run

    def to_dict(self) -> dict:
        return {
            "rule": self.rule,
            "expectation": self.expectation,
            "columns": list(self.columns),
            "unexpected_count": self.unexpected_count,
            "examples": [list(e) if isinstance(e, tuple) else e for e in self.examples],
            "error": self.error,
        }


@dataclass(frozen=True, slots=True)
class QualityResult:
    suite: str
    success: bool
    evaluated: int  # expectations evaluated
    failures: tuple[ExpectationFailure, ...]

    def failure(self, rule: str) -> ExpectationFailure | None:
        return next((f for f in self.failures if f.rule == rule), None)


def check_requests(df: pd.DataFrame, outputs_enforced: bool = True) -> QualityResult:
    """Request records (REQUEST_RECORD_SCHEMA columns) are self-consistent.

    `outputs_enforced`: the replay sent ignore_eos + max_new_tokens, so an ok request must have produced
    exactly the output length the workload asked for.
    """
    _require_columns(df, REQUEST_COLUMNS, "requests")
    gxe = _expectations()
    from great_expectations.expectations.row_conditions import Column

    rules = [
        *((f"{c} >= 0", gxe.ExpectColumnValuesToBeBetween(column=c, min_value=0)) for c in TOKEN_COLUMNS),
        (
            "cached_tokens <= prompt_tokens",
            gxe.ExpectColumnPairValuesAToBeGreaterThanB(
                column_A="prompt_tokens",
                column_B="cached_tokens",
                or_equal=True,
                ignore_row_if="either_value_is_missing",
            ),
        ),
        (
            "sent_mono_s <= first_token_mono_s",
            gxe.ExpectColumnPairValuesAToBeGreaterThanB(
                column_A="first_token_mono_s",
                column_B="sent_mono_s",
                or_equal=True,
                ignore_row_if="either_value_is_missing",
            ),
        ),
        (
            "first_token_mono_s <= finish_mono_s",
            gxe.ExpectColumnPairValuesAToBeGreaterThanB(
                column_A="finish_mono_s",
                column_B="first_token_mono_s",
                or_equal=True,
                ignore_row_if="either_value_is_missing",
            ),
        ),
        ("status is not null", gxe.ExpectColumnValuesToNotBeNull(column="status")),
        (
            "status in " + "|".join(s.value for s in RequestStatus),
            gxe.ExpectColumnValuesToBeInSet(column="status", value_set=[s.value for s in RequestStatus]),
        ),
    ]
    if outputs_enforced:
        rules.append(
            (
                "completion_tokens == output_tokens for ok requests",
                gxe.ExpectColumnPairValuesToBeEqual(
                    column_A="completion_tokens",
                    column_B="output_tokens",
                    ignore_row_if="either_value_is_missing",
                    row_condition=Column("status") == RequestStatus.OK.value,
                    condition_parser="pandas",
                ),
            )
        )
    return _validate("requests", df, rules)


def check_weekly_trends(df: pd.DataFrame) -> QualityResult:
    """The regression rule of weekly_trends.sql: fails exactly on the rows whose verdict says a metric regressed
    ('regression', or 'sustained' when it persists).

    Each failing row shows up in the failure's examples as "<week> <scenario> <endpoint>: <reasons>", so
    the check's metadata says what regressed and by how much. Rows past a threshold inside the noise
    (within_noise), drifts (told by the regression notice sensor) and rows without a baseline pass.
    """
    if df.empty and "regression_verdict" not in df.columns:
        return _validate(
            "weekly_trends", pd.DataFrame({"regression": pd.Series([], dtype="object")}), _regression_rules()
        )
    _require_columns(
        df, ("week_start", "scenario", "endpoint", "regression_verdict", "regression_reasons"), "weekly_trends"
    )
    regression = [
        f"{week} {scenario} {endpoint}: {reasons}" if verdict in REGRESSED_VERDICTS else None
        for week, scenario, endpoint, verdict, reasons in zip(
            df["week_start"], df["scenario"], df["endpoint"], df["regression_verdict"], df["regression_reasons"]
        )
    ]
    return _validate(
        "weekly_trends", pd.DataFrame({"regression": pd.Series(regression, dtype="object")}), _regression_rules()
    )


def check_lake_quarantine(df: pd.DataFrame, missing: pd.DataFrame | None = None) -> QualityResult:
    """Rows of lake_quarantine (and, given, of lake_missing) for one week and scenario: fails while any quarantined
    file is not yet replaced, or any partition written is missing.

    Each failing row shows up in the examples as "<table> <week> <scenario>: <reason> (<where it is now>)" for a
    quarantined file, "<table> <week> <scenario>: missing <path>: <reason>" for a missing partition, so the check's
    metadata says which file was taken out of the week, or is gone, and why."""
    problems: list[str | None] = []
    if not (df.empty and "replaced" not in df.columns):
        _require_columns(
            df, ("table_name", "week_start", "scenario", "reason", "quarantined_path", "replaced"), "lake_quarantine"
        )
        problems += [
            None if replaced else f"{table} {week} {scenario}: {reason} ({path})"
            for table, week, scenario, reason, path, replaced in zip(
                df["table_name"], df["week_start"], df["scenario"], df["reason"], df["quarantined_path"], df["replaced"]
            )
        ]
    if missing is not None and not (missing.empty and "path" not in missing.columns):
        _require_columns(missing, ("table_name", "week_start", "scenario", "path", "reason"), "lake_missing")
        problems += [
            f"{table} {week} {scenario}: missing {path}: {reason}"
            for table, week, scenario, path, reason in zip(
                missing["table_name"], missing["week_start"], missing["scenario"], missing["path"], missing["reason"]
            )
        ]
    frame = pd.DataFrame({"quarantined": pd.Series(problems, dtype="object")})
    return _validate("lake_quarantine", frame, _lake_rules())


def _lake_rules() -> list:
    gxe = _expectations()

    return [
        (
            "no lake file of this week and scenario is quarantined (unreadable, or a column of another type) or "
            "missing (written, and gone)",
            gxe.ExpectColumnValuesToBeNull(column="quarantined"),
        )
    ]


def _regression_rules() -> list:
    gxe = _expectations()

    return [
        (
            "no metric regressed past its threshold and outside this week's noise",
            gxe.ExpectColumnValuesToBeNull(column="regression"),
        )
    ]


STRUCTURED_COLUMNS = ("constrained_requests", "valid_answer_rate", "min_valid_rate")


def check_structured_output(df: pd.DataFrame) -> QualityResult:
    """weekly_trends rows of one week and scenario: fails when the answers of a constrained scenario parse
    less often than its structured_output.min_valid_rate.

    Judged are the rows whose requests were sent with their response format as a server-side constraint
    (constrained_requests > 0) and that carry a threshold; the failure's examples are the
    (valid_answer_rate, min_valid_rate) pairs below it. A prompt-only variant, whose answers are expected to
    fail at some rate, and a scenario without a threshold pass."""
    if df.empty and "valid_answer_rate" not in df.columns:
        df = pd.DataFrame({c: pd.Series([], dtype="float64") for c in STRUCTURED_COLUMNS})
    _require_columns(df, STRUCTURED_COLUMNS, "structured output")
    df = df.astype({"constrained_requests": "int64", "valid_answer_rate": "float64", "min_valid_rate": "float64"})
    gxe = _expectations()
    from great_expectations.expectations.row_conditions import Column

    rules = [
        (
            "valid_answer_rate >= structured_output.min_valid_rate where the format was a server-side constraint",
            gxe.ExpectColumnPairValuesAToBeGreaterThanB(
                column_A="valid_answer_rate",
                column_B="min_valid_rate",
                or_equal=True,
                ignore_row_if="either_value_is_missing",
                row_condition=Column("constrained_requests") > 0,
                condition_parser="pandas",
            ),
        )
    ]
    return _validate("structured_output", df, rules)


def check_runs(
    df: pd.DataFrame,
    min_completion_rate: float = DEFAULT_MIN_COMPLETION_RATE,
    max_schedule_lag_p99_ms: float = DEFAULT_MAX_SCHEDULE_LAG_P99_MS,
) -> QualityResult:
    """run_summary rows are trustworthy runs: enough requests completed, the client kept its schedule,
    the server was observed, and the run finished.

    The schedule rule is the lag p99 against `max_schedule_lag_p99_ms`, not the replay's own
    `client_degraded` flag (10 ms): a client that fell 10 ms behind is worth flagging in the report but
    does not make a run's seconds-long latencies untrustworthy enough to block it."""
    _require_columns(df, RUN_COLUMNS, "runs")
    df = df.assign(
        completion_rate=[
            None if (ok + failed) == 0 else ok / (ok + failed)
            for ok, failed in zip(df["completed_requests"], df["failed_requests"])
        ]
    ).astype({"completion_rate": "float64", "schedule_lag_p99_ms": "float64"})
    gxe = _expectations()

    rules = [
        (
            f"completion_rate >= {min_completion_rate:g}",
            gxe.ExpectColumnValuesToBeBetween(column="completion_rate", min_value=min_completion_rate),
        ),
        ("some request completed", gxe.ExpectColumnValuesToBeBetween(column="completed_requests", min_value=1)),
        (
            f"schedule_lag_p99_ms <= {max_schedule_lag_p99_ms:g}",
            gxe.ExpectColumnValuesToBeBetween(column="schedule_lag_p99_ms", max_value=max_schedule_lag_p99_ms),
        ),
        ("server samples present", gxe.ExpectColumnValuesToBeBetween(column="server_sample_count", min_value=1)),
        ("run finished (not partial)", gxe.ExpectColumnValuesToBeInSet(column="partial", value_set=[False])),
    ]
    return _validate("runs", df, rules)


def check_fleet(df: pd.DataFrame) -> QualityResult:
    """run_summary rows of one week and scenario: fails on each run whose fleet lost a worker or its router for part
    of the measured window (run_summary.degraded, warehouse/marts/fleet_health.py).

    Each failing run shows up in the examples as "<run_id>: <degraded_reason>", so the check's metadata names the
    worker, when it stopped answering and for how long. Runs that were not probed (degraded null) pass: nothing
    says they lost anything."""
    if df.empty and "degraded" not in df.columns:
        return _validate("fleet", pd.DataFrame({"lost": pd.Series([], dtype="object")}), _fleet_rules())
    _require_columns(df, ("run_id", "degraded", "degraded_reason"), "fleet")
    lost = [
        f"{run_id}: {reason}" if pd.notna(degraded) and bool(degraded) else None
        for run_id, degraded, reason in zip(df["run_id"], df["degraded"], df["degraded_reason"])
    ]
    return _validate("fleet", pd.DataFrame({"lost": pd.Series(lost, dtype="object")}), _fleet_rules())


def _fleet_rules() -> list:
    gxe = _expectations()

    return [
        (
            "no worker or router of the fleet stopped answering inside the measured window",
            gxe.ExpectColumnValuesToBeNull(column="lost"),
        )
    ]


def _require_columns(df: pd.DataFrame, columns: tuple[str, ...], what: str) -> None:
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"{what} quality check: expected a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{what} quality check: the DataFrame is missing columns {missing}")


def _validate(suite_name: str, df: pd.DataFrame, rules: list) -> QualityResult:
    context = _ephemeral_context()
    batch = (
        context.data_sources.add_pandas(f"{suite_name}_source")
        .add_dataframe_asset(suite_name)
        .add_batch_definition_whole_dataframe("whole")
        .get_batch(batch_parameters={"dataframe": df})
    )
    suite = _great_expectations().ExpectationSuite(name=suite_name)
    for rule, expectation in rules:
        expectation.meta = {"rule": rule}
        suite.add_expectation(expectation)
    suite = context.suites.add(suite)
    validation = batch.validate(
        suite, result_format={"result_format": "SUMMARY", "partial_unexpected_count": EXAMPLES_KEPT}
    )
    failures = tuple(_failure(r) for r in validation.results if not r.success)
    # Report failures in the suite's order so metadata reads the same on every run.
    order = {rule: i for i, (rule, _) in enumerate(rules)}
    failures = tuple(sorted(failures, key=lambda f: order.get(f.rule, len(order))))
    return QualityResult(suite_name, bool(validation.success), len(validation.results), failures)


def _ephemeral_context():
    gx = _great_expectations()
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    return context


@cache
def _great_expectations() -> ModuleType:
    """GX, imported on first use: it takes seconds, and only the quality checks need it. Its top imports scipy.stats
    and altair for its distribution expectations (KL divergence, KS tests), which no suite here uses: they are
    deferred to their first use, which halves GX's import (2.3-2.5 -> 1.3 s of CPU in a run worker, 2026-12-08)."""
    # Set here, not at import: importing this module must not change the process environment.
    os.environ["GX_ANALYTICS_ENABLED"] = "False"
    with deferred_imports(*GX_DEFERRED):
        import great_expectations
    return great_expectations


def _expectations() -> ModuleType:
    _great_expectations()
    import great_expectations.expectations as gxe

    return gxe


def _failure(result) -> ExpectationFailure:
    config = result.expectation_config
    kwargs = config.kwargs
    columns = tuple(kwargs[k] for k in ("column", "column_A", "column_B") if k in kwargs)
    error = None
    if result.exception_info and result.exception_info.get("raised_exception"):
        error = str(result.exception_info.get("exception_message"))
    examples = tuple(_plain(v) for v in (result.result or {}).get("partial_unexpected_list", [])[:EXAMPLES_KEPT])
    count = (result.result or {}).get("unexpected_count")
    return ExpectationFailure(
        rule=(config.meta or {}).get("rule", config.type),
        expectation=config.type,
        columns=columns,
        unexpected_count=None if count is None else int(count),
        examples=examples,
        error=error,
    )


def _plain(value):
    """JSON-friendly Python scalars (Dagster metadata), from numpy scalars and pairs of them."""
    if isinstance(value, (tuple, list)):
        return tuple(_plain(v) for v in value)
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value
