"""Scenarios: which trace window to replay, how fast, against which endpoint, under which SLO.

Loaded from `workloads/scenarios.yaml` through a declared model (common/config_file.py: unknown
keys, wrong types and missing keys fail with the file, the key path and the reason), then immutable.
A scenario name becomes a Dagster partition key and a lake folder (`scenario=<name>`), so it is
restricted to SCENARIO_NAME. Trace files are resolved here but read later (`reader_registry.read_trace`
names a missing file).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Collection
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, ValidationError, model_validator

from common.config_file import (
    ConfigFileError,
    ConfigModel,
    NonEmptyStr,
    SafeName,
    config_error,
    config_problems,
    parse_config,
    read_yaml,
)
from workloads.prompts.response_format import StructuredOutput
from workloads.prompts.structured_output_config import StructuredOutputEntry, structured_output
from workloads.readers.reader_registry import parse_trace_format
from workloads.weekly_window import DEFAULT_ANCHOR_WEEK, WEEK_PLACEHOLDER, WeeklyWindow, week_window_start
from workloads.workload import TraceFormat

# A partition key, a folder name and a Kubernetes label value: lower case, digits and dashes.
# The variable naming the scenarios file the pipeline loads (its partitions are the scenarios' names), read where
# the code location loads: it must be set for the process that loads pipelines.definitions (`dagster dev`, the
# daemon's code server). Unset: workloads/scenarios.yaml.
SCENARIOS_ENV = "COSTBENCH_SCENARIOS"
SCENARIO_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


class ScenarioError(ConfigFileError):
    """An invalid scenarios file: the message names the file, the key path and the reason."""


# The range of every number a scenario may set: wide enough for any real deployment, narrow enough that a typo
# (1e30 shards, a speedup of 5e-324) is refused here rather than hanging or dividing by nothing later.
MAX_SLO_MS = 3_600_000.0  # an hour
MAX_TRACE_S = 10 * 365 * 86_400.0  # ten years of trace seconds
MIN_SPEEDUP, MAX_SPEEDUP = 1e-3, 1e4
MAX_PROMPT_TOKENS = 1_000_000
MAX_SHARDS = 1_024
MAX_REPEATS = 16
CANARY_REPEATS = 2  # a canary's runs per week unless its entry says: enough to see two runs differ
MAX_CONCURRENCY = 1_000_000
MAX_REASONING_RATIO = 1_000.0
MAX_TARGET_RPS = 1e7
# The widest expert-parallel decode worker a plan tries: an NVL72 rack's 72 GPUs; 2 is the narrowest EP there is.
MIN_EP_WIDTH, MAX_EP_WIDTH = 2, 72
MAX_USD_PER_REQUEST = 1_000.0
# A run whose client sent its requests later than this at p99 did not keep its open-loop schedule: its latencies
# hide load it never offered, and the weekly runs_quality check fails it (warehouse/quality.py).
DEFAULT_MAX_SCHEDULE_LAG_P99_MS = 100.0
MAX_SCHEDULE_LAG_P99_MS = 60_000.0
MAX_RAMP_STEPS = 32
MAX_RAMP_STEP_S = 3_600.0


@dataclass(frozen=True, slots=True)
class CapacityRamp:
    """The opt-in rate ramp of a real endpoint (replay/capacity_ramp.py): step k replays the window's requests at
    start_rps x step_factor^k for step_duration_s, until the share inside the SLO breaks or max_steps ran."""

    start_rps: float  # the first (reference) step's rate (requests/s)
    step_factor: float  # each step's rate over the last's (ratio > 1)
    max_steps: int  # steps at most (count)
    step_duration_s: float  # wall time each step's requests are spread over (s)


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    description: str
    trace: Path  # absolute: resolved against the repository root
    trace_format: TraceFormat
    start_s: float  # window start, seconds of the trace
    duration_s: float | None  # window length in trace seconds; None: to the end of the trace
    speedup: float  # replay at speedup × the trace's rate
    endpoint: str  # name of an endpoint in endpoints.yaml
    slo_ttft_ms: float
    slo_tpot_ms: float
    cold_start: bool = False  # flush the prefix cache before the replay (else the server starts as it is)
    shared_prefix_tokens: int = 0  # a system prompt of this many tokens in front of every request
    backend: str = "sglang"  # replay client: sglang (native /generate) | openai-chat | openai-completions
    shards: int = 1  # replay processes sharing one t0 (Dagster steps, pods on Kubernetes)
    warmup_s: float = 0.0  # requests due in the first warmup_s seconds are flagged and excluded
    max_concurrency: int | None = None  # client-side cap on requests in flight
    require_reasoning: bool = False  # ask the server to count reasoning tokens (DeepSeek-R1)
    reasoning_ratio: float = 0.0  # reasoning tokens per answer token, for traces that did not capture them
    target_rps: float | None = None  # load the fleet must carry (requests/s): run_summary sizes the fleet
    plan_disaggregated: bool = False  # the fleet plan also tries xP+yD shapes of the endpoint's flags
    # ... and xP+yD shapes whose decode workers are each one wide expert-parallel server over this many GPUs
    plan_ep_widths: tuple[int, ...] = ()
    budget_usd_per_request: float | None = None  # what a request may cost (USD): diagnoses judge against it
    # A share of the requests asks for a response format (workloads/prompts/response_format.py); None: free-form.
    structured_output: StructuredOutput | None = None
    # Where each week's traffic comes from (workloads/weekly_traffic.py): `trace` may hold {week}; a
    # weekly_window moves the window on each week (start_s is then week 0's start).
    weekly_window: WeeklyWindow | None = None
    traffic_share: float = 1.0  # the session-sharded share of the trace one replica carries (ratio 0-1)
    role: str = "live"  # live: the traffic, carries the cost trend | canary: a fixed reference, judged for regressions
    # Replays of the window per week, one after another (each a run of its own): the week's interval takes in how
    # much runs differ (docs/pipeline.md, "Run-to-run variation"). Canaries default to 2, live scenarios to 1.
    repeats: int = 1
    # On a twin: each run draws its own node, clocks and step jitter (--sim-run-seed; endpoints/sim/cost/
    # run_variation.py). On by default for canaries, so a canary is not a deterministic world; no effect elsewhere.
    twin_run_variation: bool = False
    # A real endpoint's capacity measured by a rate ramp after the replay (GPU time: docs/endpoints.md); None: modelled
    # from the shadow twin. No effect on a twin endpoint, which is swept in virtual time.
    capacity_ramp: CapacityRamp | None = None
    # The schedule lag p99 the weekly runs_quality check allows this scenario's runs (ms): a replay client on a
    # host it shares with other work may be granted more than the default.
    max_schedule_lag_p99_ms: float = DEFAULT_MAX_SCHEDULE_LAG_P99_MS

    def window_for(self, week_start: date, trace_end_s: float) -> tuple[float, float | None]:
        """(start_s, duration_s) of the trace window this scenario replays in the week of `week_start`."""
        if self.weekly_window is None or self.duration_s is None:
            return self.start_s, self.duration_s
        return week_window_start(self.weekly_window, self.duration_s, week_start, trace_end_s), self.duration_s


def default_scenarios_path() -> Path:
    return Path(__file__).parent / "scenarios.yaml"


def configured_scenarios_path() -> Path:
    """The scenarios file the pipeline and the commands read: $COSTBENCH_SCENARIOS, else the bundled one."""
    return Path(os.environ.get(SCENARIOS_ENV) or default_scenarios_path())


def default_endpoints_path() -> Path:
    return Path(__file__).parent / "endpoints.yaml"


def _scenario_name(value: str) -> str:
    if not SCENARIO_NAME.match(value):
        raise ValueError(
            f"must match {SCENARIO_NAME.pattern} (it becomes a partition key and a folder name), got {value!r}"
        )
    return value


def _trace_format(value: str) -> str:
    parse_trace_format(value)  # ValueError naming the known formats
    return value


class _Slo(ConfigModel):
    ttft_ms: float = Field(gt=0, le=MAX_SLO_MS)
    tpot_ms: float = Field(gt=0, le=MAX_SLO_MS)


class _CapacityRamp(ConfigModel):
    start_rps: float = Field(gt=0, le=MAX_TARGET_RPS)
    step_factor: float = Field(gt=1, le=16)
    max_steps: int = Field(ge=2, le=MAX_RAMP_STEPS)
    step_duration_s: float = Field(gt=0, le=MAX_RAMP_STEP_S)


class _WeeklyWindow(ConfigModel):
    start_s: float = Field(ge=0, le=MAX_TRACE_S)
    step_s: float = Field(gt=0, le=MAX_TRACE_S)
    anchor_week: date = DEFAULT_ANCHOR_WEEK

    @model_validator(mode="after")
    def _monday(self) -> "_WeeklyWindow":
        if self.anchor_week.weekday() != 0:
            raise ValueError(f"anchor_week must be a Monday (weeks start on Monday), got {self.anchor_week}")
        return self


def _trace_pattern(value: str) -> str:
    if "{" in value.replace(WEEK_PLACEHOLDER, "") or "}" in value.replace(WEEK_PLACEHOLDER, ""):
        raise ValueError(f"the only placeholder a trace path may hold is {WEEK_PLACEHOLDER}, got {value!r}")
    return value


class _ScenarioEntry(ConfigModel):
    name: Annotated[str, AfterValidator(_scenario_name)]
    description: str | None = None
    trace: Annotated[NonEmptyStr, AfterValidator(_trace_pattern)]
    format: Annotated[str, AfterValidator(_trace_format)]
    start_s: float | None = Field(None, ge=0, le=MAX_TRACE_S)  # required unless weekly_window names the weeks' windows
    weekly_window: _WeeklyWindow | None = None
    traffic_share: float = Field(1.0, gt=0, le=1)
    role: Literal["live", "canary"] = "live"
    duration_s: float | None = Field(gt=0, le=MAX_TRACE_S)  # required; null: to the end of the trace
    speedup: float = Field(ge=MIN_SPEEDUP, le=MAX_SPEEDUP)
    endpoint: SafeName
    slo: _Slo
    cold_start: bool = False
    shared_prefix_tokens: int = Field(0, ge=0, le=MAX_PROMPT_TOKENS)
    backend: Literal["sglang", "openai-chat", "openai-completions"] = "sglang"
    shards: int = Field(1, ge=1, le=MAX_SHARDS)
    warmup_s: float = Field(0.0, ge=0, le=MAX_TRACE_S)
    max_concurrency: int | None = Field(None, ge=1, le=MAX_CONCURRENCY)
    require_reasoning: bool = False
    reasoning_ratio: float = Field(0.0, ge=0, le=MAX_REASONING_RATIO)
    target_rps: float | None = Field(None, gt=0, le=MAX_TARGET_RPS)
    plan_disaggregated: bool = False
    plan_ep_widths: list[Annotated[int, Field(ge=MIN_EP_WIDTH, le=MAX_EP_WIDTH)]] = []
    budget_usd_per_request: float | None = Field(None, gt=0, le=MAX_USD_PER_REQUEST)
    structured_output: StructuredOutputEntry | None = None
    repeats: int | None = Field(None, ge=1, le=MAX_REPEATS)  # None: 2 for a canary, 1 for live traffic
    run_variation: bool | None = None  # None: on for a canary
    capacity_ramp: _CapacityRamp | None = None
    max_schedule_lag_p99_ms: float = Field(DEFAULT_MAX_SCHEDULE_LAG_P99_MS, gt=0, le=MAX_SCHEDULE_LAG_P99_MS)

    @model_validator(mode="after")
    def _one_window_rule(self) -> "_ScenarioEntry":
        if self.weekly_window is not None and self.start_s is not None:
            raise ValueError("give start_s or weekly_window, not both (weekly_window.start_s is week 0's start)")
        if self.weekly_window is None and self.start_s is None:
            raise ValueError("start_s is missing: give start_s (the same window every week) or weekly_window")
        if self.weekly_window is not None and self.duration_s is None:
            raise ValueError("weekly_window needs a duration_s (a window to the end of the trace cannot move)")
        if self.role == "canary" and (self.weekly_window is not None or WEEK_PLACEHOLDER in self.trace):
            raise ValueError(
                "a canary replays the same window every week: it takes start_s, not weekly_window or a {week} trace"
            )
        if self.capacity_ramp is not None and self.shards != 1:
            raise ValueError("capacity_ramp needs shards: 1 (the ramp runs in the one replay step, after its replay)")
        return self

    def to_scenario(self, repo_root: Path) -> Scenario:
        # Strict float fields already hold floats (an int in the YAML is converted).
        trace = Path(self.trace)
        return Scenario(
            name=self.name,
            description=self.description or "",
            trace=trace if trace.is_absolute() else repo_root / trace,
            trace_format=parse_trace_format(self.format),
            start_s=self.weekly_window.start_s if self.weekly_window is not None else float(self.start_s or 0.0),
            duration_s=self.duration_s,
            speedup=self.speedup,
            endpoint=self.endpoint,
            slo_ttft_ms=self.slo.ttft_ms,
            slo_tpot_ms=self.slo.tpot_ms,
            cold_start=self.cold_start,
            shared_prefix_tokens=self.shared_prefix_tokens,
            backend=self.backend,
            shards=self.shards,
            warmup_s=self.warmup_s,
            max_concurrency=self.max_concurrency,
            require_reasoning=self.require_reasoning,
            reasoning_ratio=self.reasoning_ratio,
            target_rps=self.target_rps,
            plan_disaggregated=self.plan_disaggregated,
            plan_ep_widths=tuple(sorted(set(self.plan_ep_widths))),
            budget_usd_per_request=self.budget_usd_per_request,
            weekly_window=(
                WeeklyWindow(self.weekly_window.start_s, self.weekly_window.step_s, self.weekly_window.anchor_week)
                if self.weekly_window is not None
                else None
            ),
            traffic_share=self.traffic_share,
            role=self.role,
            repeats=self.repeats if self.repeats is not None else CANARY_REPEATS if self.role == "canary" else 1,
            twin_run_variation=self.run_variation if self.run_variation is not None else self.role == "canary",
            capacity_ramp=None if self.capacity_ramp is None else CapacityRamp(**self.capacity_ramp.model_dump()),
            max_schedule_lag_p99_ms=self.max_schedule_lag_p99_ms,
        )


class _ScenariosFile(ConfigModel):
    scenarios: list[_ScenarioEntry] = Field(min_length=1)


@dataclass(frozen=True, slots=True)
class ScenarioFile:
    """A scenarios file as the pipeline loads it: the scenarios that parse, and the ones that do not set aside by
    name, so one typo stops its own scenario, not every other scenario's schedule and every sensor."""

    scenarios: dict[str, Scenario]  # by name, in file order
    broken: dict[str, str]  # a scenario that does not parse: its name (else scenarios[i]) -> the problem's lines


def load_scenarios(path: Path, repo_root: Path, endpoint_names: Collection[str] | None = None) -> dict[str, Scenario]:
    """Scenarios by name, in file order. Raises ScenarioError naming the file, the key path and the reason.

    With `endpoint_names` (the names in endpoints.yaml), a scenario naming another endpoint is refused too.
    """
    loaded = load_scenario_file(path, repo_root, endpoint_names)
    if loaded.broken:
        raise ScenarioError("\n".join(loaded.broken.values()))
    return loaded.scenarios


def load_scenario_file(path: Path, repo_root: Path, endpoint_names: Collection[str] | None = None) -> ScenarioFile:
    """The file's scenarios, each bad entry set aside with its problems (load_scenarios' lines). Raises ScenarioError
    only for what no entry can be kept from: a file that is not YAML, or has no scenarios list."""
    path = Path(path)
    raw = read_yaml(path, ScenarioError)
    entries: list[_ScenarioEntry | None]
    bad: dict[int, list[str]] = {}
    try:
        entries = list(_ScenariosFile.model_validate(raw if raw is not None else {}).scenarios)
    except ValidationError as exc:
        problems = config_problems(_ScenariosFile, exc, raw, path, "scenario")
        if any(len(loc) < 2 or loc[0] != "scenarios" or not isinstance(loc[1], int) for loc, _ in problems):
            parse_config(_ScenariosFile, raw, path, ScenarioError, "scenario")  # the file itself: raises, named
        for loc, line in problems:
            bad.setdefault(int(loc[1]), []).append(line)
        assert isinstance(raw, dict)
        entries = [None if i in bad else _ScenarioEntry.model_validate(e) for i, e in enumerate(raw["scenarios"])]
    scenarios: dict[str, Scenario] = {}
    first_index: dict[str, int] = {}
    broken: dict[str, str] = {}
    for index, entry in enumerate(entries):
        if entry is None:
            broken[_label(raw, index)] = "\n".join(bad[index])
            continue
        try:
            scenarios[entry.name] = _checked(entry, index, path, Path(repo_root), endpoint_names, first_index)
            first_index[entry.name] = index
        except ScenarioError as exc:
            broken[_label(raw, index)] = str(exc)
    return ScenarioFile(scenarios, broken)


def _label(raw: object, index: int) -> str:
    """An entry's name where it has a usable one, else its place in the file."""
    entries = raw.get("scenarios") if isinstance(raw, dict) else None
    entry = entries[index] if isinstance(entries, list) and index < len(entries) else None
    name = entry.get("name") if isinstance(entry, dict) else None
    return name if isinstance(name, str) and SCENARIO_NAME.match(name) else f"scenarios[{index}]"


def _checked(
    entry: _ScenarioEntry,
    index: int,
    path: Path,
    repo_root: Path,
    endpoint_names: Collection[str] | None,
    first_index: dict[str, int],
) -> Scenario:
    """One parsed entry as a Scenario, after the checks that need the rest of the file or other files."""
    if entry.name in first_index:
        raise config_error(
            ScenarioError, path, ("scenarios", index, "name"),
            f"duplicate scenario name {entry.name!r} (first at scenarios[{first_index[entry.name]}])",
        )  # fmt: skip
    if endpoint_names is not None and entry.endpoint not in endpoint_names:
        raise config_error(
            ScenarioError, path, ("scenarios", index, "endpoint"),
            f"no endpoint named {entry.endpoint!r} (endpoints: {', '.join(sorted(endpoint_names))})",
            f"scenario {entry.name!r}",
        )  # fmt: skip
    scenario = entry.to_scenario(repo_root)
    if entry.structured_output is not None:  # checked here, where the file's lines are known
        where = ("scenarios", index, "structured_output")
        checked = structured_output(entry.structured_output, path, where, repo_root, ScenarioError, entry.name)
        scenario = dataclasses.replace(scenario, structured_output=checked)
    return scenario
