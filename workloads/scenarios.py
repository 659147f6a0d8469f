"""Scenarios: which trace window to replay, how fast, against which endpoint, under which SLO.

Loaded from `workloads/scenarios.yaml` through a declared model (workloads/config_file.py: unknown
keys, wrong types and missing keys fail with the file, the key path and the reason), then immutable.
A scenario name becomes a Dagster partition key and a lake folder (`scenario=<name>`), so it is
restricted to SCENARIO_NAME. Trace files are resolved here but read later (`reader_registry.read_trace`
names a missing file).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from workloads.config_file import (
    ConfigFileError,
    ConfigModel,
    NonEmptyStr,
    SafeName,
    config_error,
    parse_config,
    read_yaml,
)
from workloads.reader_registry import parse_trace_format
from workloads.workload import TraceFormat

# A partition key, a folder name and a Kubernetes label value: lower case, digits and dashes.
SCENARIO_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


class ScenarioError(ConfigFileError):
    """An invalid scenarios file: the message names the file, the key path and the reason."""


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
    budget_usd_per_request: float | None = None  # what a request may cost (USD): diagnoses judge against it


def default_scenarios_path() -> Path:
    return Path(__file__).parent / "scenarios.yaml"


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
    ttft_ms: float = Field(gt=0)
    tpot_ms: float = Field(gt=0)


class _ScenarioEntry(ConfigModel):
    name: Annotated[str, AfterValidator(_scenario_name)]
    description: str | None = None
    trace: NonEmptyStr
    format: Annotated[str, AfterValidator(_trace_format)]
    start_s: float = Field(ge=0)
    duration_s: float | None = Field(gt=0)  # required; null: to the end of the trace
    speedup: float = Field(gt=0)
    endpoint: SafeName
    slo: _Slo
    cold_start: bool = False
    shared_prefix_tokens: int = Field(0, ge=0)
    backend: Literal["sglang", "openai-chat", "openai-completions"] = "sglang"
    shards: int = Field(1, ge=1)
    warmup_s: float = Field(0.0, ge=0)
    max_concurrency: int | None = Field(None, ge=1)
    require_reasoning: bool = False
    reasoning_ratio: float = Field(0.0, ge=0)
    target_rps: float | None = Field(None, gt=0)
    budget_usd_per_request: float | None = Field(None, gt=0)

    def to_scenario(self, repo_root: Path) -> Scenario:
        # Strict float fields already hold floats (an int in the YAML is converted).
        trace = Path(self.trace)
        return Scenario(
            name=self.name,
            description=self.description or "",
            trace=trace if trace.is_absolute() else repo_root / trace,
            trace_format=parse_trace_format(self.format),
            start_s=self.start_s,
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
            budget_usd_per_request=self.budget_usd_per_request,
        )


class _ScenariosFile(ConfigModel):
    scenarios: list[_ScenarioEntry] = Field(min_length=1)


def load_scenarios(path: Path, repo_root: Path, endpoint_names: Collection[str] | None = None) -> dict[str, Scenario]:
    """Scenarios by name, in file order. Raises ScenarioError naming the file, the key path and the reason.

    With `endpoint_names` (the names in endpoints.yaml), a scenario naming another endpoint is refused too.
    """
    path = Path(path)
    parsed = parse_config(_ScenariosFile, read_yaml(path, ScenarioError), path, ScenarioError, "scenario")
    scenarios: dict[str, Scenario] = {}
    first_index: dict[str, int] = {}
    for index, entry in enumerate(parsed.scenarios):
        if entry.name in scenarios:
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
        scenarios[entry.name] = entry.to_scenario(Path(repo_root))
        first_index[entry.name] = index
    return scenarios
