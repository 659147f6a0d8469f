"""The marts' rows as typed records, one per mart, each field the mart's column of the same name and order.

The columns are defined in the dbt models' YAML (warehouse/dbt/models/marts/_marts.yml: type and what each
holds); these records restate only their names, order, Python types and whether they may be null, and
tests/warehouse/test_warehouse_mart_drift.py fails when a record and its mart's columns disagree. The readers
(warehouse/marts/mart_readers.py) return them; `as_dict` and `as_frame` are for the boundaries that want a
mapping (Dagster metadata) or a DataFrame (the Great Expectations suites, the report).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import date
from typing import TYPE_CHECKING

from endpoints.capacity.deployment import shape_label, shape_workers

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True, slots=True)
class RunSummaryRow:
    """One replay (dbt model run_summary)."""

    run_id: str
    week_start: date
    scenario: str
    endpoint: str
    backend: str
    model: str
    config_fingerprint: str | None
    revision_note: str | None
    gpu_type: str
    gpu_count: int
    usd_per_gpu_hour: float
    list_usd_per_gpu_hour: float | None
    window_s: float | None
    run_cost_usd: float | None
    hours_per_week: float
    week_spend_usd: float
    completed_requests: int
    failed_requests: int
    cancelled_requests: int
    output_tokens: int | None
    hit_rate_prompt_tokens: int | None
    hit_rate_cached_tokens: int | None
    realised_cost_per_request_usd: float | None
    cost_per_mtok_output_usd: float | None
    api_price_name: str | None
    api_cost_usd: float | None
    api_cost_per_request_usd: float | None
    self_host_to_api_cost_ratio: float | None
    break_even_utilisation: float | None
    prefix_cache_hit_rate: float | None
    server_prefix_cache_hit_rate: float | None
    batch_occupancy: float | None
    batch_occupancy_basis: str | None
    running_cap_share: float | None
    running_requests_at_slo: float | None
    kv_usage_mean: float | None
    kv_usage_max: float | None
    retractions: int | None
    eager_decode_share: float | None
    spec_accept_length: float | None
    prefill_token_weight: float | None
    gpu_utilisation_pct: float | None
    sm_active_pct: float | None
    dram_active_pct: float | None
    gpu_metrics_source: str | None
    server_sample_count: int
    gpu_sample_count: int
    p50_ttft_ms: float | None
    p90_ttft_ms: float | None
    p95_ttft_ms: float | None
    p99_ttft_ms: float | None
    p50_ttfa_ms: float | None
    p90_ttfa_ms: float | None
    p95_ttfa_ms: float | None
    p99_ttfa_ms: float | None
    p50_itl_ms: float | None
    p90_itl_ms: float | None
    p95_itl_ms: float | None
    p99_itl_ms: float | None
    p50_tpot_ms: float | None
    p90_tpot_ms: float | None
    p95_tpot_ms: float | None
    p99_tpot_ms: float | None
    p50_e2e_ms: float | None
    p90_e2e_ms: float | None
    p95_e2e_ms: float | None
    p99_e2e_ms: float | None
    p95_e2e_from_schedule_ms: float | None
    p95_queue_share: float | None
    queue_share_source: str | None
    reasoning_token_share: float | None
    slo_ttft_ms: float | None
    slo_tpot_ms: float | None
    good_requests: int | None
    goodput: float | None
    goodput_rps: float | None
    sustained_output_tokens_per_s: float | None
    target_rps: float | None
    replicas_for_target: float | None
    replicas_for_target_source: str | None
    fleet_plan_policy: str | None
    fleet_usd_per_hour: float | None
    budget_usd_per_request: float | None
    prefix_reuse_share: float | None
    structured_requests: int | None
    constrained_requests: int | None
    valid_answers: int | None
    valid_answer_rate: float | None
    usd_per_valid_request: float | None
    retries: float | None
    tpot_constrained_ms: float | None
    tpot_unconstrained_ms: float | None
    min_valid_rate: float | None
    role: str | None
    traffic_share: float | None
    price_book: str | None
    capacity_rps_at_slo: float | None
    capacity_source: str | None
    capacity_ramp_gpu_minutes: float | None
    efficiency_cost_per_request_usd: float | None
    load_share_of_capacity: float | None
    load_state: str | None
    idle_cost_per_request_usd: float | None
    load_note: str | None
    break_even_rps: float | None
    replicas: int | None
    router_policy: str | None
    router_args_json: str | None
    single_replica_hit_rate: float | None
    fleet_model_hit_rate: float | None
    workers_served: int | None
    max_worker_share: float | None
    degraded: bool | None
    degraded_reason: str | None
    schedule_lag_p99_ms: float | None
    client_degraded: bool
    partial: bool
    shadow_output_tokens_per_s_ratio: float | None
    shadow_p50_ttft_ratio: float | None
    shadow_p50_tpot_ratio: float | None


@dataclass(frozen=True, slots=True)
class WeeklyTrendRow:
    """One week x scenario x endpoint x backend x configuration fingerprint (dbt model weekly_trends_undrifted)."""

    week_start: date
    scenario: str
    endpoint: str
    backend: str
    config_fingerprint: str | None
    role: str | None
    config_changed: bool
    revision_note: str | None
    runs: int
    completed_requests: int
    failed_requests: int
    efficiency_cost_per_request_usd: float | None
    realised_cost_per_request_usd: float | None
    idle_cost_per_request_usd: float | None
    load_state: str | None
    load_share_of_capacity: float | None
    capacity_rps_at_slo: float | None
    capacity_source: str | None
    replay_cost_usd: float | None
    week_spend_usd: float | None
    cost_per_mtok_output_usd: float | None
    api_cost_per_request_usd: float | None
    p50_ttft_ms: float | None
    p95_ttft_ms: float | None
    p50_e2e_ms: float | None
    p95_e2e_ms: float | None
    prefix_cache_hit_rate: float | None
    goodput: float | None
    sustained_output_tokens_per_s: float | None
    structured_requests: int | None
    constrained_requests: int | None
    valid_answers: int | None
    valid_answer_rate: float | None
    usd_per_valid_request: float | None
    retries: float | None
    tpot_constrained_ms: float | None
    tpot_unconstrained_ms: float | None
    min_valid_rate: float | None
    prev_week_start: date | None
    efficiency_cost_wow_change_pct: float | None
    realised_cost_wow_change_pct: float | None
    p95_ttft_wow_change_pct: float | None
    hit_rate_wow_change_pts: float | None
    baseline_weeks: int
    baseline_source: str | None
    baseline_efficiency_cost_per_request_usd: float | None
    baseline_realised_cost_per_request_usd: float | None
    baseline_p95_ttft_ms: float | None
    baseline_prefix_cache_hit_rate: float | None
    efficiency_cost_change_pct: float | None
    realised_cost_change_pct: float | None
    p95_ttft_change_pct: float | None
    hit_rate_change_pts: float | None
    efficiency_cost_low_usd: float | None
    efficiency_cost_high_usd: float | None
    realised_cost_low_usd: float | None
    realised_cost_high_usd: float | None
    hit_rate_low: float | None
    hit_rate_high: float | None
    p95_ttft_low_ms: float | None
    p95_ttft_high_ms: float | None
    regression_verdict: str
    regression_reasons: str | None
    regressed_metrics: str | None
    drift_start_week: date | None
    drift_metrics: str | None
    cost_threshold_pct: float | None
    p95_ttft_threshold_pct: float | None
    hit_rate_threshold_pts: float | None
    degraded_runs: int
    caveats: str | None


@dataclass(frozen=True, slots=True)
class CostAttributionRow:
    """Why the realised cost per request moved, for one weekly_trends row (dbt model cost_attribution)."""

    week_start: date
    scenario: str
    endpoint: str
    backend: str
    config_fingerprint: str | None
    role: str | None
    baseline_source: str | None
    baseline_weeks: int
    baseline_median_weeks: str | None
    realised_cost_per_request_usd: float | None
    baseline_realised_cost_per_request_usd: float | None
    change_usd: float | None
    price_usd: float | None
    traffic_usd: float | None
    traffic_volume_usd: float | None
    traffic_mix_usd: float | None
    traffic_prefix_reuse_usd: float | None
    runtime_usd: float | None
    prefix_cache_usd: float | None
    batching_usd: float | None
    speculative_decoding_usd: float | None
    routing_usd: float | None
    structured_output_usd: float | None
    unattributed_usd: float | None
    capacity_known: bool | None
    usd_per_gpu_hour: float | None
    input_tokens_per_request: float | None
    output_tokens_per_request: float | None
    reasoning_tokens_per_request: float | None
    prefill_token_weight: float | None
    replicas: int | None
    router_policy: str | None
    baseline_fleet: str | None
    routing_changed: bool | None
    runtime_changes: str | None
    revision_note: str | None


@dataclass(frozen=True, slots=True)
class DiagnosisRow:
    """The four-numbers verdict of one run (dbt model diagnoses)."""

    run_id: str
    week_start: date
    scenario: str
    endpoint: str
    verdict: str
    reasons: str
    prefix_cache_hit_rate: float | None
    prefix_reuse_share: float | None
    batch_occupancy: float | None
    p95_queue_share: float | None
    gpu_utilisation_pct: float | None
    eager_decode_share: float | None
    realised_cost_per_request_usd: float | None
    efficiency_cost_per_request_usd: float | None
    budget_usd_per_request: float | None
    levers: str
    replicas: int | None
    router_policy: str | None
    single_replica_hit_rate: float | None
    fleet_model_hit_rate: float | None


@dataclass(frozen=True, slots=True)
class RunWorkerRow:
    """How a run's completed requests spread over a fleet's workers, and each one's hit rate
    (dbt model run_workers)."""

    run_id: str
    week_start: date
    scenario: str
    worker: str | None
    completed_requests: int
    request_share: float
    hit_rate_prompt_tokens: int | None
    hit_rate_cached_tokens: int | None
    prefix_cache_hit_rate: float | None
    p95_ttft_ms: float | None


@dataclass(frozen=True, slots=True)
class TtftPartsRow:
    """Where a week's time to first token goes for one scenario: the mean of each part the server reported
    (dbt model ttft_parts); the parts and the unreported mean add up to mean_ttft_ms."""

    week_start: date
    scenario: str
    role: str | None
    completed_requests: int
    reporting_requests: int
    mean_ttft_ms: float
    mean_ttft_prealloc_ms: float | None
    mean_ttft_bootstrap_ms: float | None
    mean_ttft_queue_ms: float | None
    mean_ttft_prefill_ms: float | None
    mean_ttft_kv_transfer_ms: float | None
    mean_ttft_decode_wait_ms: float | None
    mean_ttft_unreported_ms: float


@dataclass(frozen=True, slots=True)
class TwinErrorBand:
    """The twin's validation error of one computed week (warehouse/sql/twin_error_band.sql): what a modelled answer
    (a fleet plan, a capacity) should be read with."""

    week_start: date  # the week the twin_calibration asset computed the figures for
    figures: int  # counted validation figures (throughput, mean TTFT, mean TPOT of points not fitted on)
    median_error_factor: float  # exp(median |ln ratio|), as the twin_calibration_target check has it
    min_ratio: float  # the lowest twin / published
    max_ratio: float  # the highest
    disaggregated: bool = False  # over disaggregated deployments' points (else single servers')

    def text(self) -> str:
        kind = " of disaggregated fleets" if self.disaggregated else " of single servers"
        return (
            f"the twin's validation on {self.figures} published figures{kind} (computed for the week of "
            f"{self.week_start}): median error factor {self.median_error_factor:.2f}, twin / published "
            f"{self.min_ratio:.2f} to {self.max_ratio:.2f}"
        )


@dataclass(frozen=True, slots=True)
class FleetPlanRow:
    """One shape a run's fleet plan tried, at one price (dbt model fleet_plans)."""

    run_id: str
    week_start: date
    scenario: str
    endpoint: str
    gpu_type: str
    target_rps: float
    slo_ttft_ms: float | None
    slo_tpot_ms: float | None
    replicas: int
    prefill_workers: int
    decode_workers: int
    decode_ep_size: int
    router_policy: str
    gpus: int
    holds_target: bool
    good_share: float
    p95_ttft_ms: float
    hit_rate: float
    max_worker_share: float
    capacity_rps_at_slo: float | None
    chosen: bool
    price_book: str
    run_price: bool
    usd_per_gpu_hour: float
    fleet_usd_per_hour: float
    usd_per_request_at_target: float
    usd_per_request_at_slo: float | None
    api_cost_per_request_usd: float | None
    break_even_rps: float | None

    @property
    def label(self) -> str:
        return shape_label(
            self.replicas, self.router_policy, self.prefill_workers, self.decode_workers, self.decode_ep_size
        )

    @property
    def workers(self) -> str:
        return shape_workers(self.replicas, self.prefill_workers, self.decode_workers, self.decode_ep_size)


@dataclass(frozen=True, slots=True)
class LakeQuarantineRow:
    """One lake file a refresh took out of the views (warehouse/parquet/lake_audit.py)."""

    table_name: str
    week_start: date | None
    scenario: str | None
    source_path: str
    quarantined_path: str
    reason: str
    quarantined_wall_s: float
    replaced: bool


@dataclass(frozen=True, slots=True)
class LakeMissingRow:
    """A partition the lake's manifest says was written and a refresh did not find (parquet/lake_audit.py)."""

    table_name: str
    week_start: date
    scenario: str
    path: str
    written_wall_s: float
    written_rows: int | None
    written_size_bytes: int | None
    written_sha256: str | None
    reason: str


MartRow = (
    RunSummaryRow
    | RunWorkerRow
    | TtftPartsRow
    | FleetPlanRow
    | WeeklyTrendRow
    | CostAttributionRow
    | DiagnosisRow
    | LakeQuarantineRow
    | LakeMissingRow
)
# Each mart table and the record of its rows.
MART_ROWS: dict[str, type[MartRow]] = {
    "run_summary": RunSummaryRow,
    "run_workers": RunWorkerRow,
    "ttft_parts": TtftPartsRow,
    "fleet_plans": FleetPlanRow,
    "weekly_trends": WeeklyTrendRow,
    "cost_attribution": CostAttributionRow,
    "diagnoses": DiagnosisRow,
    "lake_quarantine": LakeQuarantineRow,
    "lake_missing": LakeMissingRow,
}


def as_dict(row: MartRow) -> dict[str, object]:
    """The row as {column: value}, for a boundary that takes a mapping."""
    return asdict(row)


def as_frame(rows: Sequence[MartRow]) -> pd.DataFrame:
    """The rows as a DataFrame, one column per field; no rows give an empty frame without columns."""
    import pandas as pd  # only the callers that want a frame pay for pandas

    return pd.DataFrame([asdict(row) for row in rows])
