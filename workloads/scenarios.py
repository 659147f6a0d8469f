"""Scenarios: which trace window to replay, how fast, against which endpoint, under which SLO.

Loaded from `workloads/scenarios.yaml`, validated once, then immutable. A scenario name becomes a Dagster
partition key and a lake folder (`scenario=<name>`), so it is restricted to [a-z0-9-]+.
Trace files are resolved here but read later (`reader_registry.read_trace` names a missing file).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from workloads.reader_registry import known_formats, parse_trace_format
from workloads.workload import TraceFormat

_NAME = re.compile(r"^[a-z0-9-]+$")
_REQUIRED = ("name", "trace", "format", "start_s", "duration_s", "speedup", "endpoint", "slo")


class ScenarioError(ValueError):
    """An invalid scenarios file: the message names the file, the scenario and the field."""


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


def default_scenarios_path() -> Path:
    return Path(__file__).parent / "scenarios.yaml"


def default_endpoints_path() -> Path:
    return Path(__file__).parent / "endpoints.yaml"


def _number(raw: dict, key: str, where: str, *, positive: bool, allow_none: bool = False) -> float | None:
    value = raw[key]
    if value is None and allow_none:
        return None
    # bool is an int to Python; `speedup: yes` is a typo, not 1.0.
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ScenarioError(f"{where}: {key} must be a number, got {value!r}")
    if positive and value <= 0:
        raise ScenarioError(f"{where}: {key} must be > 0, got {value!r}")
    if not positive and value < 0:
        raise ScenarioError(f"{where}: {key} must be >= 0, got {value!r}")
    return float(value)


def _scenario_from_dict(raw: object, where: str, repo_root: Path) -> Scenario:
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where}: expected a mapping of scenario fields, got {type(raw).__name__}")
    name = raw.get("name")
    if name is not None:
        where = f"{where} ({name})"
    missing = [key for key in _REQUIRED if key not in raw]
    if missing:
        raise ScenarioError(f"{where}: missing field(s) {', '.join(missing)}")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ScenarioError(
            f"{where}: name {name!r} must match [a-z0-9-]+ (it becomes a partition key and a folder name)"
        )
    for key in ("trace", "endpoint"):
        if not isinstance(raw[key], str) or not raw[key].strip():
            raise ScenarioError(f"{where}: {key} must be a non-empty string, got {raw[key]!r}")
    try:
        trace_format = parse_trace_format(str(raw["format"]))
    except ValueError:
        raise ScenarioError(
            f"{where}: unknown format {raw['format']!r}: known formats are {', '.join(known_formats())}"
        ) from None
    slo = raw["slo"]
    if not isinstance(slo, dict) or "ttft_ms" not in slo or "tpot_ms" not in slo:
        raise ScenarioError(f"{where}: slo must be a mapping with ttft_ms and tpot_ms, got {slo!r}")
    cold_start = raw.get("cold_start", False)
    if not isinstance(cold_start, bool):
        raise ScenarioError(f"{where}: cold_start must be true or false, got {cold_start!r}")
    shared_prefix_tokens = raw.get("shared_prefix_tokens", 0)
    if isinstance(shared_prefix_tokens, bool) or not isinstance(shared_prefix_tokens, int) or shared_prefix_tokens < 0:
        raise ScenarioError(f"{where}: shared_prefix_tokens must be a whole number >= 0, got {shared_prefix_tokens!r}")
    backend = raw.get("backend", "sglang")
    if backend not in ("sglang", "openai-chat", "openai-completions"):
        raise ScenarioError(f"{where}: backend must be sglang, openai-chat or openai-completions, got {backend!r}")
    shards = raw.get("shards", 1)
    max_concurrency = raw.get("max_concurrency")
    for key, value in (("shards", shards), ("max_concurrency", max_concurrency)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ScenarioError(f"{where}: {key} must be a whole number >= 1, got {value!r}")
    require_reasoning = raw.get("require_reasoning", False)
    if not isinstance(require_reasoning, bool):
        raise ScenarioError(f"{where}: require_reasoning must be true or false, got {require_reasoning!r}")
    trace = Path(raw["trace"])
    return Scenario(
        name=name,
        description=str(raw.get("description") or ""),
        trace=trace if trace.is_absolute() else (repo_root / trace),
        trace_format=trace_format,
        start_s=_number(raw, "start_s", where, positive=False),
        duration_s=_number(raw, "duration_s", where, positive=True, allow_none=True),
        speedup=_number(raw, "speedup", where, positive=True),
        endpoint=raw["endpoint"],
        slo_ttft_ms=_number(slo, "ttft_ms", f"{where} slo", positive=True),
        slo_tpot_ms=_number(slo, "tpot_ms", f"{where} slo", positive=True),
        cold_start=cold_start,
        shared_prefix_tokens=shared_prefix_tokens,
        backend=backend,
        shards=shards,
        warmup_s=_number(raw, "warmup_s", where, positive=False) if "warmup_s" in raw else 0.0,
        max_concurrency=max_concurrency,
        require_reasoning=require_reasoning,
        reasoning_ratio=_number(raw, "reasoning_ratio", where, positive=False) if "reasoning_ratio" in raw else 0.0,
    )


def load_scenarios(path: Path, repo_root: Path) -> dict[str, Scenario]:
    """Scenarios by name, in file order. Raises ScenarioError naming the file, the scenario and the problem."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read scenarios file: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{path}: invalid YAML: {exc}") from None
    entries = raw.get("scenarios") if isinstance(raw, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ScenarioError(f"{path}: expected a non-empty top-level 'scenarios:' list")
    scenarios: dict[str, Scenario] = {}
    for index, entry in enumerate(entries):
        scenario = _scenario_from_dict(entry, f"{path} scenarios[{index}]", Path(repo_root))
        if scenario.name in scenarios:
            raise ScenarioError(f"{path} scenarios[{index}]: duplicate scenario name {scenario.name!r}")
        scenarios[scenario.name] = scenario
    return scenarios
